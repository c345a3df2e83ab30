//===- Communicator.cpp - collectives over NCCL, helpers over MPI ---------===//
//
// The step's collectives on the communication stream (NCCL, made at the
// first collective), their waits, the step's one host wait, and the
// trainer's host-side helpers between steps (MPI).
//
//===----------------------------------------------------------------------===//

#include "Backends/CUDA/CudaContext.h"

using namespace loom::runtime::cuda;

namespace loom::runtime::cuda {

void Context::ensureNccl() {
  if (nccl)
    return;
  int64_t before = usedBytes();
  // Every rank starts the same collectives in the same order, so every
  // rank gets here at its first.
  ncclUniqueId id;
  if (rank == 0)
    check(ncclGetUniqueId(&id), "ncclGetUniqueId");
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
  check(ncclCommInitRank(&nccl, size, id, rank), "ncclCommInitRank");
  ncclBytes = usedBytes() - before;
  if (profile)
    profile->memory.push_back({"NCCL communicator", usedBytes() - before});
}

int64_t Context::start(const loom::runtime::CollRequest &request) {
  // No group handle exists here (makeGroup aborts), but say so if one did.
  if (request.comm != LOOMRT_COMM_WORLD)
    abort("communicator groups are not built on the cuda backend");
  int64_t kind = request.kind, reduction = request.reduction,
          dtype = request.dtype, arg = request.arg, in = request.in,
          inCount = request.inCount, out = request.out,
          outCount = request.outCount;
  if (!initialised)
    abort("a collective started before loomrt_init");
  busy();
  int64_t handle = int64_t(collectives.size());
  std::string what = std::string(loom::runtime::collectiveKindName(kind)) +
                     " #" + std::to_string(handle);
  bool counts = kind == LOOMRT_ALL_GATHER       ? inCount * size == outCount
                : kind == LOOMRT_REDUCE_SCATTER ? inCount == outCount * size
                : kind == LOOMRT_BROADCAST
                    ? inCount == outCount && arg >= 0 && arg < size
                : kind == LOOMRT_SEND ? outCount == 0
                : kind == LOOMRT_RECV ? inCount == 0
                                      : inCount == outCount;
  if (!counts)
    abort(what + ": " + std::to_string(inCount) + " elements in, " +
          std::to_string(outCount) + " out do not fit " + std::to_string(size) +
          " ranks");
  ensureNccl();
  Collective c{kind, in, out, event(), event()};
  c.opId = request.opId;
  c.bytes = request.getBytes();
  // The communication stream starts once compute has produced the input.
  cudaEvent_t ready = c.done;
  check(cudaEventRecord(ready, compute), what);
  check(cudaStreamWaitEvent(comm, ready, 0), what);
  check(cudaEventRecord(c.begin, comm), what);
  ncclDataType_t type = dtype == LOOMRT_F64    ? ncclDouble
                        : dtype == LOOMRT_BF16 ? ncclBfloat16
                                               : ncclFloat;
  ncclRedOp_t op = reduction == LOOMRT_MAX   ? ncclMax
                   : reduction == LOOMRT_MIN ? ncclMin
                   : reduction == LOOMRT_AVG ? ncclAvg
                                             : ncclSum;
  const void *src = reinterpret_cast<const void *>(in);
  void *dst = reinterpret_cast<void *>(out);
  switch (kind) {
  case LOOMRT_ALL_GATHER:
    check(ncclAllGather(src, dst, size_t(inCount), type, nccl, comm), what);
    break;
  case LOOMRT_REDUCE_SCATTER:
    check(ncclReduceScatter(src, dst, size_t(outCount), type, op, nccl, comm),
          what);
    break;
  case LOOMRT_ALL_REDUCE:
    check(ncclAllReduce(src, dst, size_t(outCount), type, op, nccl, comm),
          what);
    break;
  case LOOMRT_BROADCAST:
    check(ncclBroadcast(src, dst, size_t(outCount), type, int(arg), nccl, comm),
          what);
    break;
  // Point-to-point, each in its own group on the communication stream.
  // NCCL matches them by order (the tag is MPI's check only).
  case LOOMRT_SEND:
    check(ncclGroupStart(), what);
    check(ncclSend(src, size_t(inCount), type, int(arg), nccl, comm), what);
    check(ncclGroupEnd(), what);
    break;
  case LOOMRT_RECV:
    check(ncclGroupStart(), what);
    check(ncclRecv(dst, size_t(outCount), type, int(arg), nccl, comm), what);
    check(ncclGroupEnd(), what);
    break;
  }
  check(cudaEventRecord(c.done, comm), what);
  collectives.push_back(c);
  return handle;
}

void Context::wait(int64_t handle, int64_t in, int64_t out) {
  if (handle < 0 || handle >= int64_t(collectives.size()) ||
      collectives[handle].waited)
    abort("coll.wait on an unknown or finished collective #" +
          std::to_string(handle));
  Collective &c = collectives[handle];
  if (c.in != in || c.out != out)
    abort("coll.wait with buffers that differ from its start's");
  c.waited = true;
  check(cudaStreamWaitEvent(compute, c.done, 0),
        std::string("waiting for ") +
            loom::runtime::collectiveKindName(c.kind) + " #" +
            std::to_string(handle));
}

std::string Context::pending() {
  for (size_t i = 0; i < collectives.size(); ++i)
    if (cudaEventQuery(collectives[i].done) == cudaErrorNotReady)
      return std::string(
                 loom::runtime::collectiveKindName(collectives[i].kind)) +
             " #" + std::to_string(i);
  return "";
}

void Context::stepSync() {
  check(cudaEventRecord(stepDone, compute), "the end of the step");
  double begin = nowUs();
  while (true) {
    cudaError_t status = cudaEventQuery(stepDone);
    if (status == cudaSuccess)
      break;
    if (status != cudaErrorNotReady) {
      std::string what = pending();
      check(status,
            "the step's kernels" +
                (what.empty() ? std::string() : " (after " + what + ")"));
    }
    ncclResult_t async = ncclSuccess;
    if (nccl && ncclCommGetAsyncError(nccl, &async) == ncclSuccess &&
        async != ncclSuccess && async != ncclInProgress)
      check(async, pending().empty() ? "a collective" : pending());
    if (nowUs() - begin > timeoutS * 1e6) {
      std::string what = pending();
      abort((what.empty() ? std::string("the step") : what) +
            " did not finish in " + std::to_string(int(timeoutS)) +
            " s (LOOMRT_TIMEOUT_S); a rank may have died or diverged");
    }
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
  if (profile && busySinceUs.load() >= 0)
    profileStep((nowUs() - busySinceUs.load()) / 1e3);
  busySinceUs = -1;
  for (size_t i = 0; i < collectives.size(); ++i) {
    Collective &c = collectives[i];
    if (!c.waited)
      abort(std::string(loom::runtime::collectiveKindName(c.kind)) + " #" +
            std::to_string(i) + " was started but never waited for");
    // The duration from its own events (a float of milliseconds since
    // init would lose microseconds in a long run), the start from the init
    // event.
    float ms = 0, startMs = 0;
    check(cudaEventElapsedTime(&ms, c.begin, c.done), "timing");
    check(cudaEventElapsedTime(&startMs, epochEvent, c.begin), "timing");
    double begin = epochEventUs + startMs * 1e3;
    recorder().collective(c.kind, c.opId, c.bytes, begin, begin + ms * 1e3);
    spareEvents.push_back(c.begin);
    spareEvents.push_back(c.done);
  }
  collectives.clear();
  for (OpSpan &span : opSpans) {
    float ms = 0;
    check(cudaEventElapsedTime(&ms, span.begin, span.end), "timing");
    recorder().opTime(span.opId, ms * 1e3);
    spareEvents.push_back(span.begin);
    spareEvents.push_back(span.end);
  }
  opSpans.clear();
}

} // namespace loom::runtime::cuda

extern "C" {

void loomrt_step_sync(void) { context().stepSync(); }

void loomrt_barrier(void) { MPI_Barrier(MPI_COMM_WORLD); }

void loomrt_allreduce_f64(const double *in, double *out, int64_t count,
                          int64_t op) {
  MPI_Allreduce(in, out, int(count), MPI_DOUBLE,
                op == LOOMRT_MAX ? MPI_MAX : MPI_SUM, MPI_COMM_WORLD);
}

void loomrt_gather_f32(const float *in, int64_t count, float *out,
                       int64_t root) {
  MPI_Gather(in, int(count), MPI_FLOAT, out, int(count), MPI_FLOAT, int(root),
             MPI_COMM_WORLD);
}

} // extern "C"

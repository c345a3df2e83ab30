//===- LoomrtCUDA.cpp - loomrt over CUDA and NCCL (the GPU backend) -------===//
//
// One process per GPU, started by mpirun; MPI only bootstraps (the NCCL
// unique id) and carries the trainer's host-side helpers between steps.
//
// Inside a step nothing waits on the host:
//   - kernels (the PTX loomc embeds) and cuBLAS run on one compute stream;
//   - a collective waits for the compute stream's event, runs on the
//     communication stream, and records a `done` event there;
//   - coll.wait makes the compute stream wait for that event.
// loomrt_step_sync is the one host wait, after the step: it polls, so that a
// collective stuck for LOOMRT_TIMEOUT_S seconds is aborted (ncclCommAbort)
// with its name instead of hanging, and a device error names what failed.
//
// loomrt_take_stats: comm_us is the collectives' time on the communication
// stream, from their events; exposed_us (time the compute stream stalled on
// a wait) is not measured on the GPU and is 0.
//
// LOOMRT_PROFILE=1 times every kernel and GEMM with events (which adds a
// little time to each launch) and prints, at exit, the device time per
// kernel and GEMM shape, per step, with the device memory taken by the
// CUDA context, cuBLAS and NCCL.
//
// The MLIR host code loomc emits (gpu-to-llvm) calls the mgpu* functions
// defined here. Kernels are loaded with cudart's library API, never the
// driver API directly, so the trainer starts without a driver and says that
// there is no GPU.
//
//===----------------------------------------------------------------------===//

#include "Backends/Backend.h"
#include "Backends/RuntimeSupport.h"
#include "Kernels/CUDA/CrossEntropy.h"
#include "Kernels/CUDA/EmbeddingGrad.h"
#include "Kernels/CUDA/FlashAttention.h"
#include "loom/Runtime/loomrt.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <mpi.h>
#include <nccl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

using loom::runtime::recorder;

namespace {

/// A collective of the current step and the events that bracket it on the
/// communication stream.
struct Collective {
  int64_t kind;
  int64_t in, out;
  cudaEvent_t begin, done;
  bool waited = false;
  /// For the profile: the start's op id and the larger buffer's bytes.
  int64_t opId = -1, bytes = 0;
};

/// An op's bracket on the compute stream, timed once the step is done.
struct OpSpan {
  int64_t opId;
  cudaEvent_t begin, end;
};

/// A module gpu-to-llvm's constructor registered: the embedded PTX (or
/// cubin), loaded on first use.
struct Module {
  explicit Module(const void *image) : image(image) {}
  const void *image;
  cudaLibrary_t library = nullptr;
  std::unordered_map<std::string, cudaKernel_t> kernels;
};

/// LOOMRT_PROFILE: device time by kernel (or GEMM shape). The first step
/// is kept apart: it pays for loading modules and cuBLAS's first calls of
/// each shape (tens of milliseconds on the ~125M step's first GEMM).
struct Profile {
  struct Span {
    std::string name;
    cudaEvent_t begin, end;
  };
  struct Total {
    int64_t launches = 0;
    double ms = 0;
  };
  std::vector<Span> pending;
  std::map<std::string, Total> totals;
  double stepMs = 0;
  int64_t steps = 0;
  /// The first step's totals, printed only when it was the only one.
  std::map<std::string, Total> warmupTotals;
  double warmupMs = -1;
  std::vector<std::pair<std::string, int64_t>> memory;
};

/// The whole state of the CUDA backend.
class Context : public loom::runtime::Backend {
public:
  int init(int *argc, char ***argv) override;
  int finalize() override;
  [[noreturn]] void abort(const std::string &message) override;
  void check(cudaError_t status, const std::string &what);
  void check(ncclResult_t status, const std::string &what);
  void check(cublasStatus_t status, const std::string &what);

  int64_t start(const loom::runtime::CollRequest &request) override;
  void wait(int64_t handle, int64_t in, int64_t out) override;
  void stepSync();
  /// Device time on the compute stream, read at stepSync.
  void opBegin(int64_t opId) override;
  void opEnd(int64_t opId) override;
  const char *target() const override { return "cuda"; }

  void *alloc(uint64_t bytes);
  void free(void *pointer);
  void copy(void *dst, const void *src, int64_t bytes, cudaMemcpyKind kind,
            const char *what);
  /// Marks the step as in flight (the watchdog's clock starts).
  void busy() {
    double none = -1;
    busySinceUs.compare_exchange_strong(none, nowUs());
  }
  cudaKernel_t kernel(Module &module, const char *name);
  /// Runs `enqueue` (one launch on the compute stream); when profiling,
  /// timed under `nameOf()` (built only then).
  template <typename N, typename F> void timed(N nameOf, F enqueue) {
    if (!profile) {
      enqueue();
      return;
    }
    std::string name = nameOf();
    Profile::Span span{name, event(), event()};
    check(cudaEventRecord(span.begin, compute), "profiling " + name);
    enqueue();
    check(cudaEventRecord(span.end, compute), "profiling " + name);
    profile->pending.push_back(span);
  }
  /// The device's memory in use (every process's), from cudaMemGetInfo.
  int64_t usedBytes() {
    size_t free = 0, total = 0;
    check(cudaMemGetInfo(&free, &total), "cudaMemGetInfo");
    return int64_t(total - free);
  }

  int device = -1;
  /// In use once the context existed: the baseline of loomrt_device_used_bytes.
  int64_t contextBytes = 0;
  /// The named lines of loomrt_device_named_bytes.
  static constexpr size_t kCublasWorkspaceBytes = size_t(32) << 20;
  void *blasWorkspace = nullptr;
  int64_t moduleBytes = 0, ncclBytes = 0;
  std::unique_ptr<Profile> profile;
  bool initialised = false;
  cudaStream_t compute = nullptr, comm = nullptr;
  cublasHandle_t blas = nullptr;
  std::unordered_map<const void *, std::string> kernelNames;

private:
  cudaEvent_t event();
  /// The communicator, made at the first collective: a one-rank step has
  /// none, and NCCL's buffers then cost no device memory.
  void ensureNccl();
  void profileStep(double stepMs);
  void printProfile();
  /// The collective a stuck or failed step was waiting for, or "".
  std::string pending();

  /// Ends the job if the host stays stuck inside a step (a launch blocks
  /// once the device's queue is full behind a collective that never
  /// finishes), where loomrt_step_sync's own check cannot run.
  void watchdog();

  double timeoutS = 300;
  std::atomic<double> busySinceUs{-1};
  std::thread watchdogThread;
  ncclComm_t nccl = nullptr;
  cudaEvent_t epochEvent = nullptr, stepDone = nullptr;
  double epochEventUs = 0;
  std::vector<Collective> collectives;
  std::vector<OpSpan> opSpans;
  std::vector<cudaEvent_t> spareEvents;
  /// Freed device blocks by size. The step allocates its arena on entry and
  /// frees it on exit; handing the same block back keeps cudaMalloc (and
  /// cudaFree, which synchronises the device) out of the step.
  std::multimap<uint64_t, void *> freeBlocks;
  std::unordered_map<void *, uint64_t> blockSizes;
};

Context &context() {
  static Context instance;
  return instance;
}

int Context::init(int *argc, char ***argv) {
  if (MPI_Init(argc, argv) != MPI_SUCCESS) {
    std::fprintf(stderr, "loomrt: MPI_Init failed\n");
    return 1;
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (const char *timeout = std::getenv("LOOMRT_TIMEOUT_S"))
    timeoutS = std::atof(timeout) > 0 ? std::atof(timeout) : timeoutS;

  int devices = 0;
  cudaError_t status = cudaGetDeviceCount(&devices);
  // One process per GPU: the rank's index among the ranks on its node.
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank,
                      MPI_INFO_NULL, &node);
  int localRank = 0, localRanks = 1;
  MPI_Comm_rank(node, &localRank);
  MPI_Comm_size(node, &localRanks);
  MPI_Comm_free(&node);
  // Every rank decides together, so that none is left waiting for another.
  int usable = status == cudaSuccess && localRanks <= devices, all = 0;
  MPI_Allreduce(&usable, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (!all) {
    if (status != cudaSuccess || devices == 0)
      std::fprintf(stderr,
                   "loomrt: rank %d: error: no GPU (%s); this trainer was "
                   "compiled with loomc --target=cuda, compile with "
                   "--target=cpu to train on the CPU\n",
                   rank,
                   status != cudaSuccess ? cudaGetErrorString(status)
                                         : "no CUDA device is visible");
    else if (localRanks > devices)
      std::fprintf(stderr,
                   "loomrt: rank %d: error: %d ranks on this node but %d "
                   "GPUs; the CUDA target runs one process per GPU\n",
                   rank, localRanks, devices);
    MPI_Finalize();
    return 1;
  }
  device = localRank;
  initialised = true;
  check(cudaSetDevice(device), "cudaSetDevice");
  check(cudaFree(nullptr), "creating the CUDA context");
  contextBytes = usedBytes();
  if (const char *p = std::getenv("LOOMRT_PROFILE"); p && *p && *p != '0') {
    profile = std::make_unique<Profile>();
    profile->memory.push_back({"CUDA context", contextBytes});
  }
  check(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking),
        "creating the compute stream");
  check(cudaStreamCreateWithFlags(&comm, cudaStreamNonBlocking),
        "creating the communication stream");
  check(cublasCreate(&blas), "cublasCreate");
  check(cublasSetStream(blas, compute), "cublasSetStream");
  // cuBLAS's workspace is ours, of a known size (what NVIDIA recommends
  // for Hopper), so the log can name it; cuBLAS then allocates none.
  check(cudaMalloc(&blasWorkspace, kCublasWorkspaceBytes),
        "cudaMalloc of cuBLAS's workspace");
  check(cublasSetWorkspace(blas, blasWorkspace, kCublasWorkspaceBytes),
        "cublasSetWorkspace");
  // f32 GEMMs stay f32 unless asked (TF32 would break the 1e-4 agreement
  // with the CPU trainer).
  if (std::getenv("LOOMRT_TF32"))
    check(cublasSetMathMode(blas, CUBLAS_TF32_TENSOR_OP_MATH),
          "cublasSetMathMode");
  check(cudaEventCreate(&epochEvent), "cudaEventCreate");
  check(cudaEventCreateWithFlags(&stepDone, cudaEventDisableTiming),
        "cudaEventCreate");
  check(cudaEventRecord(epochEvent, compute), "cudaEventRecord");
  check(cudaEventSynchronize(epochEvent), "cudaEventSynchronize");
  epochEventUs = nowUs();
  if (profile)
    profile->memory.push_back({"cuBLAS handle", usedBytes() - contextBytes});
  watchdogThread = std::thread([this] { watchdog(); });
  watchdogThread.detach();
  return 0;
}

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

void Context::profileStep(double ms) {
  for (Profile::Span &span : profile->pending) {
    float t = 0;
    check(cudaEventElapsedTime(&t, span.begin, span.end), "profiling");
    Profile::Total &total = profile->totals[span.name];
    ++total.launches;
    total.ms += t;
    spareEvents.push_back(span.begin);
    spareEvents.push_back(span.end);
  }
  profile->pending.clear();
  if (profile->warmupMs < 0) {
    profile->warmupMs = ms;
    std::swap(profile->warmupTotals, profile->totals);
    return;
  }
  profile->stepMs += ms;
  ++profile->steps;
}

void Context::printProfile() {
  if (!profile || profile->warmupMs < 0 || rank != 0)
    return;
  bool warmupOnly = profile->steps == 0;
  if (warmupOnly) {
    std::swap(profile->warmupTotals, profile->totals);
    profile->stepMs = profile->warmupMs;
    profile->steps = 1;
  }
  double steps = double(profile->steps), timed = 0;
  std::vector<std::pair<double, std::string>> order;
  for (auto &[name, total] : profile->totals) {
    timed += total.ms;
    order.push_back({total.ms, name});
  }
  std::sort(order.rbegin(), order.rend());
  std::fprintf(stderr,
               "loomrt: profile of %lld step%s%s: %.3f ms a step, %.3f ms of "
               "it in %zu timed kernels and GEMM shapes\n",
               (long long)profile->steps, profile->steps == 1 ? "" : "s",
               warmupOnly ? " (the first: warm-up included)"
                          : " after the first",
               profile->stepMs / steps, timed / steps, order.size());
  if (!warmupOnly)
    std::fprintf(stderr, "loomrt: the first step (warm-up) took %.3f ms\n",
                 profile->warmupMs);
  std::fprintf(stderr, "%10s %8s %7s  %s\n", "ms/step", "launches", "share",
               "kernel or GEMM (m x n x k)");
  for (auto &[ms, name] : order)
    std::fprintf(stderr, "%10.3f %8lld %6.1f%%  %s\n", ms / steps,
                 (long long)(profile->totals[name].launches / profile->steps),
                 100 * ms / std::max(timed, 1e-9), name.c_str());
  profile->memory.push_back(
      {"in use beyond the context at exit", usedBytes() - contextBytes});
  for (auto &[what, bytes] : profile->memory)
    std::fprintf(stderr, "loomrt: device memory: %s %.1f MiB\n", what.c_str(),
                 double(bytes) / (1 << 20));
}

void Context::watchdog() {
  cudaSetDevice(device);
  while (true) {
    std::this_thread::sleep_for(std::chrono::seconds(1));
    double since = busySinceUs.load();
    // loomrt_step_sync reports a timeout itself when it gets to run; this
    // is the fallback, a little later.
    if (since >= 0 && nowUs() - since > (timeoutS + 10) * 1e6)
      abort("the step did not finish in " + std::to_string(int(timeoutS)) +
            " s (LOOMRT_TIMEOUT_S), stuck before its end; a rank may have "
            "died or diverged");
  }
}

void Context::check(cudaError_t status, const std::string &what) {
  if (status != cudaSuccess)
    abort("CUDA error in " + what + ": " + cudaGetErrorString(status));
}

void Context::check(ncclResult_t status, const std::string &what) {
  if (status != ncclSuccess && status != ncclInProgress)
    abort("NCCL error in " + what + ": " + ncclGetErrorString(status) +
          (nccl ? std::string(" (") + ncclGetLastError(nccl) + ")" : ""));
}

void Context::check(cublasStatus_t status, const std::string &what) {
  if (status != CUBLAS_STATUS_SUCCESS)
    abort("cuBLAS error in " + what + ": " + cublasGetStatusString(status));
}

void Context::abort(const std::string &message) {
  static std::atomic<bool> aborting{false};
  if (aborting.exchange(true)) {
    // Another thread is already ending the job.
    std::this_thread::sleep_for(std::chrono::hours(1));
  }
  std::fprintf(stderr, "loomrt: rank %d: error: %s\n", rank, message.c_str());
  std::fflush(stderr);
  if (nccl) {
    // ncclCommAbort can wait for peers that are gone: give it a few
    // seconds on its own thread, then end the job regardless.
    auto done = std::make_shared<std::atomic<bool>>(false);
    std::thread([comm = nccl, done] {
      ncclCommAbort(comm);
      *done = true;
    }).detach();
    for (int i = 0; i < 50 && !*done; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    nccl = nullptr;
  }
  if (initialised)
    MPI_Abort(MPI_COMM_WORLD, 1);
  std::_Exit(1);
}

cudaEvent_t Context::event() {
  if (!spareEvents.empty()) {
    cudaEvent_t e = spareEvents.back();
    spareEvents.pop_back();
    return e;
  }
  cudaEvent_t e;
  check(cudaEventCreate(&e), "cudaEventCreate");
  return e;
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
          std::to_string(outCount) + " out do not fit " +
          std::to_string(size) + " ranks");
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
    check(ncclBroadcast(src, dst, size_t(outCount), type, int(arg), nccl,
                        comm),
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
      check(status, "the step's kernels" +
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

void Context::opBegin(int64_t opId) {
  if (!opSpans.empty() && opSpans.back().end == nullptr)
    abort("loomrt_op_begin(" + std::to_string(opId) + ") inside op " +
          std::to_string(opSpans.back().opId));
  OpSpan span{opId, event(), nullptr};
  check(cudaEventRecord(span.begin, compute), "profiling op");
  opSpans.push_back(span);
}

void Context::opEnd(int64_t opId) {
  if (opSpans.empty() || opSpans.back().opId != opId ||
      opSpans.back().end != nullptr)
    abort("loomrt_op_end(" + std::to_string(opId) +
          ") without its loomrt_op_begin");
  opSpans.back().end = event();
  check(cudaEventRecord(opSpans.back().end, compute), "profiling op");
}

void *Context::alloc(uint64_t bytes) {
  void *pointer = nullptr;
  auto it = freeBlocks.find(bytes);
  if (it != freeBlocks.end()) {
    pointer = it->second;
    freeBlocks.erase(it);
  } else {
    check(cudaMalloc(&pointer, bytes),
          "cudaMalloc of the step's " + std::to_string(bytes) + " bytes");
    blockSizes[pointer] = bytes;
  }
  loomrt_count_alloc(pointer, int64_t(bytes));
  return pointer;
}

void Context::free(void *pointer) {
  auto it = blockSizes.find(pointer);
  if (it == blockSizes.end())
    abort("mgpuMemFree of memory the step did not allocate");
  loomrt_count_free(pointer);
  freeBlocks.insert({it->second, pointer});
}

cudaKernel_t Context::kernel(Module &module, const char *name) {
  auto it = module.kernels.find(name);
  if (it != module.kernels.end())
    return it->second;
  if (!initialised)
    abort(std::string("kernel ") + name + " used before loomrt_init");
  if (!module.library) {
    int64_t before = usedBytes();
    check(cudaLibraryLoadData(&module.library, module.image, nullptr, nullptr,
                              0, nullptr, nullptr, 0),
          std::string("loading the module of kernel ") + name);
    moduleBytes += usedBytes() - before;
  }
  cudaKernel_t k;
  check(cudaLibraryGetKernel(&k, module.library, name),
        std::string("finding kernel ") + name);
  module.kernels[name] = k;
  kernelNames[k] = name;
  return k;
}

void Context::copy(void *dst, const void *src, int64_t bytes,
                   cudaMemcpyKind kind, const char *what) {
  // On the compute stream, so that the step's kernels see the copy (a
  // plain cudaMemcpy runs on the legacy stream, which the non-blocking
  // compute stream does not wait for).
  check(cudaMemcpyAsync(dst, src, size_t(bytes), kind, compute), what);
  check(cudaStreamSynchronize(compute), what);
}

int Context::finalize() {
  if (!initialised)
    return 0;
  stepSync();
  printProfile();
  if (nccl)
    check(ncclCommDestroy(nccl), "ncclCommDestroy");
  nccl = nullptr;
  cublasDestroy(blas);
  cudaFree(blasWorkspace);
  std::string error = recorder().finish(rank);
  if (!error.empty())
    std::fprintf(stderr, "loomrt: error: rank %d: %s\n", rank, error.c_str());
  initialised = false;
  MPI_Finalize();
  return error.empty() ? 0 : 1;
}

/// CBLAS's CblasTrans (112) and CblasConjTrans (113, the same for real
/// types) against CblasNoTrans (111).
cublasOperation_t operation(int cblasTrans) {
  return cblasTrans == 111 ? CUBLAS_OP_N : CUBLAS_OP_T;
}

/// Runs one cuBLAS GEMM call on the compute stream, timed under "name
/// shape"; a failure names both. `shape` is built only when needed.
template <typename Shape, typename Call>
void blasCall(const char *name, int32_t order, Shape shape, Call call) {
  Context &ctx = context();
  if (order != 101)
    ctx.abort(std::string(name) + ": only row-major (CblasRowMajor)");
  ctx.busy();
  cublasStatus_t status = CUBLAS_STATUS_SUCCESS;
  ctx.timed([&] { return std::string(name) + " " + shape(); },
            [&] { status = call(); });
  if (status != CUBLAS_STATUS_SUCCESS)
    ctx.check(status, std::string(name) + " (" + shape() + ")");
}

/// C = alpha op(A) op(B) + beta C on row-major matrices. A row-major
/// matrix is its column-major transpose, so cuBLAS computes
/// Cᵀ = op(B)ᵀ op(A)ᵀ.
template <typename T, typename Gemm>
void rowMajorGemm(Gemm gemm, const char *name, int32_t order, int32_t transA,
                  int32_t transB, int32_t m, int32_t n, int32_t k, T alpha,
                  const T *a, int32_t lda, const T *b, int32_t ldb, T beta,
                  T *c, int32_t ldc) {
  blasCall(
      name, order,
      [&] {
        return std::to_string(m) + "x" + std::to_string(n) + "x" +
               std::to_string(k);
      },
      [&] {
        return gemm(context().blas, operation(transB), operation(transA), n,
                    m, k, &alpha, b, ldb, a, lda, &beta, c, ldc);
      });
}

/// `count` such GEMMs at strides (in elements) in one strided batched
/// call: convert-linalg-to-blas's batch (attention's heads).
template <typename T, typename Gemm>
void rowMajorBatchedGemm(Gemm gemm, const char *name, int32_t order,
                         int32_t transA, int32_t transB, int32_t m, int32_t n,
                         int32_t k, T alpha, const T *a, int32_t lda,
                         int64_t strideA, const T *b, int32_t ldb,
                         int64_t strideB, T beta, T *c, int32_t ldc,
                         int64_t strideC, int32_t count) {
  blasCall(
      name, order,
      [&] {
        return std::to_string(count) + "x" + std::to_string(m) + "x" +
               std::to_string(n) + "x" + std::to_string(k);
      },
      [&] {
        return gemm(context().blas, operation(transB), operation(transA), n,
                    m, k, &alpha, b, ldb, strideB, a, lda, strideA, &beta, c,
                    ldc, strideC, count);
      });
}

/// A bf16 GEMM (C bf16 or f32, `cType`) through cublasGemmEx (`count`
/// < 0), or `count` of them through cublasGemmStridedBatchedEx; f32
/// accumulation.
void bf16Gemm(const char *name, cudaDataType_t cType, int32_t order,
              int32_t transA, int32_t transB, int32_t m, int32_t n, int32_t k,
              float alpha, const void *a, int32_t lda, int64_t strideA,
              const void *b, int32_t ldb, int64_t strideB, float beta,
              void *c, int32_t ldc, int64_t strideC, int32_t count) {
  blasCall(
      name, order,
      [&] {
        return (count >= 0 ? std::to_string(count) + "x" : std::string()) +
               std::to_string(m) + "x" + std::to_string(n) + "x" +
               std::to_string(k);
      },
      [&] {
        cublasHandle_t blas = context().blas;
        if (count < 0)
          return cublasGemmEx(blas, operation(transB), operation(transA), n,
                              m, k, &alpha, b, CUDA_R_16BF, ldb, a,
                              CUDA_R_16BF, lda, &beta, c, cType, ldc,
                              CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
        return cublasGemmStridedBatchedEx(
            blas, operation(transB), operation(transA), n, m, k, &alpha, b,
            CUDA_R_16BF, ldb, strideB, a, CUDA_R_16BF, lda, strideA, &beta, c,
            cType, ldc, strideC, count, CUBLAS_COMPUTE_32F,
            CUBLAS_GEMM_DEFAULT);
      });
}

/// Runs one of the runtime's own kernel launches, `call` (FlashAttention*.cu,
/// CrossEntropy.cu), on the compute stream, timed under `what`, and stops
/// with a message naming `what` if it fails.
template <typename Call> void onComputeStream(const char *what, Call call) {
  Context &ctx = context();
  ctx.busy();
  cudaError_t status = cudaSuccess;
  ctx.timed([&] { return std::string(what); },
            [&] { status = call(ctx.compute); });
  ctx.check(status, what);
}

/// A fused attention kernel: `function` names the entry point in the
/// message for a head dim the kernels do not take (`supports`).
template <typename Call>
void fusedAttention(const char *function, const char *what, int64_t dim,
                    bool (*supports)(int64_t), Call call) {
  if (!supports(dim))
    context().abort(
        std::string(function) + ": no fused attention kernel for head dim " +
        std::to_string(dim) + " (compile with --fuse-attention=false)");
  onComputeStream(what, call);
}

} // namespace

extern "C" {

void loomrt_step_sync(void) { context().stepSync(); }
int64_t loomrt_blas_scratch_bytes(void) { return 0; }
int64_t loomrt_gemm_scratch_bytes(void) { return 0; }

int64_t loomrt_device_used_bytes(void) {
  Context &c = context();
  return c.usedBytes() - c.contextBytes;
}

loomrt_device_lines loomrt_device_named_bytes(void) {
  Context &c = context();
  return {int64_t(Context::kCublasWorkspaceBytes), c.moduleBytes, c.ncclBytes};
}

void *loomrt_device_alloc(int64_t bytes) {
  void *pointer = nullptr;
  context().check(cudaMalloc(&pointer, size_t(bytes > 0 ? bytes : 1)),
                  "cudaMalloc of a " + std::to_string(bytes) +
                      "-byte trainer buffer");
  return pointer;
}

void loomrt_device_free(void *device) { cudaFree(device); }

void loomrt_copy_to_device(void *device, const void *host, int64_t bytes) {
  context().copy(device, host, bytes, cudaMemcpyHostToDevice,
                 "copying a trainer buffer to the GPU");
}

void loomrt_copy_to_host(void *host, const void *device, int64_t bytes) {
  context().copy(host, device, bytes, cudaMemcpyDeviceToHost,
                 "copying a trainer buffer from the GPU");
}

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

// Matmuls: convert-linalg-to-blas{library=cublas} calls these with CBLAS's
// row-major arguments.
void loomrt_cublas_sgemm(int32_t order, int32_t transA, int32_t transB,
                         int32_t m, int32_t n, int32_t k, float alpha,
                         const float *a, int32_t lda, const float *b,
                         int32_t ldb, float beta, float *c, int32_t ldc) {
  rowMajorGemm(cublasSgemm, "cublasSgemm", order, transA, transB, m, n, k,
               alpha, a, lda, b, ldb, beta, c, ldc);
}

void loomrt_cublas_dgemm(int32_t order, int32_t transA, int32_t transB,
                         int32_t m, int32_t n, int32_t k, double alpha,
                         const double *a, int32_t lda, const double *b,
                         int32_t ldb, double beta, double *c, int32_t ldc) {
  rowMajorGemm(cublasDgemm, "cublasDgemm", order, transA, transB, m, n, k,
               alpha, a, lda, b, ldb, beta, c, ldc);
}

void loomrt_cublas_sgemm_batched(int32_t order, int32_t transA,
                                 int32_t transB, int32_t m, int32_t n,
                                 int32_t k, float alpha, const float *a,
                                 int32_t lda, int64_t strideA, const float *b,
                                 int32_t ldb, int64_t strideB, float beta,
                                 float *c, int32_t ldc, int64_t strideC,
                                 int32_t count) {
  rowMajorBatchedGemm(cublasSgemmStridedBatched, "cublasSgemmStridedBatched",
                      order, transA, transB, m, n, k, alpha, a, lda, strideA,
                      b, ldb, strideB, beta, c, ldc, strideC, count);
}

void loomrt_cublas_dgemm_batched(int32_t order, int32_t transA,
                                 int32_t transB, int32_t m, int32_t n,
                                 int32_t k, double alpha, const double *a,
                                 int32_t lda, int64_t strideA, const double *b,
                                 int32_t ldb, int64_t strideB, double beta,
                                 double *c, int32_t ldc, int64_t strideC,
                                 int32_t count) {
  rowMajorBatchedGemm(cublasDgemmStridedBatched, "cublasDgemmStridedBatched",
                      order, transA, transB, m, n, k, alpha, a, lda, strideA,
                      b, ldb, strideB, beta, c, ldc, strideC, count);
}

void loomrt_cublas_bgemm(int32_t order, int32_t transA, int32_t transB,
                         int32_t m, int32_t n, int32_t k, float alpha,
                         const uint16_t *a, int32_t lda, const uint16_t *b,
                         int32_t ldb, float beta, uint16_t *c, int32_t ldc) {
  bf16Gemm("cublasGemmEx(bf16)", CUDA_R_16BF, order, transA, transB, m, n, k,
           alpha, a, lda, 0, b, ldb, 0, beta, c, ldc, 0, -1);
}

void loomrt_cublas_sbgemm(int32_t order, int32_t transA, int32_t transB,
                          int32_t m, int32_t n, int32_t k, float alpha,
                          const uint16_t *a, int32_t lda, const uint16_t *b,
                          int32_t ldb, float beta, float *c, int32_t ldc) {
  bf16Gemm("cublasGemmEx(bf16->f32)", CUDA_R_32F, order, transA, transB, m,
           n, k, alpha, a, lda, 0, b, ldb, 0, beta, c, ldc, 0, -1);
}

void loomrt_cublas_bgemm_batched(int32_t order, int32_t transA,
                                 int32_t transB, int32_t m, int32_t n,
                                 int32_t k, float alpha, const uint16_t *a,
                                 int32_t lda, int64_t strideA,
                                 const uint16_t *b, int32_t ldb,
                                 int64_t strideB, float beta, uint16_t *c,
                                 int32_t ldc, int64_t strideC, int32_t count) {
  bf16Gemm("cublasGemmStridedBatchedEx(bf16)", CUDA_R_16BF, order, transA,
           transB, m, n, k, alpha, a, lda, strideA, b, ldb, strideB, beta, c,
           ldc, strideC, count);
}

void loomrt_cublas_sbgemm_batched(int32_t order, int32_t transA,
                                  int32_t transB, int32_t m, int32_t n,
                                  int32_t k, float alpha, const uint16_t *a,
                                  int32_t lda, int64_t strideA,
                                  const uint16_t *b, int32_t ldb,
                                  int64_t strideB, float beta, float *c,
                                  int32_t ldc, int64_t strideC,
                                  int32_t count) {
  bf16Gemm("cublasGemmStridedBatchedEx(bf16->f32)", CUDA_R_32F, order, transA,
           transB, m, n, k, alpha, a, lda, strideA, b, ldb, strideB, beta, c,
           ldc, strideC, count);
}

// Fused attention (FlashAttention.cu, FlashAttentionBf16.cu) on the compute
// stream.
void loomrt_attention_f32(const float *q, const float *k, const float *v,
                          float *out, float *lse, int64_t batch, int64_t seq,
                          int64_t heads, int64_t kvHeads, int64_t dim,
                          int32_t causal, float scale) {
  fusedAttention("loomrt_attention_f32", "the fused attention forward", dim,
                 loom::flash::supports, [&](cudaStream_t stream) {
                   return loom::flash::forward(stream, q, k, v, out, lse,
                                               batch, seq, heads, kvHeads,
                                               dim, causal, scale);
                 });
}

void loomrt_attention_grad_f32(const float *q, const float *k, const float *v,
                               const float *out, const float *lse,
                               const float *dout, float *dq, float *dk,
                               float *dv, float *delta, int64_t batch,
                               int64_t seq, int64_t heads, int64_t kvHeads,
                               int64_t dim, int32_t causal, float scale) {
  fusedAttention("loomrt_attention_grad_f32", "the fused attention backward",
                 dim, loom::flash::supports, [&](cudaStream_t stream) {
                   return loom::flash::backward(
                       stream, q, k, v, out, lse, dout, dq, dk, dv, delta,
                       batch, seq, heads, kvHeads, dim, causal, scale);
                 });
}

void loomrt_attention_bf16(const uint16_t *q, const uint16_t *k,
                           const uint16_t *v, uint16_t *out, float *lse,
                           int64_t batch, int64_t seq, int64_t heads,
                           int64_t kvHeads, int64_t dim, int32_t causal,
                           float scale) {
  fusedAttention("loomrt_attention_bf16", "the fused bf16 attention forward",
                 dim, loom::flash::supportsBf16, [&](cudaStream_t stream) {
                   return loom::flash::forwardBf16(stream, q, k, v, out, lse,
                                                   batch, seq, heads, kvHeads,
                                                   dim, causal, scale);
                 });
}

void loomrt_attention_grad_bf16(const uint16_t *q, const uint16_t *k,
                                const uint16_t *v, const uint16_t *out,
                                const float *lse, const uint16_t *dout,
                                uint16_t *dq, uint16_t *dk, uint16_t *dv,
                                float *delta, int64_t batch, int64_t seq,
                                int64_t heads, int64_t kvHeads, int64_t dim,
                                int32_t causal, float scale) {
  fusedAttention("loomrt_attention_grad_bf16",
                 "the fused bf16 attention backward", dim,
                 loom::flash::supportsBf16, [&](cudaStream_t stream) {
                   return loom::flash::backwardBf16(
                       stream, q, k, v, out, lse, dout, dq, dk, dv, delta,
                       batch, seq, heads, kvHeads, dim, causal, scale);
                 });
}

// The fused loss's row kernels (CrossEntropy.cu), on the compute stream.
void loomrt_cross_entropy_f32(const float *logits, const int32_t *labels,
                              float *lse, float *loss, int64_t rows,
                              int64_t vocab, int64_t ignoreIndex,
                              double smoothing, double zLoss, double softcap) {
  onComputeStream("the fused loss's row kernel", [&](cudaStream_t stream) {
    return loom::xent::forward(stream, logits, labels, lse, loss, rows, vocab,
                               {ignoreIndex, smoothing, zLoss, softcap});
  });
}

void loomrt_cross_entropy_grad_f32(const int32_t *labels, const float *lse,
                                   const float *weights, float *grad,
                                   int64_t rows, int64_t vocab,
                                   int64_t columnOffset, int64_t totalVocab,
                                   double smoothing, double zLoss,
                                   double softcap) {
  onComputeStream("the fused loss's gradient kernel", [&](cudaStream_t stream) {
    return loom::xent::backward(stream, grad, labels, lse, weights, grad, rows,
                                vocab, columnOffset, totalVocab,
                                {0, smoothing, zLoss, softcap});
  });
}

void loomrt_cross_entropy_grad_bf16(const float *logits, const int32_t *labels,
                                    const float *lse, const float *weights,
                                    uint16_t *grad, int64_t rows, int64_t vocab,
                                    int64_t columnOffset, int64_t totalVocab,
                                    double smoothing, double zLoss,
                                    double softcap) {
  onComputeStream(
      "the fused loss's bf16 gradient kernel", [&](cudaStream_t stream) {
        return loom::xent::backwardBf16(
            stream, logits, labels, lse, weights, grad, rows, vocab,
            columnOffset, totalVocab, {0, smoothing, zLoss, softcap});
      });
}

// The embedding gradient's scatter-add (EmbeddingGrad.cu).
void loomrt_embedding_grad_f32(const int32_t *ids, const float *grad,
                               float *table, float *partial, int64_t tokens,
                               int64_t rows, int64_t width) {
  onComputeStream("the embedding gradient", [&](cudaStream_t stream) {
    return loom::embedding::gradient(stream, ids, grad, table, partial, tokens,
                                     rows, width);
  });
}

void loomrt_embedding_grad_bf16(const int32_t *ids, const uint16_t *grad,
                                uint16_t *table, float *partial, int64_t tokens,
                                int64_t rows, int64_t width) {
  onComputeStream("the embedding gradient", [&](cudaStream_t stream) {
    return loom::embedding::gradientBf16(stream, ids, grad, table, partial,
                                         tokens, rows, width);
  });
}

// The runtime ABI of MLIR's gpu-to-llvm lowering. Module constructors run
// before main, so loading waits for the first launch. Every launch goes on
// the compute stream: the "stream" gpu-to-llvm creates around a synchronous
// launch is that stream, and its synchronisation is stream order.
void *mgpuModuleLoad(void *data, size_t) { return new Module(data); }
void *mgpuModuleLoadJIT(void *data, int) { return new Module(data); }
void mgpuModuleUnload(void *module) {
  // At exit the CUDA runtime may already be gone; the process ends anyway.
  delete static_cast<Module *>(module);
}

void *mgpuModuleGetFunction(void *module, const char *name) {
  return reinterpret_cast<void *>(
      context().kernel(*static_cast<Module *>(module), name));
}

void mgpuLaunchKernel(void *function, intptr_t gridX, intptr_t gridY,
                      intptr_t gridZ, intptr_t blockX, intptr_t blockY,
                      intptr_t blockZ, int32_t sharedBytes, void *stream,
                      void **params, void **, size_t) {
  Context &c = context();
  c.busy();
  cudaError_t status = cudaSuccess;
  c.timed(
      [&] {
        return c.kernelNames[function] + " <<<" + std::to_string(gridX) +
               ", " + std::to_string(blockX) + ">>>";
      },
      [&] {
        status = cudaLaunchKernel(
            function, dim3(unsigned(gridX), unsigned(gridY), unsigned(gridZ)),
            dim3(unsigned(blockX), unsigned(blockY), unsigned(blockZ)),
            params, size_t(sharedBytes), static_cast<cudaStream_t>(stream));
      });
  if (status != cudaSuccess)
    c.check(status, "launching kernel " + c.kernelNames[function]);
}

void *mgpuStreamCreate() { return context().compute; }
void mgpuStreamDestroy(void *) {}
void mgpuStreamSynchronize(void *) {}

void *mgpuMemAlloc(uint64_t bytes, void *, bool hostShared) {
  if (hostShared)
    context().abort("host-shared GPU memory is not supported");
  return context().alloc(bytes);
}

void mgpuMemFree(void *pointer, void *) { context().free(pointer); }

void mgpuMemcpy(void *dst, void *src, size_t bytes, void *stream) {
  context().check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault,
                                  static_cast<cudaStream_t>(stream)),
                  "mgpuMemcpy");
}

void mgpuMemset32(void *dst, unsigned value, size_t count, void *stream) {
  // Only zero and repeated bytes can use cudaMemsetAsync.
  unsigned byte = value & 0xff;
  if (value != (byte * 0x01010101u))
    context().abort("mgpuMemset32 of a non-byte pattern is not supported");
  context().check(cudaMemsetAsync(dst, int(byte), count * 4,
                                  static_cast<cudaStream_t>(stream)),
                  "mgpuMemset32");
}

} // extern "C"

// BackendCApi.cpp's entry points run on this backend.
loom::runtime::Backend &loom::runtime::backend() { return context(); }

//===- Context.cpp - the CUDA backend's start-up and shutdown -------------===//
//
// Start-up (MPI, the device, the streams, cuBLAS), shutdown, errors that
// name what failed, the watchdog of a stuck step and LOOMRT_PROFILE's
// timings.
//
//===----------------------------------------------------------------------===//

#include "Backends/CUDA/CudaContext.h"

using namespace loom::runtime::cuda;

namespace loom::runtime::cuda {

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
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL,
                      &node);
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

} // namespace loom::runtime::cuda

// BackendCApi.cpp's entry points run on this backend.
loom::runtime::Backend &loom::runtime::backend() { return context(); }

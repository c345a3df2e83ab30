//===- CudaContext.h - loomrt over CUDA and NCCL ----------------*- C++ -*-===//
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
//
// The backend is split by concern: Context.cpp (start-up, errors, the
// watchdog, the profile), Communicator.cpp (NCCL and MPI), Memory.cpp (the
// allocator, copies and streams), Blas.cpp (cuBLAS) and Kernels.cpp (the
// embedded modules' and the runtime's own kernel launches).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_BACKENDS_CUDA_CUDACONTEXT_H
#define LOOM_RUNTIME_BACKENDS_CUDA_CUDACONTEXT_H

#include "Backends/Backend.h"
#include "Backends/RuntimeSupport.h"
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

namespace loom::runtime::cuda {

using loom::runtime::recorder;

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

/// The process's backend state.
Context &context();

} // namespace loom::runtime::cuda

#endif // LOOM_RUNTIME_BACKENDS_CUDA_CUDACONTEXT_H

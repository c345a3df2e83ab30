//===- CompileOptions.h - every choice a compile makes ----------*- C++ -*-===//
//
// One struct for what loomc's flags choose, with the defaults written once.
// The phase pipelines' option structs (loom/Pipelines/Pipelines.h) are made
// from it, and registerCompileCLOptions() declares the flags a tool parses
// into it.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_DRIVER_COMPILEOPTIONS_H
#define LOOM_DRIVER_COMPILEOPTIONS_H

#include "loom/Pipelines/Pipelines.h"
#include "loom/Target/Passes.h"
#include "llvm/Support/CommandLine.h"
#include <string>

namespace loom::driver {

/// Where a compile stops: after a phase, or at a file format, in the order
/// it reaches them.
enum class EmitPoint {
  TrainingStep, ///< after loom-training-step-pipeline
  Step,         ///< after loom-sharding-pipeline
  MemoryPlan,   ///< after loom-memory-plan-pipeline
  Mlir,         ///< after loom-entry-pipeline
  LlvmMlir,     ///< after the lowering pipeline
  Ptx,          ///< the CUDA target's kernels
  Llvm,         ///< LLVM IR
  Obj,          ///< an object file
  Exe           ///< the trainer executable
};

struct CompileOptions {
  Target target = Target::Cpu;
  EmitPoint emit = EmitPoint::Exe;
  /// Print each phase's pipeline as loom-opt's --pass-pipeline takes it,
  /// and the link command.
  bool verbose = false;
  /// Verify the IR after every pass, not only after every phase.
  bool verifyEach = false;
  /// The input's file name, which the trainer reports (entry's source=).
  std::string sourceName;

  // The training step.
  int64_t fuseCrossEntropy = 256;
  int64_t fuseCrossEntropyVocab = 0;
  Optimizer optimizer = Optimizer::AdamW;
  double lr = 1e-3;
  double weightDecay = 0.0;
  /// Also compile the forward alone, the trainer's evaluation step
  /// (loom_step_packed_eval: the loss on held-out data, no gradients).
  bool eval = false;

  // Sharding and scheduling.
  int64_t worldSize = 1;
  ZeroStage zeroStage = ZeroStage::None;
  double memoryLimitMb = 0;
  double rematBudgetMb = 0;
  double rematActivations = 1;
  std::string rematSolver = "chain";
  Schedule schedule = Schedule::Loom;
  /// The device every cost estimate is made for (loom-set-target's
  /// device); empty: cpu, or h100-nvlink for CUDA (targetDevice()).
  std::string device;
  /// A trainer's --profile: measured times replacing the estimates.
  std::string profile;

  // Pipeline parallelism.
  int64_t pipelineStages = 1;
  int64_t microbatches = 1;
  std::string pipelineSchedule = "1f1b";
  std::string pipelineLayout;

  // The memory plan.
  bool fuseAttention = true;
  TargetDefault lossKernels = TargetDefault::Auto;
  TargetDefault embeddingKernel = TargetDefault::Auto;
  bool widenCompute = true;
  bool memoryPlan = true;
  TargetDefault fuseElementwise = TargetDefault::Auto;
  int64_t gpuSplitReduction = 32;
  int64_t gpuSplitMinRows = 1024;

  // Lowering.
  bool vectorize = true;
  bool emulateGpu = false;
  std::string gpuChip = "sm_90";
  GpuFormat gpuFormat = GpuFormat::Cubin;
  int64_t gpuThreads = 256;
  int64_t gpuBlockReduce = 128;
  int64_t gpuVectorBytes = 16;

  // The machine code and the link.
  std::string cpu = "native";
  std::string cpuFeatures;
  unsigned optLevel = 2;
  /// Where libloomrt_*.a and libloomtrainer.a are.
  std::string runtimeDir;

  CompileOptions();

  /// Data-parallel replicas of each pipeline stage (the world without
  /// stages).
  int64_t replicas() const {
    return pipelineStages > 1 ? worldSize / pipelineStages : worldSize;
  }
  bool remat() const { return rematBudgetMb > 0 || rematActivations < 1; }

  /// Checks the options together (and reads --profile's file to check it
  /// was measured for this target and world). An empty string when they
  /// hold, else what is wrong, one line.
  std::string verify() const;

  /// The device loom-set-target reads: --device, else the target's default.
  std::string targetDevice() const;

  /// The phase pipelines' options, set from these.
  void fill(target::LoomSetTargetPassOptions &setTarget) const;
  void fill(TrainingStepOptions &step) const;
  void fill(ShardingOptions &sharding) const;
  void fill(MemoryPlanOptions &plan) const;
  void fill(EntryOptions &entry) const;
  void fill(LowerToCpuOptions &lowering) const;
  void fill(LowerToCudaOptions &lowering) const;
};

/// Declares the command-line flags of CompileOptions (--target, --emit,
/// --world-size, ...) in `category`, once per process.
void registerCompileCLOptions(llvm::cl::OptionCategory &category);
/// The options the registered flags were parsed into.
CompileOptions compileOptionsFromCL();
/// Parses `flags` (loomc's, e.g. "--world-size=2") into `options`, from
/// the defaults, for a client without a command line (the Python API):
/// the flags stay declared once. Resets every registered option first, so
/// it can be called again. False, with `error` set, for an unknown flag or
/// a bad value (a bad enum value is printed to stderr by LLVM's parser).
/// Not thread-safe: the flags are the process's.
bool parseCompileFlags(llvm::ArrayRef<std::string> flags,
                       CompileOptions &options, std::string &error);

} // namespace loom::driver

#endif // LOOM_DRIVER_COMPILEOPTIONS_H

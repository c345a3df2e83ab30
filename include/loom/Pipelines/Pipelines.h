//===- Pipelines.h - loomc's phases as registered pipelines -----*- C++ -*-===//
//
// loomc compiles a forward in phases, each a pass pipeline built here and
// registered with loom-opt under the same name, so that running the phases
// in turn with loom-opt reproduces loomc's output:
//
//   loom-training-step-pipeline   forward -> training step (loss, gradients,
//                                 optimizer update)
//   loom-sharding-pipeline        ZeRO partition and the communication
//                                 schedule (loom-schedule-pipeline)
//   loom-memory-plan-pipeline     decomposed train ops, codegen on tensors,
//                                 the static memory plan
//   loom-entry-pipeline           the trainer's entry point, runtime calls
//   loom-lower-to-cpu-pipeline    buffers, BLAS, vector loops, LLVM dialect,
//   loom-lower-to-cuda-pipeline   or cuBLAS, GPU kernels (PTX/cubin), LLVM
//                                 dialect; then the trainer's manifest
//
// and loom-reference-pipeline, the plain lowering loom-run evaluates with.
// Each builder takes its options struct; the driver (lib/Driver, whose
// CompileOptions fills them) and loom-run call the builders, nothing else
// spells out a pipeline.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_PIPELINES_PIPELINES_H
#define LOOM_PIPELINES_PIPELINES_H

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

namespace loom {

/// What the step is compiled for.
enum class Target { Cpu, Cuda };
/// The optimizer train-optimizer appends (none: gradients only, for
/// analyses).
enum class Optimizer { None, AdamW, Sgd };
/// ZeRO's stages: what is sharded across the ranks.
enum class ZeroStage : unsigned {
  None = 0,           ///< nothing (one rank)
  OptimizerState = 1, ///< optimizer state
  Gradients = 2,      ///< and gradients
  Parameters = 3,     ///< and parameters, gathered where they are used
};
/// A choice whose default depends on the target (auto: on for CUDA).
enum class TargetDefault { Auto, On, Off };
/// How the CUDA target embeds its kernels: cubin (ptxas at compile time) or
/// PTX (the driver compiles them at the first launch).
enum class GpuFormat { Cubin, Ptx };

/// The collectives' order after ZeRO: Loom's scheduler, or a baseline users
/// run (coll-reorder-baseline's policies).
enum class Schedule { Loom, Synchronous, Fsdp, Original };

/// The name of `optimizer` as train-optimizer spells it.
llvm::StringRef stringifyOptimizer(Optimizer optimizer);

struct TrainingStepOptions
    : public mlir::PassPipelineOptions<TrainingStepOptions> {
  Option<int64_t> fuseCrossEntropy{
      *this, "fuse-cross-entropy",
      llvm::cl::desc("fuse the output projection into the loss, holding "
                     "this many tokens' logits at a time (0: keep the "
                     "logits)"),
      llvm::cl::init(256)};
  Option<int64_t> fuseCrossEntropyVocab{
      *this, "fuse-cross-entropy-vocab",
      llvm::cl::desc("with the fused loss, also loop over blocks of this "
                     "many vocabulary entries (0: the whole vocabulary)"),
      llvm::cl::init(0)};
  Option<Optimizer> optimizer{
      *this, "optimizer", llvm::cl::desc("the optimizer update"),
      llvm::cl::init(Optimizer::AdamW),
      llvm::cl::values(
          clEnumValN(Optimizer::AdamW, "adamw", "AdamW"),
          clEnumValN(Optimizer::Sgd, "sgd", "SGD"),
          clEnumValN(Optimizer::None, "none",
                     "none: the step returns gradients (analyses only)"))};
  Option<double> lr{*this, "lr",
                    llvm::cl::desc("the learning rate (the trainer's "
                                   "default; a run-time input)"),
                    llvm::cl::init(1e-3)};
  Option<double> weightDecay{*this, "weight-decay",
                             llvm::cl::desc("AdamW/SGD weight decay"),
                             llvm::cl::init(0.0)};
  Option<bool> forwardOnly{
      *this, "forward-only",
      llvm::cl::desc("the forward alone, its loss the only result (the "
                     "trainer's evaluation step): no microbatches, "
                     "gradients, update or stages"),
      llvm::cl::init(false)};
  Option<int64_t> microbatches{
      *this, "microbatches",
      llvm::cl::desc("split the batch into this many microbatches whose "
                     "gradients accumulate (train-microbatch)"),
      llvm::cl::init(1)};
  Option<int64_t> pipelineStages{
      *this, "pipeline-stages",
      llvm::cl::desc("split the step into this many pipeline stages "
                     "(pp-partition; 1: none)"),
      llvm::cl::init(1)};
  Option<int64_t> pipelineReplicas{
      *this, "pipeline-replicas",
      llvm::cl::desc("data-parallel replicas of the pipeline (pp-partition "
                     "replicas; the world is stages x replicas)"),
      llvm::cl::init(1)};
  Option<std::string> pipelineSchedule{
      *this, "pipeline-schedule",
      llvm::cl::desc("the stages' schedule: gpipe, 1f1b or zb-h1"),
      llvm::cl::init("1f1b")};
  Option<std::string> pipelineLayout{
      *this, "pipeline-layout",
      llvm::cl::desc("units per stage in Megatron's syntax (empty: "
                     "balanced on the cost model)"),
      llvm::cl::init("")};
};

struct ShardingOptions : public mlir::PassPipelineOptions<ShardingOptions> {
  Option<Target> target{
      *this, "target",
      llvm::cl::desc("the target, whose kernels attention may run as"),
      llvm::cl::init(Target::Cpu),
      llvm::cl::values(clEnumValN(Target::Cpu, "cpu", "CPU"),
                       clEnumValN(Target::Cuda, "cuda", "CUDA"))};
  Option<bool> fuseAttention{
      *this, "fuse-attention",
      llvm::cl::desc("attention and its gradient as the runtime's fused "
                     "kernels (train-fuse-attention), chosen before "
                     "anything measures the step's memory"),
      llvm::cl::init(true)};
  Option<std::string> footprintLowering{
      *this, "footprint-lowering",
      llvm::cl::desc("how the memory-plan phase lowers train ops, for "
                     "train-footprint (a pipeline on builtin.module; "
                     "empty: loom-memory-plan-pipeline's defaults for the "
                     "target, without the plan)"),
      llvm::cl::init("")};
  Option<ZeroStage> zeroStage{
      *this, "zero-stage", llvm::cl::desc("the ZeRO stage"),
      llvm::cl::init(ZeroStage::None),
      llvm::cl::values(
          clEnumValN(ZeroStage::None, "0", "nothing sharded"),
          clEnumValN(ZeroStage::OptimizerState, "1", "optimizer state"),
          clEnumValN(ZeroStage::Gradients, "2", "and gradients"),
          clEnumValN(ZeroStage::Parameters, "3", "and parameters"))};
  Option<int64_t> worldSize{*this, "world-size", llvm::cl::desc("ranks"),
                            llvm::cl::init(1)};
  Option<double> memoryLimitMb{
      *this, "memory-limit-mb",
      llvm::cl::desc("scheduler memory limit, MiB (0: 5% above the "
                     "synchronous order's peak)"),
      llvm::cl::init(0)};
  Option<double> rematBudgetMb{
      *this, "remat-budget-mb",
      llvm::cl::desc("train-remat's budget on the step's peak, MiB "
                     "(0: no rematerialisation)"),
      llvm::cl::init(0)};
  Option<double> rematActivations{
      *this, "remat-activations",
      llvm::cl::desc("train-remat's activation-budget: the activations kept "
                     "at the loss, a fraction of the step's without "
                     "recomputation (PyTorch's activation_memory_budget); "
                     "1: no bound"),
      llvm::cl::init(1)};
  Option<std::string> rematSolver{
      *this, "remat-solver",
      llvm::cl::desc("train-remat's solver: chain, ilp, none, every-layer, "
                     "sqrt or knapsack"),
      llvm::cl::init("chain")};
  Option<bool> leanestBelowFloor{
      *this, "leanest-below-floor",
      llvm::cl::desc("a remat budget below the smallest peak train-remat "
                     "reaches takes that peak, and the scheduler keeps the "
                     "synchronous order, each with a remark (train-remat "
                     "leanest-below-floor, coll-overlap-schedule "
                     "synchronous-below-floor)"),
      llvm::cl::init(false)};
  Option<Schedule> schedule{
      *this, "schedule", llvm::cl::desc("the collectives' order"),
      llvm::cl::init(Schedule::Loom),
      llvm::cl::values(
          clEnumValN(Schedule::Loom, "loom",
                     "loom-schedule-pipeline under the memory limit"),
          clEnumValN(Schedule::Synchronous, "synchronous",
                     "every collective waited at its start"),
          clEnumValN(Schedule::Fsdp, "fsdp", "PyTorch FSDP's policy"),
          clEnumValN(Schedule::Original, "original",
                     "zero-partition's order"))};
};

struct SchedulePipelineOptions
    : public mlir::PassPipelineOptions<SchedulePipelineOptions> {
  Option<double> memoryLimitMb{
      *this, "memory-limit-mb",
      llvm::cl::desc("the step's peak may not exceed this, MiB (0: the "
                     "synchronous peak plus the headroom)"),
      llvm::cl::init(0)};
  Option<double> rematBudgetMb{
      *this, "remat-budget-mb",
      llvm::cl::desc(
          "train-remat's budget on the step's peak, MiB "
          "(0: no rematerialisation); the scheduler's limit too unless "
          "memory-limit-mb is given"),
      llvm::cl::init(0)};
  Option<double> rematActivations{
      *this, "remat-activations",
      llvm::cl::desc("train-remat's activation-budget: the activations kept "
                     "at the loss, a fraction of the step's without "
                     "recomputation (PyTorch's activation_memory_budget); "
                     "1: no bound"),
      llvm::cl::init(1)};
  Option<std::string> rematSolver{
      *this, "remat-solver",
      llvm::cl::desc("train-remat's solver: chain, ilp, none, every-layer, "
                     "sqrt or knapsack"),
      llvm::cl::init("chain")};
  Option<bool> leanestBelowFloor{
      *this, "leanest-below-floor",
      llvm::cl::desc("a remat budget below the smallest peak train-remat "
                     "reaches takes that peak, and the scheduler keeps the "
                     "synchronous order, each with a remark (train-remat "
                     "leanest-below-floor, coll-overlap-schedule "
                     "synchronous-below-floor)"),
      llvm::cl::init(false)};
  Option<double> memoryHeadroom{
      *this, "memory-headroom",
      llvm::cl::desc("without a limit: the fraction above the synchronous "
                     "order's peak overlap may use"),
      llvm::cl::init(0.05)};
  Option<double> gatherBudgetMb{
      *this, "gather-budget-mb",
      llvm::cl::desc("memory for parameters kept gathered from the forward "
                     "into the backward, MiB (0: none)"),
      llvm::cl::init(0)};
  // Off by default: coll-bucket judges a merge against the order it is
  // given (zero-partition's, every reduce-scatter waited at the update),
  // where any merge looks free; on a real slow link its 25 MiB buckets
  // made the scheduled step 11% slower (docs/benchmarks.md, overlap_link).
  Option<double> bucketMb{*this, "bucket-mb",
                          llvm::cl::desc("largest bucket, MiB (0: no "
                                         "bucketing)"),
                          llvm::cl::init(0)};
  Option<double> firstBucketMb{*this, "first-bucket-mb",
                               llvm::cl::desc("largest first bucket, MiB"),
                               llvm::cl::init(1)};
  Option<unsigned> distance{
      *this, "distance",
      llvm::cl::desc("furthest an all-gather start moves, in ops"),
      llvm::cl::init(200)};
};

/// The GPU kernel mapping's options, shared by the memory plan (split
/// reductions leave enough blocks), the CUDA lowering and --emulate-gpu.
struct GpuMappingOptions {
  int64_t threads = 256, blockReduceMin = 128, vectorBytes = 16;
};

/// The values of a TargetDefault option.
inline auto targetDefaultValues() {
  return llvm::cl::values(
      clEnumValN(TargetDefault::Auto, "auto", "the target's default"),
      clEnumValN(TargetDefault::On, "true", "on"),
      clEnumValN(TargetDefault::Off, "false", "off"));
}

struct MemoryPlanOptions : public mlir::PassPipelineOptions<MemoryPlanOptions> {
  Option<Target> target{
      *this, "target", llvm::cl::desc("the target"),
      llvm::cl::init(Target::Cpu),
      llvm::cl::values(clEnumValN(Target::Cpu, "cpu", "CPU"),
                       clEnumValN(Target::Cuda, "cuda", "CUDA"))};
  Option<bool> emulateGpu{
      *this, "emulate-gpu",
      llvm::cl::desc("with target=cpu: plan for the CUDA target's kernels, "
                     "run on the CPU"),
      llvm::cl::init(false)};
  Option<TargetDefault> lossKernels{
      *this, "loss-kernels",
      llvm::cl::desc(
          "the fused loss's row work as runtime kernels "
          "(convert-train-to-kernels{loss-kernels}; auto: on for cuda)"),
      llvm::cl::init(TargetDefault::Auto), targetDefaultValues()};
  Option<TargetDefault> embeddingKernel{
      *this, "embedding-kernel",
      llvm::cl::desc(
          "the embedding gradient as the runtime's kernel "
          "(convert-train-to-kernels{embedding-kernel}; auto: on for "
          "cuda)"),
      llvm::cl::init(TargetDefault::Auto), targetDefaultValues()};
  Option<bool> widenCompute{*this, "widen-compute",
                            llvm::cl::desc("compute bf16/f16 linalg ops in f32 "
                                           "(codegen-widen-compute)"),
                            llvm::cl::init(true)};
  Option<TargetDefault> fuseElementwise{
      *this, "gpu-fuse-elementwise",
      llvm::cl::desc("with GPU kernels: fuse elementwise producers into "
                     "their consumers (gpu-fuse-elementwise; auto: on for "
                     "cuda)"),
      llvm::cl::init(TargetDefault::Auto), targetDefaultValues()};
  Option<int64_t> splitReduction{
      *this, "gpu-split-reduction",
      llvm::cl::desc("with GPU kernels: rows each partial of a column "
                     "reduction folds (gpu-split-reduction rows; 0: none)"),
      llvm::cl::init(32)};
  Option<int64_t> splitMinRows{
      *this, "gpu-split-min-rows",
      llvm::cl::desc("split only column reductions of at least this many "
                     "rows"),
      llvm::cl::init(1024)};
  Option<int64_t> gpuThreads{*this, "gpu-threads",
                             llvm::cl::desc("threads per block of the GPU "
                                            "kernels"),
                             llvm::cl::init(256)};
  Option<bool> memoryPlan{
      *this, "memory-plan",
      llvm::cl::desc("place temporaries in one arena (codegen-memory-plan)"),
      llvm::cl::init(true)};
};

struct EntryOptions : public mlir::PassPipelineOptions<EntryOptions> {
  Option<std::string> source{
      *this, "source",
      llvm::cl::desc("the model file the manifest names (default: the "
                     "module's location)"),
      llvm::cl::init("")};
};

struct LowerToCpuOptions : public mlir::PassPipelineOptions<LowerToCpuOptions> {
  Option<bool> memoryPlan{
      *this, "memory-plan",
      llvm::cl::desc("place what bufferisation allocates outside the plan "
                     "in an arena (codegen-pack-buffers)"),
      llvm::cl::init(true)};
  Option<bool> vectorize{
      *this, "vectorize",
      llvm::cl::desc("vector loops for what BLAS does not take "
                     "(cpu-vectorize)"),
      llvm::cl::init(true)};
  Option<bool> emulateGpu{
      *this, "emulate-gpu",
      llvm::cl::desc("map linalg ops as the CUDA target does "
                     "(gpu-map-linalg) and run the loops on the CPU"),
      llvm::cl::init(false)};
  Option<int64_t> gpuThreads{*this, "gpu-threads",
                             llvm::cl::desc("with emulate-gpu: threads per "
                                            "block"),
                             llvm::cl::init(256)};
  Option<int64_t> gpuBlockReduce{
      *this, "gpu-block-reduce",
      llvm::cl::desc("with emulate-gpu: rows this long get a block"),
      llvm::cl::init(128)};
  Option<int64_t> gpuVectorBytes{
      *this, "gpu-vector-bytes",
      llvm::cl::desc("with emulate-gpu: bytes each thread loads"),
      llvm::cl::init(16)};
};

struct LowerToCudaOptions
    : public mlir::PassPipelineOptions<LowerToCudaOptions> {
  Option<bool> memoryPlan{
      *this, "memory-plan",
      llvm::cl::desc("place what bufferisation allocates outside the plan "
                     "in an arena (codegen-pack-buffers)"),
      llvm::cl::init(true)};
  Option<std::string> chip{*this, "gpu-chip",
                           llvm::cl::desc("the GPU the kernels are for"),
                           llvm::cl::init("sm_90")};
  Option<GpuFormat> format{
      *this, "gpu-format", llvm::cl::desc("how the kernels are embedded"),
      llvm::cl::init(GpuFormat::Cubin),
      llvm::cl::values(clEnumValN(GpuFormat::Cubin, "cubin", "cubin"),
                       clEnumValN(GpuFormat::Ptx, "ptx", "PTX"))};
  Option<int64_t> gpuThreads{*this, "gpu-threads",
                             llvm::cl::desc("threads per block"),
                             llvm::cl::init(256)};
  Option<int64_t> gpuBlockReduce{
      *this, "gpu-block-reduce",
      llvm::cl::desc("rows this long get a block (0: a thread per row)"),
      llvm::cl::init(128)};
  Option<int64_t> gpuVectorBytes{
      *this, "gpu-vector-bytes",
      llvm::cl::desc("bytes each thread of an elementwise or reduction "
                     "kernel loads as a vector"),
      llvm::cl::init(16)};
  Option<std::string> toolkit{
      *this, "toolkit",
      llvm::cl::desc("the CUDA toolkit ptxas comes from (default: the one "
                     "Loom was built with)"),
      llvm::cl::init("")};
};

void buildTrainingStepPipeline(mlir::OpPassManager &pm,
                               const TrainingStepOptions &options);
void buildSchedulePipeline(mlir::OpPassManager &pm,
                           const SchedulePipelineOptions &options);
void buildShardingPipeline(mlir::OpPassManager &pm,
                           const ShardingOptions &options);
void buildMemoryPlanPipeline(mlir::OpPassManager &pm,
                             const MemoryPlanOptions &options);
/// train-footprint's lowering (loom-sharding-pipeline's footprint-lowering):
/// `plan`'s memory-plan phase without the plan itself (memory-plan=false,
/// set here), as a textual pipeline on builtin.module.
std::string getFootprintLowering(MemoryPlanOptions &plan);
void buildEntryPipeline(mlir::OpPassManager &pm, const EntryOptions &options);
void buildLowerToCpuPipeline(mlir::OpPassManager &pm,
                             const LowerToCpuOptions &options);
void buildLowerToCudaPipeline(mlir::OpPassManager &pm,
                              const LowerToCudaOptions &options);
/// loom-run's lowering: train ops decomposed, plain loops, LLVM.
void buildReferencePipeline(mlir::OpPassManager &pm);

/// Registers every pipeline above with its `loom-*-pipeline` name.
void registerPipelines();

} // namespace loom

#endif // LOOM_PIPELINES_PIPELINES_H

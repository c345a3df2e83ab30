//===- CompileOptions.cpp - every choice a compile makes
//-------------------===//
//
// The checks on combinations of options, the phase pipelines' options made
// from them, and the command-line flags that parse into them.
//
//===----------------------------------------------------------------------===//

#include "loom/Driver/CompileOptions.h"
#include "loom/Analysis/CostModel.h"
#include "llvm/Support/FormatVariadic.h"
#include <cmath>
#include <memory>

using namespace llvm;
using namespace loom;
using namespace loom::driver;

CompileOptions::CompileOptions() : runtimeDir(LOOM_RUNTIME_DIR) {}

std::string CompileOptions::verify() const {
  bool cuda = target == Target::Cuda;
  if (cuda && !LOOM_CUDA_ENABLED)
    return "this loomc was built without the CUDA toolkit and NCCL; "
           "--target=cuda is not available";
  if (emulateGpu && cuda)
    return "--emulate-gpu runs the GPU mapping on the CPU; it needs "
           "--target=cpu";
  if (emit == EmitPoint::Ptx && !cuda)
    return "--emit=ptx needs --target=cuda";
  if (optimizer == Optimizer::None && emit > EmitPoint::MemoryPlan)
    return "--optimizer=none leaves the parameters as they are; it is for "
           "--emit=training-step, step or memory-plan";
  if (gpuBlockReduce < 0)
    return "--gpu-block-reduce must not be negative";
  if (gpuThreads < 32 || gpuThreads > 1024 || gpuThreads % 32)
    return "--gpu-threads must be a multiple of 32 from 32 to 1024";
  if (worldSize < 1)
    return "expected --world-size >= 1";
  if (pipelineStages < 1 || microbatches < 1)
    return "expected --pipeline-stages >= 1 and --microbatches >= 1";
  if (pipelineStages > 1) {
    if (worldSize % pipelineStages != 0)
      return formatv("--world-size {0} with --pipeline-stages {1}: the world "
                     "is the stages times their data-parallel replicas, a "
                     "multiple of {1}",
                     worldSize, pipelineStages);
    if (worldSize > pipelineStages && zeroStage == ZeroStage::None)
      return formatv("--world-size {0} is {1} replicas of {2} pipeline "
                     "stages; their data parallelism needs --zero-stage 1 "
                     "or 2",
                     worldSize, worldSize / pipelineStages, pipelineStages);
    if (worldSize == pipelineStages && zeroStage != ZeroStage::None)
      return formatv("--zero-stage shards each stage over its data-parallel "
                     "replicas, and --world-size {0} gives each of the {1} "
                     "stages one (make --world-size a multiple of the "
                     "stages)",
                     worldSize, pipelineStages);
    if (zeroStage == ZeroStage::Parameters)
      return "--zero-stage 3 with --pipeline-stages: a stage's replicas shard "
             "at ZeRO stage 1 or 2 (stage 3 would gather each parameter once "
             "per microbatch)";
    if (remat() || !profile.empty())
      return "--remat-budget-mb, --remat-activations and --profile are not "
             "built for pipeline stages yet";
    if (cuda)
      return "pipeline stages compile for --target=cpu; the CUDA trainer's "
             "point-to-point transfers have not run on a GPU yet";
  } else if (worldSize > 1 && zeroStage == ZeroStage::None) {
    return formatv("--world-size {0} needs --zero-stage 1, 2 or 3 (stage 0 "
                   "is single-rank)",
                   worldSize);
  }
  if (!(rematBudgetMb >= 0) || !std::isfinite(rematBudgetMb))
    return "expected --remat-budget-mb >= 0";
  if (!(rematActivations >= 0 && rematActivations <= 1))
    return "expected --remat-activations in [0, 1]";
  if (remat() && zeroStage != ZeroStage::None && schedule != Schedule::Loom)
    return "--remat-budget-mb and --remat-activations bound the step Loom "
           "schedules; a baseline --schedule keeps its own order";
  if (memoryLimitMb > 0 && schedule != Schedule::Loom)
    return "--memory-limit-mb bounds Loom's schedule; a baseline --schedule "
           "keeps its own order";
  if (Expected<DeviceDescription> described =
          DeviceDescription::load(targetDevice());
      !described)
    return "--device " + toString(described.takeError());
  if (!profile.empty()) {
    if (schedule != Schedule::Loom ||
        (zeroStage == ZeroStage::None && !remat()))
      return "--profile calibrates Loom's schedule of the collectives and "
             "train-remat's choice; it needs --zero-stage 1, 2 or 3 and "
             "--schedule=loom, or --remat-budget-mb or --remat-activations";
    Expected<Profile> measured = Profile::load(profile);
    if (!measured)
      return "--profile " + toString(measured.takeError());
    StringRef targetName = cuda ? "cuda" : "cpu";
    if (!measured->target.empty() && measured->target != targetName)
      return formatv("--profile {0} was measured by a {1} trainer; this is "
                     "--target={2}",
                     profile, measured->target, targetName);
    if (measured->worldSize && measured->worldSize != worldSize)
      return formatv("--profile {0} was measured on {1} ranks; this is "
                     "--world-size {2}",
                     profile, measured->worldSize, worldSize);
  }
  if (eval && cuda)
    return "--eval compiles for --target=cpu; the CUDA trainer's evaluation "
           "step is not built yet";
  if (fuseCrossEntropy < 0 || fuseCrossEntropyVocab < 0)
    return "--fuse-cross-entropy and --fuse-cross-entropy-vocab must not be "
           "negative";
  if (fuseCrossEntropyVocab > 0 && fuseCrossEntropy == 0)
    return "--fuse-cross-entropy-vocab needs the fused loss "
           "(--fuse-cross-entropy > 0)";
  return "";
}

std::string CompileOptions::targetDevice() const {
  if (!device.empty())
    return device;
  return target == Target::Cuda ? "h100-nvlink" : "cpu";
}

void CompileOptions::fill(target::LoomSetTargetPassOptions &setTarget) const {
  setTarget.device = targetDevice();
  setTarget.profile = profile;
}

void CompileOptions::fill(TrainingStepOptions &step) const {
  step.fuseCrossEntropy = fuseCrossEntropy;
  step.fuseCrossEntropyVocab = fuseCrossEntropyVocab;
  step.optimizer = optimizer;
  step.lr = lr;
  step.weightDecay = weightDecay;
  step.microbatches = microbatches;
  step.pipelineStages = pipelineStages;
  step.pipelineReplicas = pipelineStages > 1 ? replicas() : 1;
  step.pipelineSchedule = pipelineSchedule;
  step.pipelineLayout = pipelineLayout;
}

void CompileOptions::fill(ShardingOptions &sharding) const {
  sharding.zeroStage = zeroStage;
  // A pipeline stage is sharded over its replicas.
  sharding.worldSize = replicas();
  sharding.schedule = schedule;
  sharding.rematSolver = rematSolver;
  sharding.rematActivations = rematActivations;
  sharding.rematBudgetMb = rematBudgetMb;
  sharding.memoryLimitMb = memoryLimitMb;
  sharding.target = target;
  sharding.fuseAttention = fuseAttention;
  // train-footprint lowers copies of the train ops as the memory-plan
  // phase will.
  MemoryPlanOptions lowering;
  fill(lowering);
  sharding.footprintLowering = getFootprintLowering(lowering);
}

void CompileOptions::fill(MemoryPlanOptions &plan) const {
  plan.target = target;
  plan.emulateGpu = emulateGpu;
  plan.lossKernels = lossKernels;
  plan.embeddingKernel = embeddingKernel;
  plan.widenCompute = widenCompute;
  plan.fuseElementwise = fuseElementwise;
  plan.splitReduction = gpuSplitReduction;
  plan.splitMinRows = gpuSplitMinRows;
  plan.gpuThreads = gpuThreads;
  plan.memoryPlan = memoryPlan;
}

void CompileOptions::fill(EntryOptions &entry) const {
  entry.source = sourceName;
}

void CompileOptions::fill(LowerToCpuOptions &lowering) const {
  lowering.memoryPlan = memoryPlan;
  lowering.vectorize = vectorize;
  lowering.emulateGpu = emulateGpu;
  lowering.gpuThreads = gpuThreads;
  lowering.gpuBlockReduce = gpuBlockReduce;
  lowering.gpuVectorBytes = gpuVectorBytes;
}

void CompileOptions::fill(LowerToCudaOptions &lowering) const {
  lowering.memoryPlan = memoryPlan;
  lowering.chip = gpuChip;
  // --emit=ptx writes the kernels' PTX, whatever --gpu-format embeds.
  lowering.format = emit == EmitPoint::Ptx ? GpuFormat::Ptx : gpuFormat;
  lowering.gpuThreads = gpuThreads;
  lowering.gpuBlockReduce = gpuBlockReduce;
  lowering.gpuVectorBytes = gpuVectorBytes;
}

//===----------------------------------------------------------------------===//
// Command-line flags
//===----------------------------------------------------------------------===//

namespace {

cl::boolOrDefault toCL(TargetDefault value) {
  return value == TargetDefault::Auto ? cl::BOU_UNSET
         : value == TargetDefault::On ? cl::BOU_TRUE
                                      : cl::BOU_FALSE;
}

TargetDefault fromCL(cl::boolOrDefault value) {
  return value == cl::BOU_UNSET  ? TargetDefault::Auto
         : value == cl::BOU_TRUE ? TargetDefault::On
                                 : TargetDefault::Off;
}

/// loomc's flags, each with a default-constructed CompileOptions' value.
struct CompileCLOptions {
  explicit CompileCLOptions(cl::OptionCategory &cat) : cat(cat) {}

  const CompileOptions defaults;
  cl::OptionCategory &cat;

  cl::opt<Target> target{
      "target", cl::desc("what the trainer runs on"),
      cl::values(
          clEnumValN(Target::Cpu, "cpu", "loops, OpenBLAS, MPI"),
          clEnumValN(Target::Cuda, "cuda", "NVVM kernels, cuBLAS, NCCL")),
      cl::init(defaults.target), cl::cat(cat)};
  cl::opt<EmitPoint> emit{
      "emit", cl::desc("what to write"),
      cl::values(
          clEnumValN(EmitPoint::TrainingStep, "training-step",
                     "the training step (after the training-step phase)"),
          clEnumValN(EmitPoint::Step, "step",
                     "the sharded, scheduled step (after sharding)"),
          clEnumValN(EmitPoint::MemoryPlan, "memory-plan",
                     "the planned step (after memory-plan)"),
          clEnumValN(EmitPoint::Mlir, "mlir",
                     "the entry point with runtime calls (after entry)"),
          clEnumValN(EmitPoint::LlvmMlir, "llvm-mlir",
                     "the LLVM dialect (after lowering)"),
          clEnumValN(EmitPoint::Ptx, "ptx",
                     "with --target=cuda: the kernels' PTX"),
          clEnumValN(EmitPoint::Llvm, "llvm", "LLVM IR"),
          clEnumValN(EmitPoint::Obj, "obj", "an object file"),
          clEnumValN(EmitPoint::Exe, "exe", "the trainer executable")),
      cl::init(defaults.emit), cl::cat(cat)};
  cl::opt<bool> verbose{"v",
                        cl::desc("print each phase's pipeline (as loom-opt "
                                 "--pass-pipeline takes it) and the link "
                                 "command"),
                        cl::init(defaults.verbose), cl::cat(cat)};
  cl::opt<bool> verifyEach{
      "verify-each",
      cl::desc("verify the IR after every pass (a pass that breaks it is "
               "named), not only after every phase"),
      cl::init(defaults.verifyEach), cl::cat(cat)};

  // The training step.
  cl::opt<int64_t> fuseChunk{
      "fuse-cross-entropy",
      cl::desc("fuse the output projection into the loss, holding this many "
               "tokens' logits at a time (train-fuse-linear-cross-entropy; "
               "0: keep the logits)"),
      cl::init(defaults.fuseCrossEntropy), cl::cat(cat)};
  cl::opt<bool> eval{
      "eval",
      cl::desc("also compile the forward alone as the trainer's evaluation "
               "step (its --val-data and --data-split losses)"),
      cl::init(defaults.eval), cl::cat(cat)};
  cl::opt<int64_t> fuseVocab{
      "fuse-cross-entropy-vocab",
      cl::desc("with the fused loss, also loop over blocks of this many "
               "vocabulary entries (an online log-sum-exp; 0: the whole "
               "vocabulary)"),
      cl::init(defaults.fuseCrossEntropyVocab), cl::cat(cat)};
  cl::opt<Optimizer> optimizer{
      "optimizer", cl::desc("the optimizer update"),
      cl::values(clEnumValN(Optimizer::AdamW, "adamw", "AdamW"),
                 clEnumValN(Optimizer::Sgd, "sgd", "SGD"),
                 clEnumValN(Optimizer::None, "none",
                            "none: gradients only, for --emit=training-step, "
                            "step or memory-plan")),
      cl::init(defaults.optimizer), cl::cat(cat)};
  cl::opt<double> lr{"lr",
                     cl::desc("the trainer's default learning rate (its --lr "
                              "overrides it)"),
                     cl::init(defaults.lr), cl::cat(cat)};
  cl::opt<double> weightDecay{"weight-decay", cl::init(defaults.weightDecay),
                              cl::desc("AdamW/SGD weight decay"), cl::cat(cat)};

  // Sharding and scheduling.
  cl::opt<int64_t> worldSize{
      "world-size",
      cl::desc("ranks (with --pipeline-stages P: P times the data-parallel "
               "replicas)"),
      cl::init(defaults.worldSize), cl::cat(cat)};
  cl::opt<ZeroStage> zeroStage{
      "zero-stage", cl::desc("ZeRO stage"),
      cl::values(clEnumValN(ZeroStage::None, "0", "nothing sharded (one rank)"),
                 clEnumValN(ZeroStage::OptimizerState, "1", "optimizer state"),
                 clEnumValN(ZeroStage::Gradients, "2", "and gradients"),
                 clEnumValN(ZeroStage::Parameters, "3", "and parameters")),
      cl::init(defaults.zeroStage), cl::cat(cat)};
  cl::opt<double> memoryLimitMb{
      "memory-limit-mb",
      cl::desc("the step's peak may not exceed this, MiB (0: 5% above the "
               "synchronous order's peak)"),
      cl::init(defaults.memoryLimitMb), cl::cat(cat)};
  cl::opt<double> rematBudgetMb{
      "remat-budget-mb",
      cl::desc("recompute activations in the backward (train-remat) so that "
               "the trainer's memory plan is within this many MiB, fractions "
               "allowed, recomputing as little as that allows (0: none); a "
               "budget below the smallest plan Loom reaches is an error that "
               "names it; with --memory-limit-mb, the lower of the two "
               "bounds the plan"),
      cl::init(defaults.rematBudgetMb), cl::cat(cat)};
  cl::opt<double> rematActivations{
      "remat-activations",
      cl::desc("recompute activations in the backward (train-remat) so that "
               "those kept at the loss are at most this fraction of the "
               "step's without recomputation, recomputing as little as that "
               "allows (PyTorch's activation_memory_budget; 1: no bound); a "
               "fraction below what Loom reaches is an error that names it; "
               "with --remat-budget-mb both hold"),
      cl::init(defaults.rematActivations), cl::cat(cat)};
  cl::opt<std::string> rematSolver{
      "remat-solver",
      cl::desc("train-remat's solver: chain (default: Rotor's dynamic "
               "program), ilp (H-Rockmate's program by CBC, warm-started by "
               "chain), or a baseline: every-layer, sqrt, knapsack"),
      cl::init(defaults.rematSolver), cl::cat(cat)};
  cl::opt<Schedule> schedule{
      "schedule", cl::desc("the collectives' order after ZeRO"),
      cl::values(
          clEnumValN(Schedule::Loom, "loom",
                     "overlap under the memory limit (default)"),
          clEnumValN(Schedule::Synchronous, "synchronous",
                     "every collective waited at its start"),
          clEnumValN(Schedule::Fsdp, "fsdp", "PyTorch FSDP's policy"),
          clEnumValN(Schedule::Original, "original", "zero-partition's order")),
      cl::init(defaults.schedule), cl::cat(cat)};

  // Pipeline parallelism.
  cl::opt<int64_t> pipelineStages{
      "pipeline-stages",
      cl::desc("pipeline stages (pp-partition; 1: none); rank r runs stage "
               "r / (world-size / P)"),
      cl::init(defaults.pipelineStages), cl::cat(cat)};
  cl::opt<int64_t> microbatches{
      "microbatches",
      cl::desc("microbatches the batch is split into; their gradients "
               "accumulate (train-microbatch)"),
      cl::init(defaults.microbatches), cl::cat(cat)};
  cl::opt<std::string> pipelineSchedule{
      "pipeline-schedule",
      cl::desc("the stages' schedule: gpipe, 1f1b or zb-h1"),
      cl::init(defaults.pipelineSchedule), cl::cat(cat)};
  cl::opt<std::string> pipelineLayout{
      "pipeline-layout",
      cl::desc("units per stage in Megatron's syntax, e.g. \"Et*3|t*3L\" "
               "(default: balanced on the cost model)"),
      cl::init(defaults.pipelineLayout), cl::cat(cat)};
  cl::opt<std::string> device{
      "device",
      cl::desc("device description for the scheduler's cost model (default: "
               "cpu, or h100-nvlink with --target=cuda)"),
      cl::init(defaults.device), cl::cat(cat)};
  cl::opt<std::string> profile{
      "profile",
      cl::desc("a trainer's --profile of this model: schedule with its "
               "measured op and collective times instead of the device "
               "model's estimates"),
      cl::init(defaults.profile), cl::cat(cat)};

  // The memory plan.
  cl::opt<bool> fuseAttention{
      "fuse-attention",
      cl::desc("run attention and its gradient as the runtime's fused "
               "kernels (train-fuse-attention: no seq x seq scores are "
               "held)"),
      cl::init(defaults.fuseAttention), cl::cat(cat)};
  cl::opt<cl::boolOrDefault> lossKernels{
      "loss-kernels",
      cl::desc("run the fused loss's per-chunk log-sum-exp, loss and logits' "
               "gradient as the runtime's row kernels "
               "(convert-train-to-kernels{loss-kernels}; default: on for "
               "--target=cuda)"),
      cl::init(toCL(defaults.lossKernels)), cl::cat(cat)};
  cl::opt<cl::boolOrDefault> embeddingKernel{
      "embedding-kernel",
      cl::desc(
          "run the embedding gradient's scatter-add as the runtime's "
          "kernel, summing in f32 (convert-train-to-kernels{embedding-kernel}; "
          "default: on for --target=cuda)"),
      cl::init(toCL(defaults.embeddingKernel)), cl::cat(cat)};
  cl::opt<bool> widenCompute{
      "widen-compute",
      cl::desc("compute bf16/f16 linalg ops in f32, reductions into f32 "
               "accumulators (codegen-widen-compute; off: each op rounds to "
               "its element type, as the IR says)"),
      cl::init(defaults.widenCompute), cl::cat(cat)};
  cl::opt<bool> memoryPlan{
      "memory-plan",
      cl::desc("place temporaries in one arena (codegen-memory-plan)"),
      cl::init(defaults.memoryPlan), cl::cat(cat)};
  cl::opt<cl::boolOrDefault> fuseElementwise{
      "gpu-fuse-elementwise",
      cl::desc("with --target=cuda or --emulate-gpu: fuse elementwise linalg "
               "producers into their consumers (gpu-fuse-elementwise), so "
               "that they share a kernel (default: on for --target=cuda; the "
               "~125M bf16 step launches 207 kernels fewer at the same "
               "planned peak)"),
      cl::init(toCL(defaults.fuseElementwise)), cl::cat(cat)};
  cl::opt<int64_t> gpuSplitReduction{
      "gpu-split-reduction",
      cl::desc("column reductions into few outputs (a norm's weight "
               "gradient) fold this many rows into each of many partials, "
               "then combine them (gpu-split-reduction rows; 0: a block per "
               "output)"),
      cl::init(defaults.gpuSplitReduction), cl::cat(cat)};
  cl::opt<int64_t> gpuSplitMinRows{
      "gpu-split-min-rows",
      cl::desc("split only column reductions of at least this many rows "
               "(gpu-split-reduction min-rows)"),
      cl::init(defaults.gpuSplitMinRows), cl::cat(cat)};

  // Lowering.
  cl::opt<bool> vectorize{
      "vectorize",
      cl::desc("tile and vectorise the linalg ops BLAS does not take "
               "(cpu-vectorize)"),
      cl::init(defaults.vectorize), cl::cat(cat)};
  cl::opt<bool> emulateGpu{
      "emulate-gpu",
      cl::desc("with --target=cpu: map the step's kernels as the CUDA target "
               "does (gpu-map-linalg) but run the mapped loops on the CPU, "
               "to check the mapping without a GPU"),
      cl::init(defaults.emulateGpu), cl::cat(cat)};
  cl::opt<std::string> gpuChip{"gpu-chip", cl::desc("the CUDA target's GPU"),
                               cl::init(defaults.gpuChip), cl::cat(cat)};
  cl::opt<GpuFormat> gpuFormat{
      "gpu-format", cl::desc("how the kernels are embedded"),
      cl::values(clEnumValN(GpuFormat::Cubin, "cubin",
                            "ptxas at compile time, for --gpu-chip only"),
                 clEnumValN(GpuFormat::Ptx, "ptx",
                            "the driver JIT-compiles them at the first "
                            "launch, for that GPU or a later one")),
      cl::init(defaults.gpuFormat), cl::cat(cat)};
  cl::opt<int64_t> gpuThreads{
      "gpu-threads", cl::desc("threads per block of the generated kernels"),
      cl::init(defaults.gpuThreads), cl::cat(cat)};
  cl::opt<int64_t> gpuBlockReduce{
      "gpu-block-reduce",
      cl::desc("reductions along rows at least this long get a block per row "
               "(gpu-map-linalg block-reduce-min; 0: a thread per row)"),
      cl::init(defaults.gpuBlockReduce), cl::cat(cat)};
  cl::opt<int64_t> gpuVectorBytes{
      "gpu-vector-bytes",
      cl::desc("elementwise and reduction kernels' threads each load and "
               "store this many bytes as aligned vectors (gpu-map-linalg "
               "vector-bytes; 0: an element per thread)"),
      cl::init(defaults.gpuVectorBytes), cl::cat(cat)};
  cl::opt<std::string> cpu{
      "cpu",
      cl::desc("the CPU the step is compiled for, as LLVM names it (e.g. "
               "x86-64-v3, znver4; native: this machine's CPU with the "
               "features it really has, as clang's -march=native)"),
      cl::init(defaults.cpu), cl::cat(cat)};
  cl::opt<std::string> cpuFeatures{
      "cpu-features",
      cl::desc("CPU features added (+name) or removed (-name) on top of "
               "--cpu's, comma-separated, as clang's -mattr (e.g. -avx512f)"),
      cl::init(defaults.cpuFeatures), cl::cat(cat)};
  cl::opt<unsigned> optLevel{"O", cl::desc("LLVM optimisation level"),
                             cl::init(defaults.optLevel), cl::Prefix,
                             cl::cat(cat)};
  cl::opt<std::string> runtimeDir{
      "runtime-dir",
      cl::desc("where libloomtrainer.a, libloomrt_mpi.a (or libloomrt_cuda.a) "
               "and libloomheap.a are"),
      cl::init(defaults.runtimeDir), cl::cat(cat)};

  CompileOptions read() const {
    CompileOptions o;
    o.target = target;
    o.emit = emit;
    o.verbose = verbose;
    o.verifyEach = verifyEach;
    o.fuseCrossEntropy = fuseChunk;
    o.fuseCrossEntropyVocab = fuseVocab;
    o.eval = eval;
    o.optimizer = optimizer;
    o.lr = lr;
    o.weightDecay = weightDecay;
    o.worldSize = worldSize;
    o.zeroStage = zeroStage;
    o.memoryLimitMb = memoryLimitMb;
    o.rematBudgetMb = rematBudgetMb;
    o.rematActivations = rematActivations;
    o.rematSolver = rematSolver;
    o.schedule = schedule;
    o.device = device;
    o.profile = profile;
    o.pipelineStages = pipelineStages;
    o.microbatches = microbatches;
    o.pipelineSchedule = pipelineSchedule;
    o.pipelineLayout = pipelineLayout;
    o.fuseAttention = fuseAttention;
    o.lossKernels = fromCL(lossKernels);
    o.embeddingKernel = fromCL(embeddingKernel);
    o.widenCompute = widenCompute;
    o.memoryPlan = memoryPlan;
    o.fuseElementwise = fromCL(fuseElementwise);
    o.gpuSplitReduction = gpuSplitReduction;
    o.gpuSplitMinRows = gpuSplitMinRows;
    o.vectorize = vectorize;
    o.emulateGpu = emulateGpu;
    o.gpuChip = gpuChip;
    o.gpuFormat = gpuFormat;
    o.gpuThreads = gpuThreads;
    o.gpuBlockReduce = gpuBlockReduce;
    o.gpuVectorBytes = gpuVectorBytes;
    o.cpu = cpu;
    o.cpuFeatures = cpuFeatures;
    o.optLevel = optLevel;
    o.runtimeDir = runtimeDir;
    return o;
  }
};

std::unique_ptr<CompileCLOptions> &clOptions() {
  static std::unique_ptr<CompileCLOptions> options;
  return options;
}

} // namespace

void loom::driver::registerCompileCLOptions(cl::OptionCategory &category) {
  if (!clOptions())
    clOptions() = std::make_unique<CompileCLOptions>(category);
}

CompileOptions loom::driver::compileOptionsFromCL() {
  return clOptions() ? clOptions()->read() : CompileOptions();
}

bool loom::driver::parseCompileFlags(ArrayRef<std::string> flags,
                                     CompileOptions &options,
                                     std::string &error) {
  static cl::OptionCategory category("loom compile options");
  registerCompileCLOptions(category);
  cl::ResetAllOptionOccurrences();
  SmallVector<const char *> argv = {"loom"};
  for (const std::string &flag : flags)
    argv.push_back(flag.c_str());
  raw_string_ostream errors(error);
  if (!cl::ParseCommandLineOptions(int(argv.size()), argv.data(), "",
                                   &errors)) {
    // cl reports "loom: ..." on its own lines; one line for the client.
    error = StringRef(error).trim().str();
    return false;
  }
  options = compileOptionsFromCL();
  return true;
}

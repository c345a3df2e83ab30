//===- loomc.cpp - compile a model's forward into a trainer executable ----===//
//
//   loomc forward.mlir --target=cpu|cuda --world-size N --zero-stage 0|1|2|3
//         [--optimizer adamw|sgd --lr ...] [--memory-limit-mb M]
//         [--emit=training-step|step|memory-plan|mlir|llvm-mlir|ptx|llvm|obj|exe]
//         [-v] -o trainer
//
// The phases are the registered pipelines of lib/Pipelines, run in turn on
// one module; -v prints each as loom-opt's --pass-pipeline takes it, so
// that loom-opt reproduces every --emit point:
//
//   training-step   loom-training-step-pipeline      (--emit=training-step)
//   sharding        loom-sharding-pipeline           (--emit=step)
//   memory-plan     loom-memory-plan-pipeline        (--emit=memory-plan)
//   entry           loom-entry-pipeline              (--emit=mlir)
//   lowering        loom-lower-to-cpu-pipeline or
//                   loom-lower-to-cuda-pipeline      (--emit=llvm-mlir, ptx)
//
// then LLVM IR (--emit=llvm), an object optimised for --cpu and
// --cpu-features (default: this machine's CPU and the features it really
// has; -O, default 2; --emit=obj) and the link with the loomrt runtime and
// the trainer main (--emit=exe). A failing phase is named in the error.
//
//===----------------------------------------------------------------------===//

#include "loom/Analysis/CostModel.h"
#include "loom/InitAllDialects.h"
#include "loom/Pipelines/Pipelines.h"
#include "loom/Runtime/CpuFeatures.h"
#include "loom/Runtime/DurableFile.h"
#include "loom/Runtime/Symbols.h"
#include "loom/Support/AttrNames.h"
#include "loom/Support/CrashGuard.h"
#include "loom/Trainer/Passes.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Support/Timing.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/Linker/Linker.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/Signals.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/SubtargetFeature.h"
#include <cmath>

using namespace mlir;
using namespace llvm;

namespace {

constexpr double kMiB = 1024.0 * 1024.0;

/// Where loomc stops: after a phase, or at a file format, in the order it
/// reaches them.
enum class Emit {
  TrainingStep,
  Step,
  MemoryPlan,
  Mlir,
  LlvmMlir,
  Ptx,
  Llvm,
  Obj,
  Exe
};

} // namespace

static cl::OptionCategory loomcCategory("loomc options");

static cl::opt<std::string> inputFile(cl::Positional,
                                      cl::desc("<forward.mlir>"), cl::Required,
                                      cl::cat(loomcCategory));
static cl::opt<std::string> outputFile("o", cl::desc("output file"),
                                       cl::Required, cl::cat(loomcCategory));
static cl::opt<loom::Target> target(
    "target", cl::desc("what the trainer runs on"),
    cl::values(clEnumValN(loom::Target::Cpu, "cpu", "loops, OpenBLAS, MPI"),
               clEnumValN(loom::Target::Cuda, "cuda",
                          "NVVM kernels, cuBLAS, NCCL")),
    cl::init(loom::Target::Cpu), cl::cat(loomcCategory));
static cl::opt<Emit> emit(
    "emit", cl::desc("what to write"),
    cl::values(clEnumValN(Emit::TrainingStep, "training-step",
                          "the training step (after the training-step phase)"),
               clEnumValN(Emit::Step, "step",
                          "the sharded, scheduled step (after sharding)"),
               clEnumValN(Emit::MemoryPlan, "memory-plan",
                          "the planned step (after memory-plan)"),
               clEnumValN(Emit::Mlir, "mlir",
                          "the entry point with runtime calls (after entry)"),
               clEnumValN(Emit::LlvmMlir, "llvm-mlir",
                          "the LLVM dialect (after lowering)"),
               clEnumValN(Emit::Ptx, "ptx",
                          "with --target=cuda: the kernels' PTX"),
               clEnumValN(Emit::Llvm, "llvm", "LLVM IR"),
               clEnumValN(Emit::Obj, "obj", "an object file"),
               clEnumValN(Emit::Exe, "exe", "the trainer executable")),
    cl::init(Emit::Exe), cl::cat(loomcCategory));
static cl::opt<bool> verbose("v",
                             cl::desc("print each phase's pipeline (as "
                                      "loom-opt --pass-pipeline takes it) "
                                      "and the link command"),
                             cl::cat(loomcCategory));

// The training step.
static cl::opt<int64_t> fuseChunk(
    "fuse-cross-entropy",
    cl::desc("fuse the output projection into the loss, holding this many "
             "tokens' logits at a time (train-fuse-linear-cross-entropy; "
             "0: keep the logits)"),
    cl::init(256), cl::cat(loomcCategory));
static cl::opt<int64_t> fuseVocab(
    "fuse-cross-entropy-vocab",
    cl::desc("with the fused loss, also loop over blocks of this many "
             "vocabulary entries (an online log-sum-exp; 0: the whole "
             "vocabulary)"),
    cl::init(0), cl::cat(loomcCategory));
static cl::opt<loom::Optimizer> optimizer(
    "optimizer", cl::desc("the optimizer update"),
    cl::values(clEnumValN(loom::Optimizer::AdamW, "adamw", "AdamW"),
               clEnumValN(loom::Optimizer::Sgd, "sgd", "SGD"),
               clEnumValN(loom::Optimizer::None, "none",
                          "none: gradients only, for --emit=training-step, "
                          "step or memory-plan")),
    cl::init(loom::Optimizer::AdamW), cl::cat(loomcCategory));
static cl::opt<double> lr("lr",
                          cl::desc("the trainer's default learning rate "
                                   "(its --lr overrides it)"),
                          cl::init(1e-3), cl::cat(loomcCategory));
static cl::opt<double> weightDecay("weight-decay", cl::init(0.0),
                                   cl::desc("AdamW/SGD weight decay"),
                                   cl::cat(loomcCategory));

// Sharding and scheduling.
static cl::opt<int64_t>
    worldSize("world-size",
              cl::desc("ranks (with --pipeline-stages P: P times the "
                       "data-parallel replicas)"),
              cl::init(1), cl::cat(loomcCategory));
static cl::opt<loom::ZeroStage> zeroStage(
    "zero-stage", cl::desc("ZeRO stage"),
    cl::values(
        clEnumValN(loom::ZeroStage::None, "0", "nothing sharded (one rank)"),
        clEnumValN(loom::ZeroStage::OptimizerState, "1", "optimizer state"),
        clEnumValN(loom::ZeroStage::Gradients, "2", "and gradients"),
        clEnumValN(loom::ZeroStage::Parameters, "3", "and parameters")),
    cl::init(loom::ZeroStage::None), cl::cat(loomcCategory));
static cl::opt<double> memoryLimitMb(
    "memory-limit-mb",
    cl::desc("the step's peak may not exceed this, MiB (0: 5% above the "
             "synchronous order's peak)"),
    cl::init(0), cl::cat(loomcCategory));
static cl::opt<double> rematBudgetMb(
    "remat-budget-mb",
    cl::desc("recompute activations in the backward (train-remat) so that "
             "the trainer's memory plan is within this many MiB, fractions "
             "allowed, recomputing as little as that allows (0: none); a "
             "budget below the smallest plan Loom reaches is an error that "
             "names it; with --memory-limit-mb, the lower of the two bounds "
             "the plan"),
    cl::init(0), cl::cat(loomcCategory));
static cl::opt<double> rematActivations(
    "remat-activations",
    cl::desc("recompute activations in the backward (train-remat) so that "
             "those kept at the loss are at most this fraction of the "
             "step's without recomputation, recomputing as little as that "
             "allows (PyTorch's activation_memory_budget; 1: no bound); a "
             "fraction below what Loom reaches is an error that names it; "
             "with --remat-budget-mb both hold"),
    cl::init(1), cl::cat(loomcCategory));
static cl::opt<std::string> rematSolver(
    "remat-solver",
    cl::desc("train-remat's solver: chain (default: Rotor's dynamic "
             "program), ilp (H-Rockmate's program by CBC, warm-started by "
             "chain), or a baseline: every-layer, sqrt, knapsack"),
    cl::init("chain"), cl::cat(loomcCategory));
static cl::opt<loom::Schedule>
    schedule("schedule", cl::desc("the collectives' order after ZeRO"),
             cl::values(clEnumValN(loom::Schedule::Loom, "loom",
                                   "overlap under the memory limit (default)"),
                        clEnumValN(loom::Schedule::Synchronous, "synchronous",
                                   "every collective waited at its start"),
                        clEnumValN(loom::Schedule::Fsdp, "fsdp",
                                   "PyTorch FSDP's policy"),
                        clEnumValN(loom::Schedule::Original, "original",
                                   "zero-partition's order")),
             cl::init(loom::Schedule::Loom), cl::cat(loomcCategory));
// Pipeline parallelism.
static cl::opt<int64_t> pipelineStages(
    "pipeline-stages",
    cl::desc("pipeline stages (pp-partition; 1: none); rank r runs stage "
             "r / (world-size / P)"),
    cl::init(1), cl::cat(loomcCategory));
static cl::opt<int64_t> microbatches(
    "microbatches",
    cl::desc("microbatches the batch is split into; their gradients "
             "accumulate (train-microbatch)"),
    cl::init(1), cl::cat(loomcCategory));
static cl::opt<std::string>
    pipelineSchedule("pipeline-schedule",
                     cl::desc("the stages' schedule: gpipe, 1f1b or zb-h1"),
                     cl::init("1f1b"), cl::cat(loomcCategory));
static cl::opt<std::string> pipelineLayout(
    "pipeline-layout",
    cl::desc("units per stage in Megatron's syntax, e.g. \"Et*3|t*3L\" "
             "(default: balanced on the cost model)"),
    cl::init(""), cl::cat(loomcCategory));
static cl::opt<std::string>
    device("device",
           cl::desc("device description for the scheduler's cost model "
                    "(default: cpu, or h100-nvlink with --target=cuda)"),
           cl::cat(loomcCategory));
static cl::opt<std::string>
    profile("profile",
            cl::desc("a trainer's --profile of this model: schedule with its "
                     "measured op and collective times instead of the device "
                     "model's estimates"),
            cl::cat(loomcCategory));

// The memory plan.
static cl::opt<bool> fuseAttention(
    "fuse-attention",
    cl::desc("run attention and its gradient as the runtime's fused kernels "
             "(train-fuse-attention: no seq x seq scores are held)"),
    cl::init(true), cl::cat(loomcCategory));
static cl::opt<cl::boolOrDefault> lossKernels(
    "loss-kernels",
    cl::desc("run the fused loss's per-chunk log-sum-exp, loss and logits' "
             "gradient as the runtime's row kernels "
             "(train-decompose{loss-kernels}; default: on for --target=cuda)"),
    cl::cat(loomcCategory));
static cl::opt<cl::boolOrDefault> embeddingKernel(
    "embedding-kernel",
    cl::desc("run the embedding gradient's scatter-add as the runtime's "
             "kernel, summing in f32 "
             "(train-decompose{embedding-kernel}; default: on for "
             "--target=cuda)"),
    cl::cat(loomcCategory));
static cl::opt<bool> widenCompute(
    "widen-compute",
    cl::desc("compute bf16/f16 linalg ops in f32, reductions into f32 "
             "accumulators (codegen-widen-compute; off: each op rounds to its "
             "element type, as the IR says)"),
    cl::init(true), cl::cat(loomcCategory));
static cl::opt<bool>
    memoryPlan("memory-plan",
               cl::desc("place temporaries in one arena (codegen-memory-plan)"),
               cl::init(true), cl::cat(loomcCategory));
static cl::opt<cl::boolOrDefault> fuseElementwise(
    "gpu-fuse-elementwise",
    cl::desc("with --target=cuda or --emulate-gpu: fuse elementwise linalg "
             "producers into their consumers (gpu-fuse-elementwise), "
             "so that they share a kernel (default: on for --target=cuda; "
             "the ~125M bf16 step launches 207 kernels fewer at the same "
             "planned peak)"),
    cl::cat(loomcCategory));
static cl::opt<int64_t> gpuSplitReduction(
    "gpu-split-reduction",
    cl::desc("column reductions into few outputs (a norm's weight gradient) "
             "fold this many rows into each of many partials, then combine "
             "them (gpu-split-reduction rows; 0: a block per output)"),
    cl::init(32), cl::cat(loomcCategory));
static cl::opt<int64_t> gpuSplitMinRows(
    "gpu-split-min-rows",
    cl::desc("split only column reductions of at least this many rows "
             "(gpu-split-reduction min-rows)"),
    cl::init(1024), cl::cat(loomcCategory));

// Lowering.
static cl::opt<bool>
    vectorize("vectorize",
              cl::desc("tile and vectorise the linalg ops BLAS does not take "
                       "(cpu-vectorize)"),
              cl::init(true), cl::cat(loomcCategory));
static cl::opt<bool> emulateGpu(
    "emulate-gpu",
    cl::desc("with --target=cpu: map the step's kernels as the CUDA target "
             "does (gpu-map-linalg) but run the mapped loops on the CPU, "
             "to check the mapping without a GPU"),
    cl::init(false), cl::cat(loomcCategory));
static cl::opt<std::string> gpuChip("gpu-chip",
                                    cl::desc("the CUDA target's GPU"),
                                    cl::init("sm_90"), cl::cat(loomcCategory));
static cl::opt<loom::GpuFormat> gpuFormat(
    "gpu-format", cl::desc("how the kernels are embedded"),
    cl::values(clEnumValN(loom::GpuFormat::Cubin, "cubin",
                          "ptxas at compile time, for --gpu-chip only"),
               clEnumValN(loom::GpuFormat::Ptx, "ptx",
                          "the driver JIT-compiles them at the first launch, "
                          "for that GPU or a later one")),
    cl::init(loom::GpuFormat::Cubin), cl::cat(loomcCategory));
static cl::opt<int64_t>
    gpuThreads("gpu-threads",
               cl::desc("threads per block of the generated kernels"),
               cl::init(256), cl::cat(loomcCategory));
static cl::opt<int64_t> gpuBlockReduce(
    "gpu-block-reduce",
    cl::desc("reductions along rows at least this long get a block per row "
             "(gpu-map-linalg block-reduce-min; 0: a thread per row)"),
    cl::init(128), cl::cat(loomcCategory));
static cl::opt<int64_t> gpuVectorBytes(
    "gpu-vector-bytes",
    cl::desc("elementwise and reduction kernels' threads each load and "
             "store this many bytes as aligned vectors (gpu-map-linalg "
             "vector-bytes; 0: an element per thread)"),
    cl::init(16), cl::cat(loomcCategory));
static cl::opt<std::string> cpu(
    "cpu",
    cl::desc("the CPU the step is compiled for, as LLVM names it (e.g. "
             "x86-64-v3, znver4; native: this machine's CPU with the "
             "features it really has, as clang's -march=native)"),
    cl::init("native"), cl::cat(loomcCategory));
static cl::opt<std::string> cpuFeatures(
    "cpu-features",
    cl::desc("CPU features added (+name) or removed (-name) on top of "
             "--cpu's, comma-separated, as clang's -mattr (e.g. -avx512f)"),
    cl::init(""), cl::cat(loomcCategory));
static cl::opt<unsigned> optLevel("O", cl::desc("LLVM optimisation level"),
                                  cl::init(2), cl::Prefix,
                                  cl::cat(loomcCategory));
static cl::opt<std::string>
    runtimeDir("runtime-dir",
               cl::desc("where libloomrt_mpi.a and libloomtrainer.a are"),
               cl::init(LOOM_RUNTIME_DIR), cl::cat(loomcCategory));

/// The PTX of every kernel module, each after a `// loom-module NAME` line.
static void printPtx(ModuleOp module, raw_ostream &os) {
  module.walk([&](gpu::BinaryOp binary) {
    for (mlir::Attribute object : binary.getObjects())
      os << "// loom-module " << binary.getName() << "\n"
         << cast<gpu::ObjectAttr>(object).getObject().getValue() << "\n";
  });
}

static loom::TargetDefault targetDefault(cl::boolOrDefault option) {
  return option == cl::BOU_UNSET  ? loom::TargetDefault::Auto
         : option == cl::BOU_TRUE ? loom::TargetDefault::On
                                  : loom::TargetDefault::Off;
}

namespace {

/// Runs the registered pipeline `name` with `options` (built by `build`) on
/// `module` as the phase `phase`; with -v, prints it as loom-opt's
/// --pass-pipeline takes it first. On failure says which phase failed.
template <typename Options>
LogicalResult runPhase(ModuleOp module, StringRef phase, StringRef name,
                       const Options &options,
                       void (*build)(OpPassManager &, const Options &)) {
  if (verbose) {
    errs() << "loomc: phase " << phase << ": --pass-pipeline='builtin.module("
           << name;
    options.print(errs());
    errs() << ")'\n";
  }
  mlir::PassManager pm(module.getContext());
  // Every pass's result is verified: a pass that leaves invalid IR is an
  // error that names it, never a miscompile further on.
  pm.enableVerifier(true);
  if (failed(applyPassManagerCLOptions(pm)))
    return failure();
  applyDefaultTimingPassManagerCLOptions(pm);
  build(pm, options);
  if (failed(pm.run(module))) {
    errs() << "loomc: error: the " << phase << " phase failed (see above)\n";
    return failure();
  }
  return success();
}

/// Writes what `fn` prints to `path` ("-": stdout), replacing a file
/// atomically and durably.
LogicalResult writeText(StringRef path,
                        llvm::function_ref<void(raw_ostream &)> fn) {
  if (path == "-") {
    fn(outs());
    return success();
  }
  std::string text;
  raw_string_ostream os(text);
  fn(os);
  std::string error = loom::runtime::writeFileDurably(path.str(), text);
  if (!error.empty()) {
    errs() << "loomc: error: " << error << "\n";
    return failure();
  }
  return success();
}

/// LLVM's default pipeline at -O. The CUDA target's host code is launch
/// glue, one long block of stores and calls, where the SLP vectorizer
/// schedules quadratically (minutes on the ~125M bf16 step) and gains
/// nothing, so it is off there.
void optimize(llvm::Module &module, TargetMachine *machine) {
  LoopAnalysisManager loops;
  FunctionAnalysisManager functions;
  CGSCCAnalysisManager sccs;
  llvm::ModuleAnalysisManager modules;
  PipelineTuningOptions tuning;
  tuning.LoopUnrolling = tuning.LoopInterleaving = tuning.LoopVectorization =
      true;
  tuning.SLPVectorization = target != loom::Target::Cuda;
  PassBuilder builder(machine, tuning);
  builder.registerModuleAnalyses(modules);
  builder.registerCGSCCAnalyses(sccs);
  builder.registerFunctionAnalyses(functions);
  builder.registerLoopAnalyses(loops);
  builder.crossRegisterProxies(loops, functions, sccs, modules);
  OptimizationLevel level = optLevel == 0   ? OptimizationLevel::O0
                            : optLevel == 1 ? OptimizationLevel::O1
                            : optLevel == 2 ? OptimizationLevel::O2
                                            : OptimizationLevel::O3;
  ModulePassManager pipeline =
      optLevel == 0 ? builder.buildO0DefaultPipeline(level)
                    : builder.buildPerModuleDefaultPipeline(level);
  pipeline.run(module, modules);
}

/// The machine the step is compiled for: --cpu's name and features (the
/// host's real ones for `native`, so that a CPU whose hypervisor masks a
/// feature of its model gets no code that needs it), then --cpu-features.
/// Null, with `error` set, for an unknown CPU or feature.
std::unique_ptr<TargetMachine> createTargetMachine(std::string &error) {
  Triple triple(sys::getDefaultTargetTriple());
  const Target *tgt = TargetRegistry::lookupTarget(triple, error);
  if (!tgt) {
    error = "no LLVM target for " + triple.str() + ": " + error;
    return nullptr;
  }
  std::string cpuName = cpu;
  SubtargetFeatures features;
  if (cpu == "native") {
    cpuName = sys::getHostCPUName().str();
    // Sorted: the feature string is the same on every run.
    StringMap<bool, MallocAllocator> host = sys::getHostCPUFeatures();
    SmallVector<StringRef> names(host.keys());
    llvm::sort(names);
    for (StringRef name : names)
      features.AddFeature(name, host.lookup(name));
  }
  SmallVector<StringRef> requested;
  StringRef(cpuFeatures).split(requested, ',', -1, /*KeepEmpty=*/false);
  for (StringRef feature : requested) {
    feature = feature.trim();
    if (feature.size() < 2 || (feature[0] != '+' && feature[0] != '-')) {
      error = "--cpu-features: expected +name or -name, got '" +
              feature.str() + "'";
      return nullptr;
    }
    features.AddFeature(feature.drop_front(), feature[0] == '+');
  }
  // Constructors in .init_array: crtbegin and lld no longer run .ctors, and
  // the CUDA target's kernel modules are loaded by a global constructor.
  TargetOptions options;
  options.UseInitArray = true;
  std::unique_ptr<TargetMachine> machine(tgt->createTargetMachine(
      triple, cpuName, features.getString(), options, Reloc::PIC_,
      std::nullopt,
      optLevel >= 2 ? CodeGenOptLevel::Default : CodeGenOptLevel::Less));
  const MCSubtargetInfo *subtarget = machine->getMCSubtargetInfo();
  if (!subtarget->isCPUStringValid(cpuName)) {
    error = "--cpu: '" + cpuName + "' is not a CPU LLVM knows for " +
            triple.str() + " (llc -mcpu=help lists them)";
    return nullptr;
  }
  for (StringRef feature : requested) {
    StringRef name = feature.trim().drop_front();
    if (!llvm::any_of(subtarget->getAllProcessorFeatures(),
                      [&](const SubtargetFeatureKV &kv) {
                        return name == kv.Key;
                      })) {
      error = "--cpu-features: '" + name.str() +
              "' is not a feature LLVM knows for " + triple.str() +
              " (llc -mattr=help lists them)";
      return nullptr;
    }
  }
  return machine;
}

/// Gives `module` the machine's triple and data layout, and the string
/// `loom_cpu_features`: the features of CpuFeatures.h the machine's code
/// may use, which the trainer checks at start.
void setTarget(llvm::Module &module, TargetMachine &machine) {
  module.setTargetTriple(machine.getTargetTriple());
  module.setDataLayout(machine.createDataLayout());
  std::string required;
  if (machine.getTargetTriple().isX86()) {
    const MCSubtargetInfo *subtarget = machine.getMCSubtargetInfo();
#define LOOM_ADD_REQUIRED(name)                                                \
  if (subtarget->checkFeatures("+" name))                                      \
    required += (required.empty() ? "" : ",") + std::string(name);
    LOOM_X86_CPU_FEATURES(LOOM_ADD_REQUIRED)
#undef LOOM_ADD_REQUIRED
  }
  auto *text = llvm::ConstantDataArray::getString(module.getContext(),
                                                  required, /*AddNull=*/true);
  new llvm::GlobalVariable(module, text->getType(), /*isConstant=*/true,
                           llvm::GlobalValue::ExternalLinkage, text,
                           loom::runtime::symbols::kCpuFeatures);
}

LogicalResult emitObject(llvm::Module &module, TargetMachine &machine,
                         StringRef path) {
  optimize(module, &machine);
  SmallString<0> object;
  raw_svector_ostream os(object);
  legacy::PassManager pm;
  if (machine.addPassesToEmitFile(pm, os, nullptr,
                                  CodeGenFileType::ObjectFile)) {
    errs() << "loomc: error: the target cannot emit object files\n";
    return failure();
  }
  pm.run(module);
  std::string error =
      loom::runtime::writeFileDurably(path.str(), object.data(), object.size());
  if (!error.empty()) {
    errs() << "loomc: error: " << error << "\n";
    return failure();
  }
  return success();
}

/// Links `object` with the runtime and trainer main via mpicxx's flags (and
/// cuBLAS, NCCL and cudart for the CUDA target).
LogicalResult link(StringRef object, StringRef exe) {
  ErrorOr<std::string> cxx = sys::findProgramByName("clang++-22");
  if (!cxx)
    cxx = sys::findProgramByName("clang++");
  ErrorOr<std::string> mpicxx = sys::findProgramByName("mpicxx");
  if (!cxx || !mpicxx) {
    errs() << "loomc: error: the link needs clang++ and mpicxx (Open MPI) "
              "on the PATH\n";
    return failure();
  }
  // mpicxx --showme:link prints the MPI link flags.
  SmallString<128> flagsFile;
  sys::fs::createTemporaryFile("loomc-mpi", "txt", flagsFile);
  std::optional<StringRef> redirects[] = {std::nullopt, StringRef(flagsFile),
                                          std::nullopt};
  if (sys::ExecuteAndWait(*mpicxx, {*mpicxx, "--showme:link"}, std::nullopt,
                          redirects) != 0) {
    errs() << "loomc: error: mpicxx --showme:link failed\n";
    return failure();
  }
  auto flags = MemoryBuffer::getFile(flagsFile);
  sys::fs::remove(flagsFile);
  SmallVector<StringRef> mpiFlags;
  if (flags)
    StringRef((*flags)->getBuffer()).trim().split(mpiFlags, ' ', -1, false);
  SmallString<256> trainer(runtimeDir), runtime(runtimeDir);
  sys::path::append(trainer, "libloomtrainer.a");
  sys::path::append(runtime, target == loom::Target::Cuda ? "libloomrt_cuda.a"
                                                          : "libloomrt_mpi.a");
  for (StringRef lib : {trainer.str(), runtime.str()})
    if (!sys::fs::exists(lib)) {
      errs() << "loomc: error: link: " << lib
             << " not found (build Loom, or pass --runtime-dir)\n";
      return failure();
    }
  // The trainer main and the backend call each other.
  std::vector<std::string> args = {*cxx,
                                   "-fuse-ld=lld",
                                   object.str(),
                                   "-o",
                                   exe.str(),
                                   "-Wl,--start-group",
                                   trainer.str().str(),
                                   runtime.str().str(),
                                   "-Wl,--end-group"};
  for (StringRef f : mpiFlags)
    args.push_back(f.str());
  if (target == loom::Target::Cuda) {
    SmallVector<StringRef> dirs;
    StringRef(LOOM_CUDA_LIBRARY_DIRS).split(dirs, ':', -1, false);
    for (StringRef dir : dirs) {
      args.push_back(("-L" + dir).str());
      args.push_back(("-Wl,-rpath," + dir).str());
    }
    for (const char *lib : {"-lcublas", "-lnccl", "-lcudart"})
      args.push_back(lib);
  }
  // Only what the step calls is a dependency: a trainer that needs nothing
  // from the MLIR runner utilities must not pull in libMLIR and libLLVM, so
  // it runs on machines without an LLVM installation.
  args.push_back("-Wl,--push-state,--as-needed");
  args.push_back(LOOM_C_RUNNER_UTILS);
  args.push_back("-Wl,--pop-state");
  args.push_back("-Wl,-rpath," +
                 sys::path::parent_path(LOOM_C_RUNNER_UTILS).str());
  if (target == loom::Target::Cpu)
    args.push_back("-lopenblas");
  args.push_back("-lm");
  args.push_back("-lpthread");
  std::vector<StringRef> argRefs(args.begin(), args.end());
  if (verbose) {
    for (StringRef a : argRefs)
      errs() << a << " ";
    errs() << "\n";
  }
  std::string error;
  if (sys::ExecuteAndWait(*cxx, argRefs, std::nullopt, {}, 0, 0, &error) != 0) {
    errs() << "loomc: error: the link phase failed"
           << (error.empty() ? "" : ": ") << error << "\n";
    return failure();
  }
  return success();
}

} // namespace

/// Compiles `module` (a training step) through the sharding and memory-plan
/// phases so that its memory plan, what the trainer allocates for the step,
/// is within --remat-budget-mb (and --memory-limit-mb where that is lower),
/// recomputing as little as that allows.
///
/// train-remat's budget is a peak of the synchronous order's timeline before
/// decomposition, which the plan can exceed or undercut by a margin that
/// depends on what is recomputed. So the plan is measured, not predicted:
/// the step keeping everything first; else train-remat's leanest step (its
/// floor: a user budget below that plan is an error naming it), which also
/// lists the peaks at which train-remat's choice changes (its Pareto
/// candidates, `candidate_peak_bytes`); then a binary search over those for
/// the least recompute whose plan is within the budget. Each candidate is
/// compiled in full, so every accepted budget's plan is within it.
static LogicalResult
compileUnderRematBudget(OwningOpRef<ModuleOp> &module,
                        loom::ShardingOptions &sharding,
                        const loom::MemoryPlanOptions &plan) {
  double boundMb = rematBudgetMb;
  const char *boundFlag = "--remat-budget-mb";
  if (memoryLimitMb > 0 && memoryLimitMb < boundMb) {
    boundMb = memoryLimitMb;
    boundFlag = "--memory-limit-mb";
  }
  int64_t bound = int64_t(std::floor(boundMb * kMiB));
  OwningOpRef<ModuleOp> unsharded = module->clone();
  // train-remat's budget is the scheduler's limit too: the scheduler keeps
  // the memory remat freed.
  sharding.memoryLimitMb = 0;
  sharding.leanestBelowFloor = true;
  // The plan's peak with train-remat's budget `rematBytes` (0: none); with
  // `planned` false, the sharding phase alone (--emit=step) and 0.
  int64_t compiledBytes = -1;
  // The passes' remarks of the last compile: only the chosen step's are
  // shown (errors always are).
  SmallVector<std::pair<Location, std::string>> remarks;
  auto compile = [&](int64_t rematBytes,
                     bool planned = true) -> std::optional<int64_t> {
    remarks.clear();
    ScopedDiagnosticHandler keepRemarks(
        unsharded->getContext(), [&](Diagnostic &diag) {
          if (diag.getSeverity() != mlir::DiagnosticSeverity::Remark)
            return failure(); // to loomc's handler
          remarks.push_back({diag.getLocation(), diag.str()});
          return success();
        });
    module = unsharded->clone();
    compiledBytes = rematBytes;
    sharding.rematBudgetMb =
        rematBytes ? (double(rematBytes) + 0.5) / kMiB : 0.0;
    if (failed(runPhase(*module, "sharding", "loom-sharding-pipeline",
                        sharding, loom::buildShardingPipeline)))
      return std::nullopt;
    if (!planned) {
      compiledBytes = -1;
      return 0;
    }
    if (failed(runPhase(*module, "memory-plan", "loom-memory-plan-pipeline",
                        plan, loom::buildMemoryPlanPipeline)))
      return std::nullopt;
    return loom::trainer::getPredictedPeakBytes(
        loom::trainer::findStep(*module));
  };
  // The chosen step: its plan is `planned` with train-remat's budget
  // `rematBytes`; compiled again unless the module holds it.
  auto finish = [&](int64_t rematBytes, int64_t planned, int64_t floor,
                    int64_t keepAll) -> LogicalResult {
    bool step = emit == Emit::Step;
    if (compiledBytes != rematBytes || step) {
      std::optional<int64_t> again = compile(rematBytes, !step);
      if (!again)
        return failure();
      // CBC under its time limit may answer differently on a second solve;
      // the bound holds all the same, or the build fails.
      if (!step && *again > bound) {
        errs() << formatv("loomc: error: the step compiled again plans "
                          "{0:F3} MiB, over {1} {2:F3} (it planned {3:F3} MiB "
                          "before: train-remat's solver stopped at its time "
                          "limit?)\n",
                          *again / kMiB, boundFlag, boundMb, planned / kMiB);
        return failure();
      }
    }
    for (auto &[loc, message] : remarks)
      emitRemark(loc) << message;
    if (rematBytes == 0)
      errs() << formatv("loomc: remark: {0} {1:F3}: the step keeps "
                        "everything; its memory plan is {2:F3} MiB ({3} "
                        "bytes)\n",
                        boundFlag, boundMb, planned / kMiB, planned);
    else
      errs() << formatv("loomc: remark: {0} {1:F3}: the step's memory plan "
                        "is {2:F3} MiB ({3} bytes); plans reach from {4:F3} "
                        "MiB ({5} bytes, the floor) to {6:F3} MiB (keeping "
                        "everything); {7}\n",
                        boundFlag, boundMb, planned / kMiB, planned,
                        floor / kMiB, floor, keepAll / kMiB,
                        rematBytes == 1
                            ? std::string("train-remat's leanest step")
                            : formatv("train-remat's budget {0:F3} MiB",
                                      rematBytes / kMiB)
                                  .str());
    return success();
  };
  std::optional<int64_t> keepAll = compile(0);
  if (!keepAll)
    return failure();
  // Within the bound keeping everything: nothing is recomputed.
  if (*keepAll <= bound)
    return finish(0, *keepAll, *keepAll, *keepAll);
  // The floor: train-remat's leanest step, in the synchronous order.
  std::optional<int64_t> floor = compile(1);
  if (!floor)
    return failure();
  SmallVector<int64_t> peaks;
  if (auto info = loom::trainer::findStep(*module)
                      ->getAttrOfType<DictionaryAttr>("loom.remat"))
    if (auto list = info.getAs<DenseI64ArrayAttr>("candidate_peak_bytes"))
      peaks.assign(list.asArrayRef().begin(), list.asArrayRef().end());
  if (*floor > bound) {
    errs() << formatv("loomc: error: {0} {1:F3} cannot be met: the smallest "
                      "memory plan Loom reaches is {2:F3} MiB (recomputing "
                      "what train-remat can; keeping everything: {3:F3} "
                      "MiB)\n",
                      boundFlag, boundMb, *floor / kMiB, *keepAll / kMiB);
    return failure();
  }
  // The candidates from the floor (index 0) to keeping everything: the
  // largest whose plan is within the bound. Plans grow with the candidates'
  // peaks; each probe is compiled and measured all the same.
  int64_t low = 0, high = int64_t(peaks.size()) - 1, lowPlan = *floor;
  while (low < high) {
    int64_t mid = (low + high + 1) / 2;
    std::optional<int64_t> probe = compile(peaks[mid]);
    if (!probe)
      return failure();
    if (*probe <= bound) {
      low = mid;
      lowPlan = *probe;
    } else {
      high = mid - 1;
    }
  }
  return finish(low > 0 ? peaks[low] : 1, lowPlan, *floor, *keepAll);
}

/// One module of a pipeline's stages: stage s's loom_step_packed and
/// loom_step_manifest become loom_step_packed_stage<s> and
/// loom_step_manifest_stage<s>, everything else a stage defines becomes
/// internal to it, and loom_pipeline_stages (the count) with the tables
/// loom_pipeline_packed and loom_pipeline_manifests let the trainer pick
/// its rank's stage.
std::unique_ptr<llvm::Module>
linkStages(SmallVector<std::unique_ptr<llvm::Module>> &stages) {
  LLVMContext &context = stages.front()->getContext();
  auto combined = std::make_unique<llvm::Module>("loom_pipeline", context);
  combined->setDataLayout(stages.front()->getDataLayout());
  combined->setTargetTriple(stages.front()->getTargetTriple());
  llvm::Linker linker(*combined);
  for (auto [s, stage] : llvm::enumerate(stages)) {
    for (llvm::GlobalValue &value : stage->global_values()) {
      if (value.isDeclaration())
        continue;
      StringRef name = value.getName();
      if (name.starts_with("llvm."))
        continue;
      if (name == "loom_step_packed" || name == "loom_step_manifest")
        value.setName((name + "_stage" + Twine(s)).str());
      else if (!value.hasLocalLinkage())
        value.setLinkage(llvm::GlobalValue::InternalLinkage);
    }
    if (linker.linkInModule(std::move(stage))) {
      errs() << "loomc: error: linking stage " << s << " failed\n";
      return nullptr;
    }
  }
  llvm::Type *i64 = llvm::Type::getInt64Ty(context);
  auto *ptr = llvm::PointerType::get(context, 0);
  int64_t count = stages.size();
  new llvm::GlobalVariable(
      *combined, i64, /*isConstant=*/true, llvm::GlobalValue::ExternalLinkage,
      llvm::ConstantInt::get(i64, count), "loom_pipeline_stages");
  for (StringRef table : {"packed", "manifest"}) {
    SmallVector<llvm::Constant *> entries;
    for (int64_t s = 0; s < count; ++s) {
      std::string name = ("loom_step_" + table + "_stage" + Twine(s)).str();
      llvm::GlobalValue *value = combined->getNamedValue(name);
      if (!value) {
        errs() << "loomc: error: stage " << s << " has no " << name << "\n";
        return nullptr;
      }
      entries.push_back(value);
    }
    auto *type = llvm::ArrayType::get(ptr, count);
    new llvm::GlobalVariable(*combined, type, /*isConstant=*/true,
                             llvm::GlobalValue::ExternalLinkage,
                             llvm::ConstantArray::get(type, entries),
                             (table == "packed" ? "loom_pipeline_packed"
                                                : "loom_pipeline_manifests"));
  }
  return combined;
}

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  // --mlir-pass-statistics, --mlir-timing, --mlir-print-ir-after-all...
  // apply to every phase (hidden from --help, as LLVM's options are).
  registerPassManagerCLOptions();
  registerDefaultTimingManagerCLOptions();
  // -mlir-print-debuginfo keeps the op ids (loc("loom.op.N")) in --emit'd
  // IR, for coll-report against a profile.
  registerAsmPrinterCLOptions();
  cl::HideUnrelatedOptions(loomcCategory);
  cl::ParseCommandLineOptions(argc, argv, "Loom: forward -> trainer\n");
  bool cuda = target == loom::Target::Cuda;
  if (cuda && !LOOM_CUDA_ENABLED) {
    errs() << "loomc: error: this loomc was built without the CUDA toolkit "
              "and NCCL; --target=cuda is not available\n";
    return 1;
  }
  if (emulateGpu && cuda) {
    errs() << "loomc: error: --emulate-gpu runs the GPU mapping on the CPU; "
              "it needs --target=cpu\n";
    return 1;
  }
  if (emit == Emit::Ptx && !cuda) {
    errs() << "loomc: error: --emit=ptx needs --target=cuda\n";
    return 1;
  }
  if (optimizer == loom::Optimizer::None && emit > Emit::MemoryPlan) {
    errs() << "loomc: error: --optimizer=none leaves the parameters as they "
              "are; it is for --emit=training-step, step or memory-plan\n";
    return 1;
  }
  if (gpuBlockReduce < 0) {
    errs() << "loomc: error: --gpu-block-reduce must not be negative\n";
    return 1;
  }
  if (gpuThreads < 32 || gpuThreads > 1024 || gpuThreads % 32) {
    errs() << "loomc: error: --gpu-threads must be a multiple of 32 from 32 "
              "to 1024\n";
    return 1;
  }
  if (worldSize < 1) {
    errs() << "loomc: error: expected --world-size >= 1\n";
    return 1;
  }
  if (pipelineStages < 1 || microbatches < 1) {
    errs() << "loomc: error: expected --pipeline-stages >= 1 and "
              "--microbatches >= 1\n";
    return 1;
  }
  if (pipelineStages > 1) {
    if (worldSize % pipelineStages != 0) {
      errs() << "loomc: error: --world-size " << worldSize
             << " with --pipeline-stages " << pipelineStages
             << ": the world is the stages times their data-parallel "
                "replicas, a multiple of "
             << pipelineStages << "\n";
      return 1;
    }
    if (worldSize > pipelineStages && zeroStage == loom::ZeroStage::None) {
      errs() << "loomc: error: --world-size " << worldSize << " is "
             << worldSize / pipelineStages << " replicas of " << pipelineStages
             << " pipeline stages; their data parallelism needs "
                "--zero-stage 1 or 2\n";
      return 1;
    }
    if (worldSize == pipelineStages && zeroStage != loom::ZeroStage::None) {
      errs() << "loomc: error: --zero-stage shards each stage over its "
                "data-parallel replicas, and --world-size "
             << worldSize << " gives each of the " << pipelineStages
             << " stages one (make --world-size a multiple of the stages)\n";
      return 1;
    }
    if (zeroStage == loom::ZeroStage::Parameters) {
      errs() << "loomc: error: --zero-stage 3 with --pipeline-stages: a "
                "stage's replicas shard at ZeRO stage 1 or 2 (stage 3 would "
                "gather each parameter once per microbatch)\n";
      return 1;
    }
    if (rematBudgetMb > 0 || rematActivations < 1 || !profile.empty()) {
      errs() << "loomc: error: --remat-budget-mb, --remat-activations and "
                "--profile are not built for pipeline stages yet\n";
      return 1;
    }
    if (target == loom::Target::Cuda) {
      errs() << "loomc: error: pipeline stages compile for --target=cpu; the "
                "CUDA trainer's point-to-point transfers have not run on a "
                "GPU yet\n";
      return 1;
    }
  } else if (worldSize > 1 && zeroStage == loom::ZeroStage::None) {
    errs() << "loomc: error: --world-size " << worldSize
           << " needs --zero-stage 1, 2 or 3 (stage 0 is single-rank)\n";
    return 1;
  }
  if (!(rematBudgetMb >= 0) || !std::isfinite(double(rematBudgetMb))) {
    errs() << "loomc: error: expected --remat-budget-mb >= 0\n";
    return 1;
  }
  if (!(rematActivations >= 0 && rematActivations <= 1)) {
    errs() << "loomc: error: expected --remat-activations in [0, 1]\n";
    return 1;
  }
  if ((rematBudgetMb > 0 || rematActivations < 1) &&
      zeroStage != loom::ZeroStage::None &&
      schedule != loom::Schedule::Loom) {
    errs() << "loomc: error: --remat-budget-mb and --remat-activations "
              "bound the step Loom schedules; a baseline --schedule keeps "
              "its own order\n";
    return 1;
  }
  if (memoryLimitMb > 0 && schedule != loom::Schedule::Loom) {
    errs() << "loomc: error: --memory-limit-mb bounds Loom's schedule; a "
              "baseline --schedule keeps its own order\n";
    return 1;
  }
  if (!profile.empty()) {
    bool remat = rematBudgetMb > 0 || rematActivations < 1;
    if (schedule != loom::Schedule::Loom ||
        (zeroStage == loom::ZeroStage::None && !remat)) {
      errs() << "loomc: error: --profile calibrates Loom's schedule of the "
                "collectives and train-remat's choice; it needs --zero-stage "
                "1, 2 or 3 and --schedule=loom, or --remat-budget-mb or "
                "--remat-activations\n";
      return 1;
    }
    llvm::Expected<loom::Profile> measured = loom::Profile::load(profile);
    if (!measured) {
      errs() << "loomc: error: --profile " << toString(measured.takeError())
             << "\n";
      return 1;
    }
    StringRef targetName = target == loom::Target::Cuda ? "cuda" : "cpu";
    if (!measured->target.empty() && measured->target != targetName) {
      errs() << "loomc: error: --profile " << profile << " was measured by a "
             << measured->target << " trainer; this is --target=" << targetName
             << "\n";
      return 1;
    }
    if (measured->worldSize && measured->worldSize != worldSize) {
      errs() << "loomc: error: --profile " << profile << " was measured on "
             << measured->worldSize << " ranks; this is --world-size "
             << worldSize << "\n";
      return 1;
    }
  }
  if (fuseChunk < 0 || fuseVocab < 0) {
    errs() << "loomc: error: --fuse-cross-entropy and "
              "--fuse-cross-entropy-vocab must not be negative\n";
    return 1;
  }
  if (fuseVocab > 0 && fuseChunk == 0) {
    errs() << "loomc: error: --fuse-cross-entropy-vocab needs the fused loss "
              "(--fuse-cross-entropy > 0)\n";
    return 1;
  }

  // The machine is made (and --cpu, --cpu-features checked) before the
  // phases, so a typo fails at once.
  InitializeNativeTarget();
  InitializeNativeTargetAsmPrinter();
  std::string machineError;
  std::unique_ptr<TargetMachine> machine = createTargetMachine(machineError);
  if (!machine) {
    errs() << "loomc: error: " << machineError << "\n";
    return 1;
  }

  DialectRegistry registry;
  registerAllDialects(registry);
  registerAllExtensions(registry);
  loom::registerAllDialects(registry);
  registerAllToLLVMIRTranslations(registry);
  MLIRContext context(registry);
  context.loadAllAvailableDialects();

  std::string error;
  auto file = openInputFile(inputFile, &error);
  if (!file) {
    errs() << "loomc: error: " << error << "\n";
    return 1;
  }
  SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(std::move(file), SMLoc());
  SourceMgrDiagnosticHandler handler(sourceMgr, &context);
  // An upstream parser's crash on malformed input is a diagnostic.
  OwningOpRef<ModuleOp> module;
  if (!loom::runGuarded("loomc", "parsing " + inputFile, [&] {
        module = parseSourceFile<ModuleOp>(sourceMgr, &context);
      }))
    return 1;
  if (!module) {
    errs() << "loomc: error: the parse phase failed (see above)\n";
    return 1;
  }
  if (!loom::trainer::findStep(*module)) {
    errs() << "loomc: error: " << inputFile
           << " has no function with a train.loss result\n";
    return 1;
  }
  auto write = [&](auto print) {
    return failed(writeText(outputFile, print)) ? 1 : 0;
  };
  // As loom-opt prints it, so that the two can be compared.
  auto writeModule = [&] {
    return write([&](raw_ostream &os) {
      module->print(os);
      os << "\n";
    });
  };

  // 1. The training step.
  loom::TrainingStepOptions step;
  step.fuseCrossEntropy = fuseChunk;
  step.fuseCrossEntropyVocab = fuseVocab;
  step.optimizer = optimizer;
  step.lr = lr;
  step.weightDecay = weightDecay;
  step.microbatches = microbatches;
  step.pipelineStages = pipelineStages;
  step.pipelineReplicas = pipelineStages > 1 ? worldSize / pipelineStages : 1;
  step.pipelineSchedule = pipelineSchedule;
  step.pipelineLayout = pipelineLayout;
  step.pipelineDevice =
      device.getNumOccurrences() ? device.getValue() : std::string("cpu");
  if (failed(runPhase(*module, "training-step", "loom-training-step-pipeline",
                      step, loom::buildTrainingStepPipeline)))
    return 1;
  if (emit == Emit::TrainingStep)
    return writeModule();

  // A pipeline's stages are compiled one by one, each as a module of its
  // own (one step, one memory plan), and linked into one trainer.
  SmallVector<OwningOpRef<ModuleOp>> stageModules;
  if (pipelineStages > 1) {
    for (int64_t s = 0; s < pipelineStages; ++s) {
      OwningOpRef<ModuleOp> stage = module->clone();
      for (auto func :
           llvm::make_early_inc_range(stage->getOps<func::FuncOp>())) {
        auto index =
            func->getAttrOfType<IntegerAttr>(loom::attrs::kPipelineStage);
        if (index && index.getInt() != s)
          func.erase();
      }
      stageModules.push_back(std::move(stage));
    }
  } else {
    stageModules.push_back(std::move(module));
  }
  // What --emit writes past the training step: each stage's module in
  // turn, as loom-opt --split-input-file reads them.
  std::string emitted;
  auto emitStage = [&](auto print) {
    llvm::raw_string_ostream os(emitted);
    if (!emitted.empty())
      os << "// -----\n";
    print(os);
  };
  SmallVector<OwningOpRef<ModuleOp>> lowered;
  for (OwningOpRef<ModuleOp> &stageModule : stageModules) {
    OwningOpRef<ModuleOp> module = std::move(stageModule);
    auto writeModule = [&] {
      emitStage([&](raw_ostream &os) {
        module->print(os);
        os << "\n";
      });
      return 2;
    };
    int result = [&]() -> int {
      // 2. ZeRO and the communication schedule, and 3. the static memory plan,
      // on the decomposed step: its memory timeline (results in the trainer's
      // buffers) is the prediction, and every buffer it allocates is pinned to
      // an arena offset.
      //
      // --memory-limit-mb bounds what the trainer allocates for the step: the
      // plan's peak. The scheduler sees the step before decomposition, which
      // needs less, so where the plan comes out over the limit the schedule is
      // redone with the scheduler's limit lowered (a remark says so), down to
      // the synchronous order at worst; a limit even that schedule's plan does
      // not meet is an error that says what it needs. The scheduler's figure
      // can be above or below the plan's, so the first schedule is the default
      // one, which tells loomc the difference to translate the limit by.
      loom::ShardingOptions sharding;
      sharding.zeroStage = zeroStage;
      // A pipeline stage is sharded over its replicas.
      sharding.worldSize =
          pipelineStages > 1 ? worldSize / pipelineStages : int64_t(worldSize);
      sharding.schedule = schedule;
      sharding.device =
          device.getNumOccurrences()
              ? device.getValue()
              : (target == loom::Target::Cuda ? "h100-nvlink" : "cpu");
      sharding.profile = profile;
      sharding.rematSolver = rematSolver;
      sharding.rematActivations = rematActivations;
      loom::MemoryPlanOptions plan;
      plan.target = target;
      plan.emulateGpu = emulateGpu;
      plan.fuseAttention = fuseAttention;
      plan.lossKernels = targetDefault(lossKernels);
      plan.embeddingKernel = targetDefault(embeddingKernel);
      plan.widenCompute = widenCompute;
      plan.fuseElementwise = targetDefault(fuseElementwise);
      plan.splitReduction = gpuSplitReduction;
      plan.splitMinRows = gpuSplitMinRows;
      plan.gpuThreads = gpuThreads;
      plan.memoryPlan = memoryPlan;
      if (rematBudgetMb > 0) {
        if (failed(compileUnderRematBudget(module, sharding, plan)))
          return 1;
        if (emit == Emit::Step)
          return writeModule();
      } else {
        double limitMb = memoryLimitMb;
        OwningOpRef<ModuleOp> unsharded;
        if (limitMb > 0 && emit != Emit::Step)
          unsharded = module->clone();
        // The first schedule is the default one: it shows how the plan
        // compares with the scheduler's view, which then gets the limit
        // translated.
        double scheduleLimitMb = unsharded ? 0 : limitMb;
        for (int attempt = 0;; ++attempt) {
          sharding.memoryLimitMb = scheduleLimitMb;
          if (failed(runPhase(*module, "sharding", "loom-sharding-pipeline",
                              sharding, loom::buildShardingPipeline)))
            return 1;
          if (emit == Emit::Step)
            return writeModule();
          if (failed(runPhase(*module, "memory-plan",
                              "loom-memory-plan-pipeline", plan,
                              loom::buildMemoryPlanPipeline)))
            return 1;
          if (!unsharded)
            break;
          func::FuncOp stepFunc = loom::trainer::findStep(*module);
          int64_t planned = loom::trainer::getPredictedPeakBytes(stepFunc);
          int64_t limit = int64_t(limitMb * kMiB);
          auto scheduled = stepFunc->getAttrOfType<IntegerAttr>(
              loom::attrs::kScheduledPeakBytes);
          auto synchronous = stepFunc->getAttrOfType<IntegerAttr>(
              loom::attrs::kSynchronousPeakBytes);
          // The least the scheduler accepts: the synchronous order's peak.
          double floorMb = synchronous
                               ? double(synchronous.getInt() + 1) / kMiB
                               : limitMb;
          if (attempt == 0 && scheduled && synchronous) {
            // The limit at the scheduler's level: the user's, less what the
            // plan adds to (or plus what it takes from) the scheduler's
            // figure.
            scheduleLimitMb = std::max(
                floorMb, limitMb - double(planned - scheduled.getInt()) / kMiB);
            module = unsharded->clone();
            continue;
          }
          if (planned <= limit)
            break;
          bool atFloor = scheduleLimitMb <= floorMb;
          if (!scheduled || !synchronous || atFloor || attempt == 5) {
            errs() << formatv(
                "loomc: error: --memory-limit-mb {0:F3} cannot be met: ",
                limitMb);
            if (atFloor)
              errs() << formatv(
                  "with every collective synchronous (the least memory "
                  "retiming collectives reaches) the step's memory plan "
                  "needs {0:F3} MiB; --remat-budget-mb recomputes "
                  "activations to go lower\n",
                  planned / kMiB);
            else
              errs() << formatv("the step's memory plan needs {0:F3} MiB\n",
                                planned / kMiB);
            return 1;
          }
          // Lower the scheduler's limit by the excess, or by what
          // decomposition added, whichever is more, down to the synchronous
          // order.
          double next = std::max(
              floorMb,
              std::min(scheduleLimitMb - double(planned - limit) / kMiB,
                       limitMb - double(planned - scheduled.getInt()) / kMiB));
          errs() << formatv(
              "loomc: remark: the memory plan needs {0:F3} MiB, over "
              "--memory-limit-mb {1:F3} (the scheduler saw {2:F3} MiB "
              "before decomposition); scheduling again with a limit of "
              "{3:F3} MiB\n",
              planned / kMiB, limitMb, scheduled.getInt() / kMiB, next);
          module = unsharded->clone();
          scheduleLimitMb = next;
        }
      }
      if (emit == Emit::MemoryPlan)
        return writeModule();

      // 4. The trainer's entry point and the runtime's collectives.
      loom::EntryOptions entry;
      entry.source = sys::path::filename(inputFile).str();
      if (failed(runPhase(*module, "entry", "loom-entry-pipeline", entry,
                          loom::buildEntryPipeline)))
        return 1;
      if (emit == Emit::Mlir)
        return writeModule();

      // 5. Lowering to the LLVM dialect, and the manifest.
      if (cuda) {
        loom::LowerToCudaOptions lowering;
        lowering.memoryPlan = memoryPlan;
        lowering.chip = gpuChip;
        lowering.format = emit == Emit::Ptx ? loom::GpuFormat::Ptx : gpuFormat;
        lowering.gpuThreads = gpuThreads;
        lowering.gpuBlockReduce = gpuBlockReduce;
        lowering.gpuVectorBytes = gpuVectorBytes;
        if (failed(runPhase(*module, "lowering", "loom-lower-to-cuda-pipeline",
                            lowering, loom::buildLowerToCudaPipeline)))
          return 1;
      } else {
        loom::LowerToCpuOptions lowering;
        lowering.memoryPlan = memoryPlan;
        lowering.vectorize = vectorize;
        lowering.emulateGpu = emulateGpu;
        lowering.gpuThreads = gpuThreads;
        lowering.gpuBlockReduce = gpuBlockReduce;
        lowering.gpuVectorBytes = gpuVectorBytes;
        if (failed(runPhase(*module, "lowering", "loom-lower-to-cpu-pipeline",
                            lowering, loom::buildLowerToCpuPipeline)))
          return 1;
      }
      if (emit == Emit::Ptx) {
        emitStage([&](raw_ostream &os) { printPtx(*module, os); });
        return 2;
      }
      if (emit == Emit::LlvmMlir)
        return writeModule();
      return 0;
    }();
    if (result == 1)
      return 1;
    if (result == 0)
      lowered.push_back(std::move(module));
  }
  if (lowered.size() != stageModules.size())
    return write([&](raw_ostream &os) { os << emitted; });

  // 6. LLVM IR and the object file.
  LLVMContext llvmContext;
  SmallVector<std::unique_ptr<llvm::Module>> stageLlvm;
  for (OwningOpRef<ModuleOp> &stageModule : lowered) {
    stageLlvm.push_back(
        translateModuleToLLVMIR(*stageModule, llvmContext, "loom_step"));
    if (!stageLlvm.back()) {
      errs() << "loomc: error: the LLVM IR translation phase failed\n";
      return 1;
    }
  }
  std::unique_ptr<llvm::Module> llvmModule = stageLlvm.size() == 1
                                                 ? std::move(stageLlvm.front())
                                                 : linkStages(stageLlvm);
  if (!llvmModule)
    return 1;
  setTarget(*llvmModule, *machine);
  if (emit == Emit::Llvm)
    return write([&](raw_ostream &os) { llvmModule->print(os, nullptr); });
  if (emit == Emit::Obj)
    return failed(emitObject(*llvmModule, *machine, outputFile)) ? 1 : 0;
  // The object is a temporary; the trainer is linked beside its path and
  // put in place durably (a trainer already there is replaced whole), or
  // where it is for a file with other hard links.
  SmallString<128> object;
  if (std::error_code ec =
          sys::fs::createTemporaryFile("loomc-step", "o", object)) {
    errs() << "loomc: error: cannot create a temporary object file: "
           << ec.message() << "\n";
    return 1;
  }
  loom::runtime::DurableTarget exe =
      loom::runtime::planDurableWrite(outputFile);
  if (exe.error.empty() && exe.append)
    exe.error = outputFile + " is not a regular file: a trainer cannot be "
                             "written there";
  if (!exe.error.empty()) {
    errs() << "loomc: error: " << exe.error << "\n";
    sys::fs::remove(object);
    return 1;
  }

  // A trainer rewritten where it is (other hard links) is linked to a
  // scratch file first, and copied over it only once linked.
  if (std::string error = loom::runtime::writeToScratch(exe); !error.empty()) {
    errs() << "loomc: error: " << error << "\n";
    sys::fs::remove(object);
    return 1;
  }
  // Neither temporary outlives an interrupt.
  sys::RemoveFileOnSignal(object);
  sys::RemoveFileOnSignal(exe.write);

  // 7. Link.
  LogicalResult linked =
      success(succeeded(emitObject(*llvmModule, *machine, object)) &&
                                 succeeded(link(object, exe.write)));
  sys::fs::remove(object);
  if (succeeded(linked))
    error = loom::runtime::installFileDurably(exe);
  else
    sys::fs::remove(exe.write);
  sys::DontRemoveFileOnSignal(exe.write);
  if (failed(linked))
    return 1;
  if (!error.empty()) {
    errs() << "loomc: error: " << error << "\n";
    return 1;
  }
  return 0;
}

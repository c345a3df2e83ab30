//===- loomc.cpp - compile a model's forward into a trainer executable ----===//
//
//   loomc forward.mlir --target=cpu --world-size N --zero-stage 0|1|2|3
//         [--optimizer adamw|sgd --lr ...] [--memory-limit-mb M]
//         [--emit=step|mlir|llvm-mlir|llvm|obj|exe] -o trainer
//
// Stages, each named in its diagnostics:
//   1. training step: train-fuse-linear-cross-entropy (unless
//      --fuse-cross-entropy=0), train-autodiff, train-optimizer;
//   2. partition: zero-partition (stage >= 1), loom-schedule-pipeline;
//   3. runtime calls: convert-coll-to-loomrt, the @loom_step entry;
//   4. lowering: fused attention kernels (train-fuse-attention, unless
//      --fuse-attention=false), decompositions (the fused loss's rows and
//      the embedding gradient as runtime kernels with --loss-kernels and
//      --embedding-kernel, the CUDA default), zero-filled inits of
//      elementwise ops folded (train-fold-init-fills), equal tables of
//      indices computed once (train-share-index-generics), for GPU kernels
//      elementwise producers fused into their users (train-fuse-elementwise)
//      and column reductions split into partials (train-split-reduction), the
//      memory plan, bufferisation, runtime kernel calls, matmuls to BLAS,
//      loops, LLVM dialect;
//   5. LLVM IR, optimised (-O, default 2) for the host CPU, and an object;
//   6. link with the loomrt MPI runtime and the trainer main.
//
// --target=cuda keeps stages 1-3; stage 4 sends matmuls to cuBLAS and the
// other linalg ops to kernels lowered through NVVM to a cubin (embedded), and
// stage 6 links the CUDA backend (NCCL, cuBLAS, cudart).
//
//===----------------------------------------------------------------------===//

#include "EntryPoint.h"

#include "loom/Analysis/MemoryTimeline.h"
#include "loom/Dialect/Train/ReductionMatch.h"
#include "loom/InitAllDialects.h"
#include "loom/InitAllPasses.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Host.h"

using namespace mlir;
using namespace llvm;

static cl::OptionCategory loomcCategory("loomc options");

static cl::opt<std::string> inputFile(cl::Positional,
                                      cl::desc("<forward.mlir>"), cl::Required,
                                      cl::cat(loomcCategory));
static cl::opt<std::string> outputFile("o", cl::desc("output file"),
                                       cl::Required, cl::cat(loomcCategory));
static cl::opt<std::string>
    target("target",
           cl::desc("cpu (loops, OpenBLAS, MPI) or cuda (NVVM kernels, "
                    "cuBLAS, NCCL)"),
           cl::init("cpu"), cl::cat(loomcCategory));
static cl::opt<std::string> gpuChip("gpu-chip",
                                    cl::desc("the CUDA target's GPU"),
                                    cl::init("sm_90"), cl::cat(loomcCategory));
static cl::opt<std::string> gpuFormat(
    "gpu-format",
    cl::desc("how the kernels are embedded: cubin (ptxas at compile time, "
             "for --gpu-chip only) or ptx (the driver JIT-compiles them at "
             "the first launch, for that GPU or a later one)"),
    cl::init("cubin"), cl::cat(loomcCategory));
static cl::opt<int64_t>
    gpuThreads("gpu-threads",
               cl::desc("threads per block of the generated kernels"),
               cl::init(256), cl::cat(loomcCategory));
static cl::opt<int64_t> gpuBlockReduce(
    "gpu-block-reduce",
    cl::desc("reductions along rows at least this long get a block per row "
             "(loom-linalg-to-gpu block-reduce-min; 0: a thread per row)"),
    cl::init(128), cl::cat(loomcCategory));
static cl::opt<int64_t> gpuVectorBytes(
    "gpu-vector-bytes",
    cl::desc("elementwise and reduction kernels' threads each load and "
             "store this many bytes as aligned vectors (loom-linalg-to-gpu "
             "vector-bytes; 0: an element per thread)"),
    cl::init(16), cl::cat(loomcCategory));
static cl::opt<int64_t> gpuSplitReduction(
    "gpu-split-reduction",
    cl::desc("column reductions into few outputs (a norm's weight gradient) "
             "fold this many rows into each of many partials, then combine "
             "them (train-split-reduction rows; 0: a block per output)"),
    cl::init(32), cl::cat(loomcCategory));
static cl::opt<int64_t> gpuSplitMinRows(
    "gpu-split-min-rows",
    cl::desc("split only column reductions of at least this many rows "
             "(train-split-reduction min-rows)"),
    cl::init(1024), cl::cat(loomcCategory));
static cl::opt<int64_t> worldSize("world-size", cl::desc("ranks"), cl::init(1),
                                  cl::cat(loomcCategory));
static cl::opt<unsigned> zeroStage("zero-stage",
                                   cl::desc("ZeRO stage 0, 1, 2 or 3"),
                                   cl::init(0), cl::cat(loomcCategory));
static cl::opt<std::string> optimizer("optimizer", cl::desc("adamw or sgd"),
                                      cl::init("adamw"),
                                      cl::cat(loomcCategory));
static cl::opt<double> lr("lr",
                          cl::desc("the trainer's default learning rate "
                                   "(its --lr overrides it)"),
                          cl::init(1e-3), cl::cat(loomcCategory));
static cl::opt<double> weightDecay("weight-decay", cl::init(0.0),
                                   cl::desc("AdamW/SGD weight decay"),
                                   cl::cat(loomcCategory));
static cl::opt<double> memoryLimitMb(
    "memory-limit-mb",
    cl::desc("scheduler memory limit, MiB (0: the partitioned step's peak)"),
    cl::init(0), cl::cat(loomcCategory));
static cl::opt<std::string> device("device",
                                   cl::desc("device description for the "
                                            "scheduler's cost model"),
                                   cl::init("cpu"), cl::cat(loomcCategory));
static cl::opt<std::string>
    emit("emit",
         cl::desc("step (the training step), mlir (with runtime calls), "
                  "llvm-mlir (LLVM dialect), llvm (LLVM IR), obj, exe; "
                  "with --target=cuda also ptx (the kernels' PTX)"),
         cl::init("exe"), cl::cat(loomcCategory));
static cl::opt<std::string>
    runtimeDir("runtime-dir",
               cl::desc("where libloomrt_mpi.a and libloomtrainer.a are"),
               cl::init(LOOM_RUNTIME_DIR), cl::cat(loomcCategory));
static cl::opt<bool> verbose("v", cl::desc("print the link command"),
                             cl::cat(loomcCategory));
static cl::opt<unsigned> optLevel("O", cl::desc("LLVM optimisation level"),
                                  cl::init(2), cl::Prefix,
                                  cl::cat(loomcCategory));

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
             "accumulators (train-widen-compute; off: each op rounds to its "
             "element type, as the IR says)"),
    cl::init(true), cl::cat(loomcCategory));
static cl::opt<bool>
    memoryPlan("memory-plan",
               cl::desc("place temporaries in one arena (loom-memory-plan)"),
               cl::init(true), cl::cat(loomcCategory));

static cl::opt<cl::boolOrDefault> fuseElementwise(
    "gpu-fuse-elementwise",
    cl::desc("with --target=cuda or --emulate-gpu: fuse elementwise linalg "
             "producers into their consumers (train-fuse-elementwise), "
             "so that they share a kernel (default: on for --target=cuda; "
             "the ~125M bf16 step launches 207 kernels fewer at the same "
             "planned peak)"),
    cl::cat(loomcCategory));

static cl::opt<bool> emulateGpu(
    "emulate-gpu",
    cl::desc("with --target=cpu: map the step's kernels as the CUDA target "
             "does (loom-linalg-to-gpu) but run the mapped loops on the CPU, "
             "to check the mapping without a GPU"),
    cl::init(false), cl::cat(loomcCategory));

static cl::opt<bool>
    vectorize("vectorize",
              cl::desc("tile and vectorise the linalg ops BLAS does not take "
                       "(loom-vectorize)"),
              cl::init(true), cl::cat(loomcCategory));

/// Bufferisation (results go straight into the caller's buffers where the
/// plan says so), then loops, BLAS and the LLVM dialect. memref.alloc and
/// dealloc become the generic allocation functions libloomtrainer counts.
///
/// On the CUDA target the step is host code that launches kernels: matmuls
/// go to cuBLAS, every other linalg op becomes a kernel lowered through
/// NVVM (one module, identical kernels once) to a cubin or PTX embedded in
/// the trainer, and the arena is a gpu.alloc.
static std::string loweringPipeline() {
  std::string bufferize =
      std::string("eliminate-empty-tensors, "
                  "one-shot-bufferize{bufferize-function-boundaries "
                  "function-boundary-type-conversion=identity-layout-map}, "
                  "buffer-deallocation-pipeline, canonicalize, ") +
      (memoryPlan ? "func.func(loom-pack-buffers), " : "") +
      "convert-train-kernels-to-calls, ";
  std::string toLLVM = "convert-math-to-llvm, convert-math-to-libm, "
                       "finalize-memref-to-llvm{use-generic-functions=true "
                       "use-aligned-alloc=true}, "
                       "convert-to-llvm, reconcile-unrealized-casts";
  if (target == "cuda")
    return bufferize +
           formatv("convert-linalg-to-blas{{library=cublas}, "
                   "func.func(loom-linalg-to-gpu{{threads={0} "
                   "block-reduce-min={3} vector-bytes={5}}), "
                   "func.func(convert-parallel-loops-to-gpu), canonicalize, "
                   "expand-strided-metadata, lower-affine, "
                   "gpu-launch-sink-index-computations, "
                   "gpu-kernel-outlining, loom-name-gpu-kernels, "
                   "loom-merge-gpu-modules, "
                   "nvvm-attach-target{{chip={1} features=+ptx80 O=3}, "
                   "convert-scf-to-cf, gpu.module(convert-gpu-to-nvvm), "
                   "gpu-to-llvm, "
                   "gpu-module-to-binary{{format={4} toolkit={2}}, ",
                   gpuThreads.getValue(), gpuChip.getValue(), LOOM_CUDA_ROOT,
                   gpuBlockReduce.getValue(),
                   emit == "ptx" || gpuFormat == "ptx" ? "isa" : "bin",
                   gpuVectorBytes.getValue())
               .str() +
           toLLVM;
  std::string loops =
      emulateGpu ? formatv("func.func(loom-linalg-to-gpu{{threads={0} "
                           "block-reduce-min={1} vector-bytes={2} "
                           "device-buffers=false}), ",
                           gpuThreads.getValue(), gpuBlockReduce.getValue(),
                           gpuVectorBytes.getValue())
                       .str()
                 : std::string(vectorize
                                   ? "func.func(loom-vectorize), canonicalize, "
                                   : "") +
                       "func.func(convert-linalg-to-loops), ";
  // x86 has no bf16 arithmetic and libgcc 12 no bf16 conversions: the
  // ops left in bf16 compute in f32, and the casts become integer code.
  return bufferize + "convert-linalg-to-blas, " + loops +
         "expand-strided-metadata, lower-affine, "
         "math-extend-to-supported-types{target-type=f32}, "
         "arith-emulate-unsupported-floats{source-types=bf16 "
         "target-type=f32}, arith-expand{include-bf16=true}, "
         "convert-scf-to-cf, convert-vector-to-llvm, " +
         toLLVM;
}

/// The PTX of every kernel module, each after a `// loom-module NAME` line.
static void printPtx(ModuleOp module, raw_ostream &os) {
  module.walk([&](gpu::BinaryOp binary) {
    for (mlir::Attribute object : binary.getObjects())
      os << "// loom-module " << binary.getName() << "\n"
         << cast<gpu::ObjectAttr>(object).getObject().getValue() << "\n";
  });
}

/// The sum of an integer attribute over the module's ops.
static int64_t sumAttr(Operation *root, StringRef name) {
  int64_t sum = 0;
  root->walk([&](Operation *op) {
    if (auto value = op->getAttrOfType<IntegerAttr>(name))
      sum += value.getInt();
  });
  return sum;
}

namespace {

/// Runs `pipeline` on `module`; on failure says which stage failed.
LogicalResult runStage(ModuleOp module, StringRef stage, StringRef pipeline) {
  mlir::PassManager pm(module.getContext());
  std::string errors;
  raw_string_ostream os(errors);
  if (failed(parsePassPipeline(pipeline, pm, os))) {
    errs() << "loomc: " << stage << ": bad pipeline: " << errors << "\n";
    return failure();
  }
  if (failed(pm.run(module))) {
    errs() << "loomc: error: the " << stage << " stage failed (see above)\n";
    return failure();
  }
  return success();
}

LogicalResult writeText(StringRef path,
                        llvm::function_ref<void(raw_ostream &)> fn) {
  std::string error;
  auto file = openOutputFile(path, &error);
  if (!file) {
    errs() << "loomc: error: " << error << "\n";
    return failure();
  }
  fn(file->os());
  file->keep();
  return success();
}

func::FuncOp findStep(ModuleOp module) {
  func::FuncOp found;
  module.walk([&](func::FuncOp func) {
    if (!found && !func.isExternal() &&
        cast<FunctionOpInterface>(func.getOperation()).getNumResults() &&
        func.getResultAttr(0, loom::train::TrainDialect::kLossAttrName))
      found = func;
  });
  return found;
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
  tuning.SLPVectorization = target != "cuda";
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

LogicalResult emitObject(llvm::Module &module, StringRef path) {
  std::string error;
  Triple triple(sys::getDefaultTargetTriple());
  const Target *tgt = TargetRegistry::lookupTarget(triple, error);
  if (!tgt) {
    errs() << "loomc: error: no LLVM target for " << triple.str() << ": "
           << error << "\n";
    return failure();
  }
  // Constructors in .init_array: crtbegin and lld no longer run .ctors, and
  // the CUDA target's kernel modules are loaded by a global constructor.
  TargetOptions options;
  options.UseInitArray = true;
  std::unique_ptr<TargetMachine> machine(tgt->createTargetMachine(
      triple, sys::getHostCPUName(), "", options, Reloc::PIC_,
      std::nullopt,
      optLevel >= 2 ? CodeGenOptLevel::Default : CodeGenOptLevel::Less));
  module.setTargetTriple(triple);
  module.setDataLayout(machine->createDataLayout());
  optimize(module, machine.get());
  std::error_code ec;
  ToolOutputFile out(path, ec, sys::fs::OF_None);
  if (ec) {
    errs() << "loomc: error: " << path << ": " << ec.message() << "\n";
    return failure();
  }
  legacy::PassManager pm;
  if (machine->addPassesToEmitFile(pm, out.os(), nullptr,
                                   CodeGenFileType::ObjectFile)) {
    errs() << "loomc: error: the target cannot emit object files\n";
    return failure();
  }
  pm.run(module);
  out.keep();
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
  sys::path::append(runtime, target == "cuda" ? "libloomrt_cuda.a"
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
  if (target == "cuda") {
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
  if (target == "cpu")
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
  if (sys::ExecuteAndWait(*cxx, argRefs, std::nullopt, {}, 0, 0, &error) !=
      0) {
    errs() << "loomc: error: the link stage failed" << (error.empty() ? "" : ": ")
           << error << "\n";
    return failure();
  }
  return success();
}

} // namespace

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(loomcCategory);
  cl::ParseCommandLineOptions(argc, argv, "Loom: forward -> trainer\n");
  static const llvm::StringSet<> emits = {"step", "mlir", "llvm-mlir", "llvm",
                                          "obj",  "exe",  "ptx"};
  if (!emits.contains(emit)) {
    errs() << "loomc: error: --emit must be one of step, mlir, llvm-mlir, "
              "llvm, obj, exe, ptx\n";
    return 1;
  }
  if (target != "cpu" && target != "cuda") {
    errs() << "loomc: error: --target must be cpu or cuda, not '" << target
           << "'\n";
    return 1;
  }
  if (target == "cuda" && !LOOM_CUDA_ENABLED) {
    errs() << "loomc: error: this loomc was built without the CUDA toolkit "
              "and NCCL; --target=cuda is not available\n";
    return 1;
  }
  if (emulateGpu && target != "cpu") {
    errs() << "loomc: error: --emulate-gpu runs the GPU mapping on the CPU; "
              "it needs --target=cpu\n";
    return 1;
  }
  if (emit == "ptx" && target != "cuda") {
    errs() << "loomc: error: --emit=ptx needs --target=cuda\n";
    return 1;
  }
  if (gpuFormat != "cubin" && gpuFormat != "ptx") {
    errs() << "loomc: error: --gpu-format must be cubin or ptx, not '"
           << gpuFormat << "'\n";
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
  if (worldSize < 1 || zeroStage > 3) {
    errs() << "loomc: error: expected --world-size >= 1 and --zero-stage in "
              "0..3\n";
    return 1;
  }
  if (worldSize > 1 && zeroStage == 0) {
    errs() << "loomc: error: --world-size " << worldSize
           << " needs --zero-stage 1, 2 or 3 (stage 0 is single-rank)\n";
    return 1;
  }

  DialectRegistry registry;
  registerAllDialects(registry);
  registerAllExtensions(registry);
  loom::registerAllDialects(registry);
  registerAllToLLVMIRTranslations(registry);
  registerAllPasses();
  loom::registerAllPasses();
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
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sourceMgr, &context);
  if (!module) {
    errs() << "loomc: error: the parse stage failed (see above)\n";
    return 1;
  }
  if (!findStep(*module)) {
    errs() << "loomc: error: " << inputFile
           << " has no function with a train.loss result\n";
    return 1;
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

  // 1. The training step.
  std::string optimizerPass =
      (fuseChunk > 0 ? formatv("func.func(train-fuse-linear-cross-entropy{{"
                               "chunk-tokens={0} chunk-vocab={1}}), ",
                               fuseChunk.getValue(), fuseVocab.getValue())
                           .str()
                     : std::string()) +
      formatv("train-autodiff, train-optimizer{{kind={0} lr={1} "
              "weight-decay={2} lr-input=true}",
              optimizer, lr, weightDecay)
          .str();
  if (failed(runStage(*module, "training-step", optimizerPass)))
    return 1;
  func::FuncOp step = findStep(*module);
  OwningOpRef<func::FuncOp> full(cast<func::FuncOp>(step->clone()));

  // 2. Partition and schedule.
  if (zeroStage > 0) {
    std::string pipeline =
        formatv("zero-partition{{stage={0} world-size={1}}, "
                "loom-schedule-pipeline{{device={2} memory-limit-mb={3}}",
                zeroStage, worldSize, device, memoryLimitMb)
            .str();
    if (failed(runStage(*module, "partition", pipeline)))
      return 1;
  }
  FailureOr<loom::StepSignature> signature =
      loom::describeStep(*full, findStep(*module));
  if (failed(signature))
    return 1;
  signature->properties = {{"world_size", std::to_string(worldSize)},
                           {"zero_stage", std::to_string(zeroStage)},
                           {"optimizer", optimizer},
                           {"lr", formatv("{0}", lr).str()},
                           {"source", sys::path::filename(inputFile).str()}};
  // The peak the scheduler bounded (train ops whole, results from their
  // definition), for reference.
  signature->properties["scheduled_peak_bytes"] = std::to_string(
      loom::MemoryTimeline(findStep(*module).getBody().front())
          .getPeakBytes());
  if (emit == "step")
    return failed(writeText(outputFile,
                            [&](raw_ostream &os) { module->print(os); }));

  // 3. The static memory plan, on the decomposed step: its memory timeline
  // (results in the trainer's buffers) is the prediction, and every buffer
  // it allocates is pinned to an arena offset.
  // The CUDA target launches a kernel per linalg op: fuse elementwise
  // producers into their consumers first (the plan then sees the fused ops;
  // by default for --target=cuda).
  bool gpuKernels = target == "cuda" || emulateGpu;
  auto onForCuda = [&](cl::boolOrDefault option) {
    return option == cl::BOU_UNSET ? target == "cuda" : option == cl::BOU_TRUE;
  };
  std::string decompose;
  if (onForCuda(lossKernels))
    decompose += "loss-kernels=true";
  if (onForCuda(embeddingKernel))
    decompose +=
        std::string(decompose.empty() ? "" : " ") + "embedding-kernel=true";
  if (failed(runStage(
          *module, "memory-plan",
          std::string(fuseAttention ? "func.func(train-fuse-attention), "
                                    : "") +
              "train-decompose" +
              (decompose.empty() ? "" : "{" + decompose + "}") + ", " +
              (widenCompute ? "func.func(train-widen-compute), " : "") +
              "func.func(train-fold-init-fills), canonicalize, "
              "func.func(train-share-index-generics)" +
              (gpuKernels && onForCuda(fuseElementwise)
                   ? ", func.func(train-fuse-elementwise), canonicalize"
                   : "") +
              (gpuKernels && gpuSplitReduction > 0
                   ? formatv(", func.func(train-split-reduction{{rows={0} "
                             "max-outputs={1} min-rows={2}})",
                             gpuSplitReduction.getValue(),
                             loom::train::kFewBlocks * gpuThreads.getValue(),
                             gpuSplitMinRows.getValue())
                         .str()
                   : "") +
              // An op whose result is inserted into a slice of a new
              // tensor writes into that slice (RoPE's halves), so the plan
              // sees no copy.
              (memoryPlan ? ", eliminate-empty-tensors, "
                            "func.func(loom-update-in-place, "
                            "loom-memory-plan{"
                            "caller-owned-results=true})"
                          : ""))))
    return 1;
  // Results written into their arguments' buffers take no memory of their
  // own, in the trainer or in the plan.
  if (auto tied = findStep(*module)->getAttrOfType<DenseI64ArrayAttr>(
          "loom.tied_results")) {
    unsigned arguments = findStep(*module).getNumArguments();
    for (auto [index, arg] : llvm::enumerate(tied.asArrayRef()))
      signature->tensors[arguments + index].inPlace = arg >= 0;
  }
  int64_t argumentBytes = 0;
  for (const loom::StepTensor &t : signature->tensors)
    argumentBytes += t.inPlace ? 0 : t.bytes();
  int64_t arenaBytes = sumAttr(*module, "loom.arena_bytes");
  int64_t arenaBoundBytes = sumAttr(*module, "loom.arena_bound_bytes");
  signature->properties["predicted_peak_bytes"] = std::to_string(
      memoryPlan
          ? sumAttr(*module, "loom.timeline_peak_bytes")
          : loom::MemoryTimeline(findStep(*module).getBody().front(),
                                 {/*callerOwnedResults=*/true})
                .getPeakBytes());

  // 4. Runtime calls and the entry point (the step inlined as it is).
  if (failed(runStage(*module, "runtime-calls", "convert-coll-to-loomrt")) ||
      failed(loom::buildEntryFunction(*module, findStep(*module))) ||
      failed(runStage(*module, "entry",
                      "inline{default-pipeline=}, symbol-dce")))
    return 1;
  SmallVector<MemRefType> buffers;
  for (mlir::Type t : module->lookupSymbol<func::FuncOp>(loom::kEntryName)
                    .getFunctionType()
                    .getInputs())
    buffers.push_back(cast<MemRefType>(t));
  if (emit == "mlir")
    return failed(writeText(outputFile,
                            [&](raw_ostream &os) { module->print(os); }));

  // 5. Lowering to the LLVM dialect.
  if (failed(runStage(*module, "lowering", loweringPipeline())))
    return 1;
  // What bufferisation allocated outside the plan (nothing, when the plan
  // holds), placed by loom-pack-buffers.
  int64_t packedBytes = sumAttr(*module, "loom.packed_bytes");
  signature->properties["planned_arena_bytes"] =
      std::to_string(arenaBytes + packedBytes);
  signature->properties["unplanned_bytes"] = std::to_string(packedBytes);
  // No placement of the planned buffers is smaller than this; the plan's
  // peak is the timeline's when the arena reaches it.
  signature->properties["planned_arena_bound_bytes"] = std::to_string(
      arenaBoundBytes + sumAttr(*module, "loom.packed_bound_bytes"));
  signature->properties["planned_peak_bytes"] =
      std::to_string(arenaBytes + packedBytes + argumentBytes);
  if (failed(loom::buildPackedEntry(*module, buffers, signature->manifest())))
    return 1;
  if (emit == "ptx")
    return failed(writeText(outputFile,
                            [&](raw_ostream &os) { printPtx(*module, os); }));
  if (emit == "llvm-mlir")
    return failed(writeText(outputFile,
                            [&](raw_ostream &os) { module->print(os); }));

  // 6. LLVM IR and the object file.
  InitializeNativeTarget();
  InitializeNativeTargetAsmPrinter();
  LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> llvmModule =
      translateModuleToLLVMIR(*module, llvmContext, "loom_step");
  if (!llvmModule) {
    errs() << "loomc: error: the LLVM IR translation stage failed\n";
    return 1;
  }
  if (emit == "llvm")
    return failed(writeText(
        outputFile, [&](raw_ostream &os) { llvmModule->print(os, nullptr); }));
  std::string object = outputFile;
  if (emit == "exe")
    object += ".o";
  if (failed(emitObject(*llvmModule, object)))
    return 1;
  if (emit == "obj")
    return 0;

  // 7. Link.
  LogicalResult linked = link(object, outputFile);
  sys::fs::remove(object);
  return failed(linked) ? 1 : 0;
}

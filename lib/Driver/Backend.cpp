//===- Backend.cpp - LLVM IR, the object and the trainer executable -------===//
//
// The lowered modules translated to LLVM IR (a pipeline's stages linked into
// one module), optimised and compiled for --cpu and --cpu-features (default:
// this machine's CPU and the features it really has), and linked with the
// loomrt runtime and the trainer main. A CPU trainer's machine code is
// generated in partitions of its functions on the machine's threads, as
// LTO's parallel code generation does (a pipeline's stages are many
// functions: its actions).
//
//===----------------------------------------------------------------------===//

#include "loom/Driver/Driver.h"
#include "loom/Runtime/CpuFeatures.h"
#include "loom/Runtime/DurableFile.h"
#include "loom/Runtime/Symbols.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/Bitcode/BitcodeReader.h"
#include "llvm/Bitcode/BitcodeWriter.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/DiagnosticInfo.h"
#include "llvm/IR/DiagnosticPrinter.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/Signals.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/Threading.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/SubtargetFeature.h"
#include "llvm/Transforms/Utils/Cloning.h"
#include <thread>
#ifdef __GLIBC__
#include <malloc.h>
#endif

using namespace mlir;
using namespace llvm;
using namespace loom;
using namespace loom::driver;

namespace {

/// LLVM's default pipeline at -O. The CUDA target's host code is launch
/// glue, one long block of stores and calls, where the SLP vectorizer
/// schedules quadratically (minutes on the ~125M bf16 step) and gains
/// nothing, so it is off there.
void optimize(llvm::Module &module, TargetMachine *machine,
              const CompileOptions &options) {
  LoopAnalysisManager loops;
  FunctionAnalysisManager functions;
  CGSCCAnalysisManager sccs;
  llvm::ModuleAnalysisManager modules;
  PipelineTuningOptions tuning;
  tuning.LoopUnrolling = tuning.LoopInterleaving = tuning.LoopVectorization =
      true;
  tuning.SLPVectorization = options.target != loom::Target::Cuda;
  PassBuilder builder(machine, tuning);
  builder.registerModuleAnalyses(modules);
  builder.registerCGSCCAnalyses(sccs);
  builder.registerFunctionAnalyses(functions);
  builder.registerLoopAnalyses(loops);
  builder.crossRegisterProxies(loops, functions, sccs, modules);
  unsigned optLevel = options.optLevel;
  OptimizationLevel level = optLevel == 0   ? OptimizationLevel::O0
                            : optLevel == 1 ? OptimizationLevel::O1
                            : optLevel == 2 ? OptimizationLevel::O2
                                            : OptimizationLevel::O3;
  ModulePassManager pipeline =
      optLevel == 0 ? builder.buildO0DefaultPipeline(level)
                    : builder.buildPerModuleDefaultPipeline(level);
  pipeline.run(module, modules);
}

/// `module`'s object, compiled by `machine`.
std::string generateCode(llvm::Module &module, TargetMachine &machine,
                         SmallString<0> &object) {
  raw_svector_ostream os(object);
  legacy::PassManager pm;
  if (machine.addPassesToEmitFile(pm, os, nullptr, CodeGenFileType::ObjectFile))
    return "the target cannot emit object files";
  pm.run(module);
  return "";
}

/// The partition that generates each function's code, and how many there
/// are (one: the module is not split).
struct Partitions {
  llvm::DenseMap<const llvm::Function *, unsigned> owner;
  unsigned count = 1;
};

/// Each defined function's partition, for code generation on `threads`
/// threads: largest first, each to the partition with the fewest
/// instructions so far. Empty when one partition would hold nearly all
/// the code (an unpipelined step is one function): splitting would then
/// cost more than it saves.
Partitions assignPartitions(const llvm::Module &module, unsigned threads) {
  Partitions split;
  // What ties definitions together (an alias to its aliasee, a comdat's
  // members) stays in one partition: the module is not split.
  if (!module.alias_empty() || !module.ifunc_empty() ||
      llvm::any_of(module.global_values(), [](const llvm::GlobalValue &value) {
        return value.hasComdat();
      }))
    return split;
  SmallVector<std::pair<unsigned, const llvm::Function *>> functions;
  uint64_t total = 0;
  for (const llvm::Function &function : module)
    if (!function.isDeclaration()) {
      functions.push_back({function.getInstructionCount(), &function});
      total += functions.back().first;
    }
  unsigned partitions = std::min<size_t>(threads, functions.size());
  if (partitions < 2)
    return split;
  // Ties in module order: the split is deterministic.
  llvm::stable_sort(functions, [](const auto &a, const auto &b) {
    return a.first > b.first;
  });
  SmallVector<uint64_t> load(partitions, 0);
  for (auto [size, function] : functions) {
    unsigned least = std::min_element(load.begin(), load.end()) - load.begin();
    split.owner[function] = least;
    load[least] += size;
  }
  if (*std::max_element(load.begin(), load.end()) * 10 >= total * 9)
    return Partitions();
  split.count = partitions;
  return split;
}

/// -v's line: how many partitions generate the code of how many functions.
void reportPartitions(const llvm::Module &module, unsigned partitions,
                      const CompileOptions &options, Reporter &reporter) {
  if (!options.verbose)
    return;
  unsigned functions = llvm::count_if(
      module, [](const llvm::Function &f) { return !f.isDeclaration(); });
  reporter.stream() << reporter.getTool() << ": code generation: " << partitions
                    << (partitions == 1 ? " partition" : " partitions")
                    << " of " << functions << " functions\n";
}

/// The objects of the optimised `module` (which a split leaves without
/// bodies): one, or with `split` one per partition, each a clone of `module`
/// that defines its functions (the first partition also its data) and declares
/// the rest, compiled in its own context and thread with its own machine. As
/// LTO's parallel code generation does, the split follows the whole module's
/// optimisation, so calls between partitions keep what it made of them (fast
/// calls, dead arguments dropped); locals become hidden globals, linked in one
/// trainer.
LogicalResult generateObjects(llvm::Module &module, TargetMachine &machine,
                              const CompileOptions &options,
                              const Partitions &split,
                              SmallVectorImpl<SmallString<0>> &objects,
                              Reporter &reporter) {
  objects.clear();
  unsigned partitions = split.count;
  if (partitions < 2) {
    std::string error = generateCode(module, machine, objects.emplace_back());
    if (!error.empty()) {
      reporter.error(error);
      return failure();
    }
    return success();
  }
  // Locals become hidden globals under names of their own (as ThinLTO's
  // promoted locals are), which no library of the trainer defines.
  for (llvm::GlobalValue &value : module.global_values()) {
    if (!value.hasLocalLinkage())
      continue;
    value.setLinkage(llvm::GlobalValue::ExternalLinkage);
    value.setVisibility(llvm::GlobalValue::HiddenVisibility);
    value.setName((value.hasName() ? value.getName() : "unnamed") +
                  ".loom.partition");
  }
  // Partitions leave this context as bitcode: an LLVMContext is one
  // thread's.
  SmallVector<SmallString<0>> bitcode(partitions);
  for (unsigned k = 0; k < partitions; ++k) {
    ValueToValueMapTy map;
    std::unique_ptr<llvm::Module> part =
        CloneModule(module, map, [&](const llvm::GlobalValue *value) {
          if (auto *function = dyn_cast<llvm::Function>(value))
            return split.owner.lookup(function) == k;
          return k == 0;
        });
    raw_svector_ostream os(bitcode[k]);
    WriteBitcodeToFile(*part, os);
  }
  // The partitions hold the code now: the module's bodies go, and the
  // memory they held goes back to the system before the threads allocate
  // (glibc's threads allocate from arenas of their own).
  for (llvm::Function &function : module)
    function.deleteBody();
#ifdef __GLIBC__
  malloc_trim(0);
#endif
  // A machine per thread (the first partition's is `machine`), made here
  // where an error reaches the reporter.
  SmallVector<std::unique_ptr<TargetMachine>> machines;
  for (unsigned k = 1; k < partitions; ++k) {
    std::string error;
    machines.push_back(createTargetMachine(options, error));
    if (!machines.back()) {
      reporter.error(error);
      return failure();
    }
  }
  objects.resize(partitions);
  SmallVector<std::string> errors(partitions);
  auto generate = [&](unsigned k) {
    LLVMContext context;
    // An error is this partition's to report (the default handler would
    // exit from this thread, leaving the others and the scratch files).
    context.setDiagnosticHandlerCallBack(
        [](const DiagnosticInfo *info, void *out) {
          if (info->getSeverity() != DS_Error)
            return;
          raw_string_ostream os(*static_cast<std::string *>(out));
          DiagnosticPrinterRawOStream printer(os);
          info->print(printer);
          os << "\n";
        },
        &errors[k]);
    Expected<std::unique_ptr<llvm::Module>> part = parseBitcodeFile(
        MemoryBufferRef(StringRef(bitcode[k].data(), bitcode[k].size()),
                        "partition"),
        context);
    SmallString<0>().swap(bitcode[k]);
    if (!part) {
      errors[k] = "partition " + std::to_string(k) +
                  " does not read back: " + toString(part.takeError());
      return;
    }
    std::string error =
        generateCode(**part, k == 0 ? machine : *machines[k - 1], objects[k]);
    if (!error.empty())
      errors[k] += error;
  };
  // The first partition on this thread, the others on threads of their own.
  std::vector<std::thread> threads;
  for (unsigned k = 1; k < partitions; ++k)
    threads.emplace_back(generate, k);
  generate(0);
  for (std::thread &thread : threads)
    thread.join();
  for (const std::string &error : errors)
    if (!error.empty()) {
      reporter.error(error);
      return failure();
    }
  return success();
}

/// Links `objects` with the runtime and trainer main via mpicxx's flags (and
/// cuBLAS, NCCL and cudart for the CUDA target).
LogicalResult link(ArrayRef<std::string> objects, StringRef exe,
                   const CompileOptions &options, Reporter &reporter) {
  ErrorOr<std::string> cxx = sys::findProgramByName("clang++-22");
  if (!cxx)
    cxx = sys::findProgramByName("clang++");
  ErrorOr<std::string> mpicxx = sys::findProgramByName("mpicxx");
  if (!cxx || !mpicxx) {
    reporter.error("the link needs clang++ and mpicxx (Open MPI) on the PATH");
    return failure();
  }
  // mpicxx --showme:link prints the MPI link flags.
  SmallString<128> flagsFile;
  sys::fs::createTemporaryFile("loomc-mpi", "txt", flagsFile);
  std::optional<StringRef> redirects[] = {std::nullopt, StringRef(flagsFile),
                                          std::nullopt};
  if (sys::ExecuteAndWait(*mpicxx, {*mpicxx, "--showme:link"}, std::nullopt,
                          redirects) != 0) {
    sys::fs::remove(flagsFile);
    reporter.error("mpicxx --showme:link failed");
    return failure();
  }
  auto flags = MemoryBuffer::getFile(flagsFile);
  sys::fs::remove(flagsFile);
  SmallVector<StringRef> mpiFlags;
  if (flags)
    StringRef((*flags)->getBuffer()).trim().split(mpiFlags, ' ', -1, false);
  bool cuda = options.target == loom::Target::Cuda;
  SmallString<256> trainer(options.runtimeDir), runtime(options.runtimeDir),
      heap(options.runtimeDir);
  sys::path::append(trainer, "libloomtrainer.a");
  sys::path::append(runtime, cuda ? "libloomrt_cuda.a" : "libloomrt_mpi.a");
  sys::path::append(heap, "libloomheap.a");
  for (StringRef lib : {trainer.str(), runtime.str(), heap.str()})
    if (!sys::fs::exists(lib)) {
      reporter.error("link: " + lib +
                     " not found (build Loom, or pass --runtime-dir)");
      return failure();
    }
  // Each library calls only into the ones after it: the trainer main into
  // the backend, both into the heap's counters.
  std::vector<std::string> args = {*cxx, "-fuse-ld=lld"};
  args.insert(args.end(), objects.begin(), objects.end());
  args.insert(args.end(), {"-o", exe.str(), trainer.str().str(),
                           runtime.str().str(), heap.str().str()});
  for (StringRef f : mpiFlags)
    args.push_back(f.str());
  if (cuda) {
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
  if (!cuda)
    args.push_back("-lopenblas");
  args.push_back("-lm");
  args.push_back("-lpthread");
  std::vector<StringRef> argRefs(args.begin(), args.end());
  if (options.verbose) {
    for (StringRef a : argRefs)
      reporter.stream() << a << " ";
    reporter.stream() << "\n";
  }
  std::string error;
  if (sys::ExecuteAndWait(*cxx, argRefs, std::nullopt, {}, 0, 0, &error) != 0) {
    reporter.error("the link phase failed" + Twine(error.empty() ? "" : ": ") +
                   error);
    return failure();
  }
  return success();
}

} // namespace

std::unique_ptr<llvm::Module>
loom::driver::translateToLlvm(ModuleOp module, LLVMContext &context,
                              Reporter &reporter) {
  std::unique_ptr<llvm::Module> translated =
      translateModuleToLLVMIR(module, context, "loom_step");
  if (!translated)
    reporter.error("the LLVM IR translation phase failed");
  return translated;
}

std::unique_ptr<TargetMachine>
loom::driver::createTargetMachine(const CompileOptions &options,
                                  std::string &error) {
  InitializeNativeTarget();
  InitializeNativeTargetAsmPrinter();
  Triple triple(sys::getDefaultTargetTriple());
  const llvm::Target *tgt = TargetRegistry::lookupTarget(triple, error);
  if (!tgt) {
    error = "no LLVM target for " + triple.str() + ": " + error;
    return nullptr;
  }
  std::string cpuName = options.cpu;
  SubtargetFeatures features;
  if (cpuName == "native") {
    cpuName = sys::getHostCPUName().str();
    // Sorted: the feature string is the same on every run.
    StringMap<bool, MallocAllocator> host = sys::getHostCPUFeatures();
    SmallVector<StringRef> names(host.keys());
    llvm::sort(names);
    for (StringRef name : names)
      features.AddFeature(name, host.lookup(name));
  }
  SmallVector<StringRef> requested;
  StringRef(options.cpuFeatures).split(requested, ',', -1, /*KeepEmpty=*/false);
  for (StringRef feature : requested) {
    feature = feature.trim();
    if (feature.size() < 2 || (feature[0] != '+' && feature[0] != '-')) {
      error = "--cpu-features: expected +name or -name, got '" + feature.str() +
              "'";
      return nullptr;
    }
    features.AddFeature(feature.drop_front(), feature[0] == '+');
  }
  // Constructors in .init_array: crtbegin and lld no longer run .ctors, and
  // the CUDA target's kernel modules are loaded by a global constructor.
  TargetOptions targetOptions;
  targetOptions.UseInitArray = true;
  std::unique_ptr<TargetMachine> machine(
      tgt->createTargetMachine(triple, cpuName, features.getString(),
                               targetOptions, Reloc::PIC_, std::nullopt,
                               options.optLevel >= 2 ? CodeGenOptLevel::Default
                                                     : CodeGenOptLevel::Less));
  const MCSubtargetInfo *subtarget = machine->getMCSubtargetInfo();
  if (!subtarget->isCPUStringValid(cpuName)) {
    error = "--cpu: '" + cpuName + "' is not a CPU LLVM knows for " +
            triple.str() + " (llc -mcpu=help lists them)";
    return nullptr;
  }
  for (StringRef feature : requested) {
    StringRef name = feature.trim().drop_front();
    if (!llvm::any_of(
            subtarget->getAllProcessorFeatures(),
            [&](const SubtargetFeatureKV &kv) { return name == kv.Key; })) {
      error = "--cpu-features: '" + name.str() +
              "' is not a feature LLVM knows for " + triple.str() +
              " (llc -mattr=help lists them)";
      return nullptr;
    }
  }
  return machine;
}

void loom::driver::setTarget(llvm::Module &module, TargetMachine &machine) {
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
  auto *text = ConstantDataArray::getString(module.getContext(), required,
                                            /*AddNull=*/true);
  new GlobalVariable(module, text->getType(), /*isConstant=*/true,
                     GlobalValue::ExternalLinkage, text,
                     runtime::symbols::kCpuFeatures);
}

LogicalResult loom::driver::emitObject(llvm::Module &module,
                                       TargetMachine &machine,
                                       const CompileOptions &options,
                                       StringRef path, Reporter &reporter) {
  // One object: one partition.
  optimize(module, &machine, options);
  reportPartitions(module, 1, options, reporter);
  SmallString<0> object;
  std::string error = generateCode(module, machine, object);
  if (error.empty())
    error = runtime::writeFileDurably(path.str(), object.data(), object.size());
  if (!error.empty()) {
    reporter.error(error);
    return failure();
  }
  return success();
}

LogicalResult loom::driver::buildTrainer(llvm::Module &module,
                                         TargetMachine &machine,
                                         const CompileOptions &options,
                                         StringRef path, Reporter &reporter) {
  // The trainer is linked beside its path and put in place durably (a
  // trainer already there is replaced whole), or where it is for a file
  // with other hard links.
  runtime::DurableTarget exe = runtime::planDurableWrite(path.str());
  if (exe.error.empty() && exe.append)
    exe.error = path.str() + " is not a regular file: a trainer cannot be "
                             "written there";
  if (!exe.error.empty()) {
    reporter.error(exe.error);
    return failure();
  }
  // A trainer rewritten where it is (other hard links) is linked to a
  // scratch file first, and copied over it only once linked.
  if (std::string error = runtime::writeToScratch(exe); !error.empty()) {
    reporter.error(error);
    return failure();
  }
  // No temporary outlives an interrupt.
  sys::RemoveFileOnSignal(exe.write);
  SmallVector<std::string> objectPaths;
  auto linked = [&]() -> LogicalResult {
    optimize(module, &machine, options);
    // At most 8 partitions: each thread holds its partition's code
    // generation in memory. The CUDA target's host code (launch glue and
    // the kernel modules its constructor loads) stays one object.
    Partitions split;
    if (options.target != loom::Target::Cuda && llvm::llvm_is_multithreaded())
      split = assignPartitions(
          module,
          std::min(8u, llvm::hardware_concurrency().compute_thread_count()));
    reportPartitions(module, split.count, options, reporter);
    SmallVector<SmallString<0>> objects;
    if (failed(generateObjects(module, machine, options, split, objects,
                               reporter)))
      return failure();
    for (const SmallString<0> &object : objects) {
      SmallString<128> objectPath;
      if (std::error_code ec =
              sys::fs::createTemporaryFile("loomc-step", "o", objectPath)) {
        reporter.error("cannot create a temporary object file: " +
                       ec.message());
        return failure();
      }
      sys::RemoveFileOnSignal(objectPath);
      objectPaths.push_back(objectPath.str().str());
      if (std::string error = runtime::writeFileDurably(
              objectPaths.back(), object.data(), object.size());
          !error.empty()) {
        reporter.error(error);
        return failure();
      }
    }
    return link(objectPaths, exe.write, options, reporter);
  }();
  for (const std::string &objectPath : objectPaths) {
    sys::fs::remove(objectPath);
    sys::DontRemoveFileOnSignal(objectPath);
  }
  std::string error;
  if (succeeded(linked))
    error = runtime::installFileDurably(exe);
  else
    sys::fs::remove(exe.write);
  sys::DontRemoveFileOnSignal(exe.write);
  if (failed(linked))
    return failure();
  if (!error.empty()) {
    reporter.error(error);
    return failure();
  }
  return success();
}

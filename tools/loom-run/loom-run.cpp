//===- loom-run.cpp - evaluate a tensor function on .npy inputs -----------===//
//
// Lowers one function of a module (loom-reference-pipeline: train ops
// decomposed, linalg to loops, then LLVM), JIT-compiles it, calls it on
// arrays read from .npy files and writes each result to
// DIR/result<i>.npy. It is the reference evaluator the
// numerical tests (gradient checks, kernels against decompositions) compare
// with, so it favours obviously-correct lowering over speed.
//
//   loom-run step.mlir --entry=step --output-dir=out a.npy b.npy ...
//   loom-run stages.mlir --ranks=2 --entry='stage{rank}' --output-dir=out \
//       @'args{rank}.txt'
//
//===----------------------------------------------------------------------===//

#include "SimulatedWorld.h"
#include "loom/Dialect/Coll/CollOps.h"
#include "loom/InitAllDialects.h"
#include "loom/Pipelines/Pipelines.h"
#include "loom/Runtime/Bf16.h"
#include "loom/Support/Npy.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/TargetSelect.h"
#include <thread>

using namespace mlir;
using llvm::Error;
using llvm::errs;
using llvm::Expected;
using llvm::outs;
using llvm::SmallString;
using llvm::StringRef;
using llvm::Twine;
using llvm::cl::opt;
using loom::NpyDType;
namespace cl = llvm::cl;
namespace sys = llvm::sys;

static cl::opt<std::string> inputFile(cl::Positional, cl::desc("<module.mlir>"),
                                      cl::Required);
static cl::list<std::string> arrayFiles(cl::Positional,
                                        cl::desc("<argument .npy files>..."));
static cl::opt<std::string> entry("entry", cl::desc("function to call"),
                                  cl::Required);
static cl::opt<std::string>
    outputDir("output-dir", cl::desc("where result<i>.npy go"), cl::Required);
static cl::opt<std::string>
    sharedLibs("shared-libs",
               cl::desc("comma-separated libraries the code may call"),
               cl::init(LOOM_C_RUNNER_UTILS));
static cl::opt<bool> dumpLowered("dump-lowered",
                                 cl::desc("print the LLVM-dialect module"));
static cl::opt<unsigned> optLevel(
    "O",
    cl::desc("LLVM optimisation level of the JIT-compiled code, 0-3 "
             "(default 0: the numerical tests' steps are small and unrolled, "
             "so compiling them dominates, and -O0 keeps every operation as "
             "the IR says)"),
    cl::init(0), cl::Prefix);
static cl::opt<int64_t> numRanks(
    "ranks",
    cl::desc("run the program on this many ranks (threads); {rank} in "
             "--entry, an argument file's name or an @list file's name is "
             "the rank, and results go to DIR/rank<r>/"),
    cl::init(1));

namespace {

/// A ranked memref descriptor as the LLVM lowering lays it out:
/// {allocated, aligned, offset, sizes[rank], strides[rank]}, all 8 bytes.
struct Descriptor {
  std::vector<int64_t> words;
  explicit Descriptor(int64_t rank) : words(3 + 2 * rank, 0) {}
};

/// The .npy type of an argument or result of element type `type`. NumPy has
/// no bf16: a bf16 tensor is read from an f32 array (each value rounded to
/// nearest even) and written as one (exactly).
std::optional<NpyDType> getDType(Type type) {
  if (type.isF32() || type.isBF16())
    return NpyDType::F32;
  if (type.isF64())
    return NpyDType::F64;
  if (type.isSignlessInteger(32))
    return NpyDType::I32;
  if (type.isSignlessInteger(64))
    return NpyDType::I64;
  return std::nullopt;
}

/// Replaces an f32 array's data by its values rounded to bf16, two bytes
/// each.
void roundToBf16(loom::NpyArray &array) {
  int64_t count = array.getNumElements();
  std::vector<char> narrow(count * 2);
  for (int64_t i = 0; i < count; ++i) {
    uint32_t word;
    std::memcpy(&word, &array.data[i * 4], 4);
    float value;
    std::memcpy(&value, &word, 4);
    uint16_t bits = loom::floatToBf16(value);
    std::memcpy(&narrow[i * 2], &bits, 2);
  }
  array.data.assign(narrow.begin(), narrow.end());
}

/// Checks that `type` is a static tensor of a supported element type.
LogicalResult checkTensorType(Type type, const Twine &what) {
  auto tensorType = dyn_cast<RankedTensorType>(type);
  if (!tensorType || !tensorType.hasStaticShape() ||
      !getDType(tensorType.getElementType())) {
    errs() << "error: " << what << " has type " << type
           << "; loom-run supports static tensors of f32, f64, bf16 (as f32 "
              ".npy), i32, i64\n";
    return failure();
  }
  return success();
}

/// Packs `inputs` for the packed calling convention: one pointer per LLVM
/// argument (a memref expands to its descriptor's words), then one to the
/// results' storage.
struct PackedCall {
  std::vector<Descriptor> descriptors;
  std::vector<int64_t> resultStorage;
  std::vector<void *> pointers;

  PackedCall(std::vector<loom::NpyArray> &inputs, ArrayRef<Type> resultTypes) {
    descriptors.reserve(inputs.size());
    for (loom::NpyArray &array : inputs) {
      int64_t rank = array.shape.size();
      Descriptor &d = descriptors.emplace_back(rank);
      void *data = array.data.data();
      std::memcpy(&d.words[0], &data, sizeof(void *));
      std::memcpy(&d.words[1], &data, sizeof(void *));
      int64_t stride = 1;
      for (int64_t dim = rank - 1; dim >= 0; --dim) {
        d.words[3 + dim] = array.shape[dim];
        d.words[3 + rank + dim] = stride;
        stride *= array.shape[dim];
      }
    }
    for (Descriptor &d : descriptors)
      for (int64_t &word : d.words)
        pointers.push_back(&word);
    int64_t words = 0;
    for (Type type : resultTypes)
      words += 3 + 2 * cast<RankedTensorType>(type).getRank();
    resultStorage.assign(std::max<int64_t>(words, 1), 0);
    if (!resultTypes.empty())
      pointers.push_back(resultStorage.data());
  }
};

/// Writes each result of a finished call to `dir`/result<i>.npy.
llvm::Error writeResults(const PackedCall &call, ArrayRef<Type> resultTypes,
                         StringRef dir) {
  if (std::error_code ec = sys::fs::create_directories(dir))
    return llvm::createStringError(ec, "cannot create " + dir);
  int64_t word = 0;
  for (auto [index, resultType] : llvm::enumerate(resultTypes)) {
    auto tensorType = cast<RankedTensorType>(resultType);
    int64_t rank = tensorType.getRank();
    const int64_t *d = &call.resultStorage[word];
    word += 3 + 2 * rank;
    loom::NpyArray array;
    array.dtype = *getDType(tensorType.getElementType());
    array.shape.assign(tensorType.getShape().begin(),
                       tensorType.getShape().end());
    int64_t elementBytes = loom::getNpyElementBytes(array.dtype);
    bool bf16 = tensorType.getElementType().isBF16();
    // Bytes of one element in the result's memory (bf16: 2, widened below).
    int64_t memoryBytes = bf16 ? 2 : elementBytes;
    array.data.resize(array.getNumElements() * elementBytes);
    const char *base;
    std::memcpy(&base, &d[1], sizeof(void *));
    base += d[2] * memoryBytes;
    // Copy element by element through the result's strides.
    std::vector<int64_t> position(rank, 0);
    for (int64_t linear = 0, e = array.getNumElements(); linear < e; ++linear) {
      int64_t offset = 0;
      for (int64_t dim = 0; dim < rank; ++dim)
        offset += position[dim] * d[3 + rank + dim];
      if (bf16) {
        uint16_t bits;
        std::memcpy(&bits, base + offset * memoryBytes, 2);
        float value = loom::bf16ToFloat(bits);
        std::memcpy(&array.data[linear * elementBytes], &value, 4);
      } else {
        std::memcpy(&array.data[linear * elementBytes],
                    base + offset * elementBytes, elementBytes);
      }
      for (int64_t dim = rank - 1; dim >= 0; --dim) {
        if (++position[dim] < array.shape[dim])
          break;
        position[dim] = 0;
      }
    }
    SmallString<128> path(dir);
    sys::path::append(path, "result" + Twine(index) + ".npy");
    if (Error error = loom::writeNpy(path, array))
      return error;
  }
  return Error::success();
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::ParseCommandLineOptions(argc, argv, "Loom reference evaluator\n");
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();

  DialectRegistry registry;
  registerAllDialects(registry);
  registerAllExtensions(registry);
  registerAllToLLVMIRTranslations(registry);
  loom::registerAllDialects(registry);
  MLIRContext context(registry);

  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler handler(sourceMgr, &context);
  std::string errorMessage;
  std::unique_ptr<llvm::MemoryBuffer> file =
      openInputFile(inputFile, &errorMessage);
  if (!file) {
    errs() << "error: " << errorMessage << "\n";
    return 1;
  }
  sourceMgr.AddNewSourceBuffer(std::move(file), llvm::SMLoc());
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sourceMgr, &context);
  if (!module)
    return 1;

  if (numRanks < 1) {
    errs() << "error: --ranks must be at least 1, got " << numRanks << "\n";
    return 1;
  }
  // Each rank's entry and arguments: "{rank}" in either is replaced by the
  // rank, and one positional "@FILE" lists the argument files (one per
  // line), so that ranks may run different functions (pipeline stages).
  auto forRank = [](std::string text, int64_t rank) {
    for (size_t at; (at = text.find("{rank}")) != std::string::npos;)
      text.replace(at, 6, std::to_string(rank));
    return text;
  };
  std::vector<std::string> entries(numRanks);
  std::vector<SmallVector<Type>> resultTypes(numRanks);
  std::vector<std::vector<loom::NpyArray>> inputs(numRanks);
  for (int64_t rank = 0; rank < numRanks; ++rank) {
    entries[rank] = forRank(entry, rank);
    // Check the entry's signature before lowering hides it.
    auto func = module->lookupSymbol<func::FuncOp>(entries[rank]);
    if (!func || func.isExternal()) {
      errs() << "error: no function '" << entries[rank] << "' with a body in "
             << inputFile << "\n";
      return 1;
    }
    std::vector<std::string> paths(arrayFiles.begin(), arrayFiles.end());
    if (paths.size() == 1 && StringRef(paths[0]).starts_with("@")) {
      std::string listFile = forRank(paths[0].substr(1), rank);
      auto list = llvm::MemoryBuffer::getFile(listFile);
      if (!list) {
        errs() << "error: cannot read " << listFile << ": "
               << list.getError().message() << "\n";
        return 1;
      }
      paths.clear();
      SmallVector<StringRef> lines;
      (*list)->getBuffer().split(lines, '\n', -1, /*KeepEmpty=*/false);
      for (StringRef line : lines)
        if (!line.trim().empty())
          paths.push_back(line.trim().str());
    }
    FunctionType type = func.getFunctionType();
    if (paths.size() != type.getNumInputs()) {
      errs() << "error: '" << entries[rank] << "' takes "
             << type.getNumInputs() << " arguments, got " << paths.size()
             << " .npy files\n";
      return 1;
    }
    for (auto [index, argType] : llvm::enumerate(type.getInputs())) {
      if (failed(checkTensorType(argType, "argument #" + Twine(index))))
        return 1;
      std::string path = forRank(paths[index], rank);
      Expected<loom::NpyArray> array = loom::readNpy(path);
      if (!array) {
        errs() << "error: " << toString(array.takeError()) << "\n";
        return 1;
      }
      auto tensorType = cast<RankedTensorType>(argType);
      if (ArrayRef<int64_t>(array->shape) != tensorType.getShape() ||
          array->dtype != *getDType(tensorType.getElementType())) {
        errs() << "error: " << path << " holds a "
               << loom::getNpyDescr(array->dtype) << " array of shape (";
        llvm::interleaveComma(array->shape, errs());
        errs() << ") but argument #" << index << " is " << argType << "\n";
        return 1;
      }
      if (tensorType.getElementType().isBF16())
        roundToBf16(*array);
      inputs[rank].push_back(std::move(*array));
    }
    for (auto [index, resultType] : llvm::enumerate(type.getResults()))
      if (failed(checkTensorType(resultType, "result #" + Twine(index))))
        return 1;
    resultTypes[rank].assign(type.getResults().begin(),
                             type.getResults().end());
  }
  // The program's communicators must be the world that will run it.
  WalkResult sizes = module->walk([&](loom::coll::CommWorldOp op) {
    int64_t size = op.getComm().getType().getSize();
    if (!ShapedType::isDynamic(size) && size != numRanks) {
      op.emitOpError("communicator of ")
          << size << " ranks, but loom-run was asked for --ranks="
          << numRanks.getValue();
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  if (sizes.wasInterrupted())
    return 1;

  if (failed(loom::run::lowerCollectivesToSimulation(*module)))
    return 1;

  PassManager pm(&context);
  loom::buildReferencePipeline(pm);
  if (failed(pm.run(*module))) {
    errs() << "error: lowering '" << inputFile << "' failed\n";
    return 1;
  }
  if (dumpLowered)
    module->print(outs());

  if (optLevel > 3) {
    errs() << "error: expected -O0 to -O3, got -O" << optLevel << "\n";
    return 1;
  }
  std::function<llvm::Error(llvm::Module *)> optimize =
      makeOptimizingTransformer(optLevel, /*sizeLevel=*/0,
                                /*targetMachine=*/nullptr);
  ExecutionEngineOptions options;
  options.transformer = optimize;
  options.jitCodeGenOptLevel =
      static_cast<llvm::CodeGenOptLevel>(optLevel.getValue());
  SmallVector<StringRef> libs;
  if (!sharedLibs.empty())
    StringRef(sharedLibs).split(libs, ',');
  options.sharedLibPaths = libs;
  Expected<std::unique_ptr<ExecutionEngine>> engine =
      ExecutionEngine::create(*module, options);
  if (!engine) {
    errs() << "error: JIT compilation failed: " << toString(engine.takeError())
           << "\n";
    return 1;
  }

  (*engine)->registerSymbols(loom::run::getSimulatedWorldSymbols);
  std::vector<void (*)(void **)> functions;
  for (const std::string &name : entries) {
    Expected<void (*)(void **)> function = (*engine)->lookupPacked(name);
    if (!function) {
      errs() << "error: cannot find '" << name
             << "' in the compiled module: " << toString(function.takeError())
             << "\n";
      return 1;
    }
    functions.push_back(*function);
  }
  std::vector<PackedCall> calls;
  calls.reserve(numRanks);
  for (int64_t rank = 0; rank < numRanks; ++rank)
    calls.emplace_back(inputs[rank], resultTypes[rank]);
  loom::run::initSimulatedWorld(numRanks);
  std::vector<std::thread> threads;
  for (int64_t rank = 0; rank < numRanks; ++rank)
    threads.emplace_back([&, rank] {
      loom::run::setSimulatedRank(rank);
      functions[rank](calls[rank].pointers.data());
    });
  for (std::thread &thread : threads)
    thread.join();

  for (int64_t rank = 0; rank < numRanks; ++rank) {
    SmallString<128> dir(outputDir);
    if (numRanks > 1)
      sys::path::append(dir, "rank" + Twine(rank));
    if (Error error = writeResults(calls[rank], resultTypes[rank], dir)) {
      errs() << "error: " << toString(std::move(error)) << "\n";
      return 1;
    }
  }
  return 0;
}

//===- loomc.cpp - compile a model's forward into a trainer executable ----===//
//
//   loomc forward.mlir --target=cpu|cuda --world-size N --zero-stage 0|1|2|3
//         [--optimizer adamw|sgd --lr ...] [--memory-limit-mb M]
//         [--emit=training-step|step|memory-plan|mlir|llvm-mlir|ptx|llvm|obj|exe]
//         [-v] -o trainer
//
// A client of lib/Driver (docs/Driver.md): it parses the flags the driver
// declares, reads the forward, runs the driver's phases to the emit point
// and writes the result, replacing a file atomically and durably. With -v
// the driver prints each phase as loom-opt's --pass-pipeline takes it.
//
//===----------------------------------------------------------------------===//

#include "loom/Driver/Driver.h"
#include "loom/Runtime/DurableFile.h"
#include "loom/Support/CrashGuard.h"
#include "loom/Trainer/Passes.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Support/Timing.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Target/TargetMachine.h"

using namespace mlir;
using namespace llvm;
using namespace loom::driver;

static cl::OptionCategory loomcCategory("loomc options");

static cl::opt<std::string> inputFile(cl::Positional,
                                      cl::desc("<forward.mlir>"), cl::Required,
                                      cl::cat(loomcCategory));
static cl::opt<std::string> outputFile("o", cl::desc("output file"),
                                       cl::Required, cl::cat(loomcCategory));

/// Writes what `fn` prints to `path` ("-": stdout), replacing a file
/// atomically and durably.
static int writeText(StringRef path, Reporter &reporter,
                     llvm::function_ref<void(raw_ostream &)> fn) {
  if (path == "-") {
    fn(outs());
    return 0;
  }
  std::string text;
  raw_string_ostream os(text);
  fn(os);
  std::string error = loom::runtime::writeFileDurably(path.str(), text);
  if (!error.empty()) {
    reporter.error(error);
    return 1;
  }
  return 0;
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
  registerCompileCLOptions(loomcCategory);
  cl::HideUnrelatedOptions(loomcCategory);
  cl::ParseCommandLineOptions(argc, argv, "Loom: forward -> trainer\n");

  Reporter reporter("loomc");
  CompileOptions options = compileOptionsFromCL();
  options.sourceName = sys::path::filename(inputFile).str();
  if (std::string error = options.verify(); !error.empty()) {
    reporter.error(error);
    return 1;
  }
  // The machine is made (and --cpu, --cpu-features checked) before the
  // phases, so a typo fails at once.
  std::string machineError;
  std::unique_ptr<TargetMachine> machine =
      createTargetMachine(options, machineError);
  if (!machine) {
    reporter.error(machineError);
    return 1;
  }

  DialectRegistry registry;
  registerCompileDialects(registry);
  MLIRContext context(registry);
  context.loadAllAvailableDialects();

  std::string error;
  auto file = openInputFile(inputFile, &error);
  if (!file) {
    reporter.error(error);
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
    reporter.error("the parse phase failed (see above)");
    return 1;
  }
  if (!loom::trainer::findStep(*module)) {
    reporter.error(inputFile + " has no function with a train.loss result");
    return 1;
  }

  if (failed(compileToMlir(module, options, reporter)))
    return 1;
  // Up to the lowering, the module as loom-opt prints it (a pipeline's
  // stages nested in it until they are linked), so that the two can be
  // compared.
  if (options.emit <= EmitPoint::Ptx)
    return writeText(outputFile, reporter, [&](raw_ostream &os) {
      if (options.emit == EmitPoint::Ptx)
        return printPtx(*module, os);
      module->print(os);
      os << "\n";
    });

  LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> llvmModule =
      translateToLlvm(*module, llvmContext, reporter);
  if (!llvmModule)
    return 1;
  // The LLVM IR is all that is left to compile: the MLIR module's memory
  // goes back before LLVM's optimisation and code generation.
  module = nullptr;
  setTarget(*llvmModule, *machine);
  if (options.emit == EmitPoint::Llvm)
    return writeText(outputFile, reporter,
                     [&](raw_ostream &os) { llvmModule->print(os, nullptr); });
  if (options.emit == EmitPoint::Obj)
    return failed(
        emitObject(*llvmModule, *machine, options, outputFile, reporter));
  return failed(
      buildTrainer(*llvmModule, *machine, options, outputFile, reporter));
}

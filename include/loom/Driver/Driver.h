//===- Driver.h - the phases from a forward to a trainer --------*- C++ -*-===//
//
// What loomc does between parsing its flags and writing its output, for any
// client: the phases (lib/Pipelines) run in turn on a forward up to an emit
// point, a pipeline's stages each compiled as a module of its own; the LLVM
// IR of the lowered modules, linked into one; the object for the chosen
// CPU; the trainer executable.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_DRIVER_DRIVER_H
#define LOOM_DRIVER_DRIVER_H

#include "loom/Driver/CompileOptions.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/raw_ostream.h"
#include <memory>

namespace llvm {
class LLVMContext;
class Module;
class TargetMachine;
} // namespace llvm

namespace loom::driver {

/// Where the driver's own messages go (the phases report through the
/// context's diagnostics): "<tool>: error: ..." and "<tool>: remark: ...".
class Reporter {
public:
  explicit Reporter(llvm::StringRef tool, llvm::raw_ostream &os = llvm::errs())
      : tool(tool.str()), os(os) {}
  void error(const llvm::Twine &message);
  void remark(const llvm::Twine &message);
  llvm::raw_ostream &stream() { return os; }
  llvm::StringRef getTool() const { return tool; }

private:
  std::string tool;
  llvm::raw_ostream &os;
};

/// Adds to `registry` every dialect, extension and LLVM IR translation the
/// phases use: what a client's context needs for compileToMlir and
/// translateToLlvm.
void registerCompileDialects(mlir::DialectRegistry &registry);

/// Registers MLIR's and Loom's passes and pipelines for textual pipelines
/// (train-footprint's lowering is one), once per process; compileToMlir
/// calls it. A client that registers them itself (loom-opt) does not call
/// the driver.
void registerCompilePasses();

/// What the memory-plan phase planned for one stage (the whole step
/// without pipeline stages).
struct StagePlan {
  int64_t stage = 0;
  /// The memory timeline's peak: what the trainer allocates for the step.
  int64_t peakBytes = 0;
  /// The arena's size and the most of it live at once (0 without a plan).
  int64_t arenaBytes = 0, arenaBoundBytes = 0;
};

/// Runs the phases on `module`, a forward with a train.loss result, in
/// place (options that do not hold, CompileOptions::verify, are reported
/// first), up to `options.emit` (through lowering for the points past it).
/// A pipeline's stages become nested modules @stage<s> (pp-split-stages),
/// each compiled on its own, and after lowering are linked into the module
/// again (pp-link-stages). With -v prints each phase's pipeline as loom-opt
/// takes it.
/// Past the memory-plan phase, `plans` (when given) receives each stage's
/// plan.
mlir::LogicalResult
compileToMlir(mlir::OwningOpRef<mlir::ModuleOp> &module,
              const CompileOptions &options, Reporter &reporter,
              llvm::SmallVectorImpl<StagePlan> *plans = nullptr);

/// The LLVM IR of the lowered (and linked) `module`. Null on failure,
/// reported.
std::unique_ptr<llvm::Module> translateToLlvm(mlir::ModuleOp module,
                                              llvm::LLVMContext &context,
                                              Reporter &reporter);

/// The machine the step is compiled for: --cpu's name and features (the
/// host's real ones for `native`), then --cpu-features. Null, with `error`
/// set, for an unknown CPU or feature.
std::unique_ptr<llvm::TargetMachine>
createTargetMachine(const CompileOptions &options, std::string &error);

/// Gives `module` the machine's triple and data layout, and the features
/// the trainer checks at start (loom_cpu_features).
void setTarget(llvm::Module &module, llvm::TargetMachine &machine);

/// Optimises `module` at -O and writes its object to `path`, durably.
mlir::LogicalResult emitObject(llvm::Module &module,
                               llvm::TargetMachine &machine,
                               const CompileOptions &options,
                               llvm::StringRef path, Reporter &reporter);

/// The trainer executable at `path`: the optimised `module`'s objects (a CPU
/// trainer's functions compiled in partitions on the machine's threads,
/// which leaves `module` without bodies) linked with the runtime and the
/// trainer main, installed atomically and durably (a file with other hard
/// links is rewritten in place once the link succeeded).
mlir::LogicalResult buildTrainer(llvm::Module &module,
                                 llvm::TargetMachine &machine,
                                 const CompileOptions &options,
                                 llvm::StringRef path, Reporter &reporter);

/// The PTX of every kernel module of `module`, each after a
/// `// loom-module NAME` line.
void printPtx(mlir::ModuleOp module, llvm::raw_ostream &os);

} // namespace loom::driver

#endif // LOOM_DRIVER_DRIVER_H

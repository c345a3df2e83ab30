//===- EntryPoint.h - the trainer-facing entry of a compiled step -*- C++ -*-===//
//
// A compiled step exports two symbols the trainer main uses:
//
//   void loom_step_packed(void **buffers);
//     buffers[i] is the data pointer of the step's i-th argument, then of
//     its i-th result (row-major, dense, the manifest's local shapes). The
//     step reads the arguments and writes every result into its buffer; a
//     result the manifest marks `in-place` is written into the buffer of
//     the argument it updates instead (its own pointer is not used).
//   const char loom_step_manifest[];
//     the line format of StepSignature::manifest().
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TOOLS_LOOMC_ENTRYPOINT_H
#define LOOM_TOOLS_LOOMC_ENTRYPOINT_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include <map>
#include <string>

namespace loom {

constexpr const char *kEntryName = "loom_step";
constexpr const char *kPackedEntryName = "loom_step_packed";
constexpr const char *kManifestName = "loom_step_manifest";

struct StepTensor {
  bool isArgument;
  /// param, state, input or loss.
  std::string role, name, dtype;
  /// On each rank, and unpartitioned (they differ for ZeRO shards).
  llvm::SmallVector<int64_t> localShape, fullShape;
  /// A result written into its argument's buffer (loom-update-in-place).
  bool inPlace = false;

  /// Bytes of the local tensor.
  int64_t bytes() const {
    int64_t count = 1;
    for (int64_t d : localShape)
      count *= d;
    return count * (dtype == "f64" || dtype == "i64" ? 8 : dtype == "bf16" ? 2 : 4);
  }
};

struct StepSignature {
  /// world_size, zero_stage, optimizer settings, predicted peak...
  std::map<std::string, std::string> properties;
  std::vector<StepTensor> tensors;

  /// "loom-step 1", then one "key value" line per property, then one line
  /// per tensor: "arg|result ROLE NAME DTYPE LOCAL FULL", shapes as
  /// "4x32" ("-" for a scalar), then " in-place" for a result written into
  /// its argument's buffer.
  std::string manifest() const;
};

/// Describes the step from its unpartitioned form `full` and the form each
/// rank runs, `local` (same arity). Fails with a diagnostic on untagged or
/// dynamic arguments and results.
mlir::FailureOr<StepSignature> describeStep(mlir::func::FuncOp full,
                                            mlir::func::FuncOp local);

/// Adds @loom_step(memref args..., memref results...) calling `step` and
/// writing its results into the result buffers, or (`loom.tied_results`)
/// into the buffers of the arguments they update; `step` becomes private.
mlir::LogicalResult buildEntryFunction(mlir::ModuleOp module,
                                       mlir::func::FuncOp step);

/// On the lowered (LLVM dialect) module: adds loom_step_packed and the
/// manifest global. `buffers` are @loom_step's memref types, in order.
mlir::LogicalResult buildPackedEntry(mlir::ModuleOp module,
                                     llvm::ArrayRef<mlir::MemRefType> buffers,
                                     llvm::StringRef manifest);

} // namespace loom

#endif // LOOM_TOOLS_LOOMC_ENTRYPOINT_H

//===- TrainDialect.h - train dialect ---------------------------*- C++ -*-===//

#ifndef LOOM_DIALECT_TRAIN_TRAINDIALECT_H
#define LOOM_DIALECT_TRAIN_TRAINDIALECT_H

#include "mlir/IR/Dialect.h"
#include "mlir/Support/LLVM.h"

#include "loom/Dialect/Train/TrainOpsDialect.h.inc"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include <optional>
#include <string>
#include <utility>

namespace loom::train {

/// The index of the result tagged `train.loss`, if `func` has one: the
/// functions the training passes transform.
std::optional<unsigned> getLossResultIndex(mlir::FunctionOpInterface func);

/// The (role, name) of a parameter or optimizer-state argument or result
/// (its `train.param` or `train.state` attribute), or empty: an update's
/// result and the argument it updates share it.
std::pair<llvm::StringRef, llvm::StringRef>
getParamOrStateKey(mlir::DictionaryAttr attrs);

/// The one function of `module` with a `train.loss` result. Otherwise emits
/// "<pass>: expected one <what> (a function with a train.loss result),
/// found @a and @b", or "... expected a <what> ..., found none", and fails.
mlir::FailureOr<mlir::FunctionOpInterface>
findLossFunction(mlir::Operation *module, llvm::StringRef pass,
                 llvm::StringRef what);

/// The group a `train.param` name belongs to: the name up to and including
/// its first all-digit component ("layers.3.attn.wq" -> "layers.3", one
/// transformer block), or "" for a name without one. FSDP's wrapping unit
/// (coll-reorder-baseline) and train-remat's layer.
std::string getParamGroup(llvm::StringRef name);

/// Makes train.call_kernel bufferizable (one-shot bufferisation): called
/// when the dialect loads.
void attachCallKernelBufferization(mlir::MLIRContext &context);

/// An f64 parameter of the target attributes, read and written as a float
/// literal without its type, so it reads back to the same bits.
mlir::FailureOr<mlir::FloatAttr> parseF64Parameter(mlir::AsmParser &parser);
void printF64Parameter(mlir::AsmPrinter &printer, mlir::FloatAttr value);

} // namespace loom::train

#endif // LOOM_DIALECT_TRAIN_TRAINDIALECT_H

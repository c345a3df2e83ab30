//===- GemmMatch.h - what convert-linalg-to-blas takes ----------*- C++ -*-===//
//
// Shared by convert-linalg-to-blas and the passes that must leave its
// contractions alone (codegen-widen-compute: BLAS accumulates bf16 in f32).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_CODEGEN_UTILS_GEMMMATCH_H
#define LOOM_CODEGEN_UTILS_GEMMMATCH_H

#include "mlir/Dialect/Linalg/IR/Linalg.h"

#include <optional>

namespace loom::codegen {

/// If `op` has two inputs and one init and its body is `out + a * b` or
/// `out + (a * b) * s` for a constant s (attention's scale), in any operand
/// order, a and b possibly extended (arith.extf: bf16 products accumulated
/// in f32): alpha (1 or s). On tensors or buffers.
std::optional<double> mulAddAlpha(mlir::linalg::LinalgOp op);

} // namespace loom::codegen

#endif // LOOM_CODEGEN_UTILS_GEMMMATCH_H

//===- LinalgBodies.h - what a linalg body computes -------------*- C++ -*-===//

#ifndef LOOM_UTILS_LINALGBODIES_H
#define LOOM_UTILS_LINALGBODIES_H

#include "mlir/Dialect/Linalg/IR/Linalg.h"

namespace loom {

/// For a generic whose (first) body result is `out + t`, with `out` the
/// block argument of its first init used there alone: `t`, the term it
/// accumulates (the additive form of a reduction, which train-autodiff
/// differentiates and train-microbatch splits). Null otherwise.
mlir::Value getAccumulatedTerm(mlir::linalg::GenericOp generic);

} // namespace loom

#endif // LOOM_UTILS_LINALGBODIES_H

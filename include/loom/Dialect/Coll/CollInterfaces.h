//===- CollInterfaces.h - coll op interfaces --------------------*- C++ -*-===//

#ifndef LOOM_DIALECT_COLL_COLLINTERFACES_H
#define LOOM_DIALECT_COLL_COLLINTERFACES_H

#include "loom/Dialect/Coll/CollEnums.h"
#include "loom/Dialect/Coll/CollTypes.h"
#include "mlir/IR/OpDefinition.h"

namespace loom::coll {

/// What one rank moves for a collective under NCCL's ring algorithms. For a
/// broadcast the figures are those of the busiest (middle) rank of the chain.
struct CollectiveTraffic {
  /// Bytes this rank sends.
  int64_t sentBytes = 0;
  /// Bytes this rank receives.
  int64_t receivedBytes = 0;
  /// Sequential ring steps; each pays the link latency once (alpha in the
  /// alpha-beta model).
  int64_t steps = 0;
};

/// Returns the bytes a tensor of `type` occupies, if its shape is static and
/// its elements are integers or floats (sub-byte element types round up).
std::optional<int64_t> getStaticSizeInBytes(mlir::RankedTensorType type);

namespace detail {
/// Verifies what every collective shares: its future is waited exactly once,
/// by a `coll.wait` in the start's block.
mlir::LogicalResult verifyCollectiveOp(mlir::Operation *op);
} // namespace detail

} // namespace loom::coll

#include "loom/Dialect/Coll/CollInterfaces.h.inc"

#endif // LOOM_DIALECT_COLL_COLLINTERFACES_H

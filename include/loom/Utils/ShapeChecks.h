//===- ShapeChecks.h - static shapes and their sizes ------------*- C++ -*-===//
//
// Loom plans memory and shards tensors from their static shapes. The passes
// that rely on static shapes check them at their entry with these helpers,
// so that a dynamic dimension, or a tensor whose size does not fit in 64
// bits, is a diagnostic instead of a crash or a zero-sized shard.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_UTILS_SHAPECHECKS_H
#define LOOM_UTILS_SHAPECHECKS_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Operation.h"

#include <optional>

namespace loom {

/// The element count of a static shape, or nullopt when a dimension is
/// dynamic or negative or the count overflows int64.
std::optional<int64_t> getStaticElementCount(llvm::ArrayRef<int64_t> shape);

/// The bytes of a static shaped type of integers or floats (sub-byte
/// elements rounded up), or nullopt when its shape is dynamic, its element
/// type has no bit width, or the size overflows int64.
std::optional<int64_t> getStaticSizeInBytes(mlir::ShapedType type);

/// Checks that every tensor and memref value `root` defines or receives
/// (block arguments and op results, nested regions included) has a static
/// shape whose bytes fit in int64. Emits at the first that does not:
/// "<pass>: expected static shapes that fit in 64 bits, got 'tensor<?xf32>'".
/// Then checkReshapes.
mlir::LogicalResult checkStaticShapes(mlir::Operation *root,
                                      llvm::StringRef pass);

/// Checks what MLIR's verifiers let through and bufferization would turn
/// into invalid IR: a tensor.expand_shape whose static output_shape
/// disagrees with its result type. Emits "<pass>: output_shape[0] is 3 but
/// the result type 'tensor<4x8xf32>' says 4".
mlir::LogicalResult checkReshapes(mlir::Operation *root, llvm::StringRef pass);

} // namespace loom

#endif // LOOM_UTILS_SHAPECHECKS_H

//===- ShapeChecks.cpp - static shapes and their sizes --------------------===//

#include "loom/Utils/ShapeChecks.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;

std::optional<int64_t> loom::getStaticElementCount(ArrayRef<int64_t> shape) {
  int64_t count = 1;
  for (int64_t dim : shape)
    if (dim < 0 || llvm::MulOverflow(count, dim, count))
      return std::nullopt;
  return count;
}

std::optional<int64_t> loom::getStaticSizeInBytes(ShapedType type) {
  if (!type.hasRank() || !type.getElementType().isIntOrFloat())
    return std::nullopt;
  std::optional<int64_t> count = getStaticElementCount(type.getShape());
  int64_t bits;
  if (!count || llvm::MulOverflow(*count,
                                  int64_t(type.getElementTypeBitWidth()), bits))
    return std::nullopt;
  return llvm::divideCeil(bits, 8);
}

/// A shaped type Loom cannot plan: dynamic, or too large for int64 bytes.
static bool isUnplannable(Type type) {
  auto shaped = dyn_cast<ShapedType>(type);
  if (!shaped || !isa<TensorType, BaseMemRefType>(type))
    return false;
  if (!shaped.hasRank())
    return true;
  if (!loom::getStaticElementCount(shaped.getShape()))
    return true;
  // Elements without a bit width (index) are counted by the element.
  return shaped.getElementType().isIntOrFloat() &&
         !loom::getStaticSizeInBytes(shaped);
}

LogicalResult loom::checkStaticShapes(Operation *root, StringRef pass) {
  auto report = [&](Location loc, Type type) {
    return emitError(loc) << pass
                          << ": expected static shapes that fit in 64 bits, "
                             "got "
                          << type;
  };
  WalkResult result = root->walk([&](Operation *op) {
    for (Region &region : op->getRegions())
      for (Block &block : region)
        for (BlockArgument arg : block.getArguments())
          if (isUnplannable(arg.getType())) {
            (void)report(arg.getLoc(), arg.getType());
            return WalkResult::interrupt();
          }
    for (Value value : op->getResults())
      if (isUnplannable(value.getType())) {
        (void)report(op->getLoc(), value.getType());
        return WalkResult::interrupt();
      }
    return WalkResult::advance();
  });
  return failure(result.wasInterrupted() || failed(checkReshapes(root, pass)));
}

LogicalResult loom::checkReshapes(Operation *root, StringRef pass) {
  // MLIR's tensor.expand_shape verifier lets a static output_shape disagree
  // with the result type; memref.expand_shape's does not, so bufferizing
  // such an op makes invalid IR.
  WalkResult result = root->walk([&](tensor::ExpandShapeOp expand) {
    ArrayRef<int64_t> shape = expand.getResultType().getShape();
    for (auto [dim, size] : llvm::enumerate(expand.getStaticOutputShape()))
      if (!ShapedType::isDynamic(size) && size != shape[dim]) {
        expand.emitOpError()
            << pass << ": output_shape[" << dim << "] is " << size
            << " but the result type " << expand.getResultType() << " says "
            << shape[dim];
        return WalkResult::interrupt();
      }
    return WalkResult::advance();
  });
  return failure(result.wasInterrupted());
}

//===- GemmMatch.cpp - what convert-linalg-to-blas takes ------------------===//

#include "loom/Codegen/Utils/GemmMatch.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Matchers.h"

using namespace mlir;

std::optional<double> loom::codegen::mulAddAlpha(linalg::LinalgOp op) {
  if (op.getNumDpsInputs() != 2 || op.getNumDpsInits() != 1)
    return std::nullopt;
  Block *body = op.getBlock();
  auto yield = cast<linalg::YieldOp>(body->getTerminator());
  auto add = yield.getValues()[0].getDefiningOp<arith::AddFOp>();
  if (!add || add->getBlock() != body)
    return std::nullopt;
  Value out = body->getArgument(2);
  if ((add.getLhs() == out) == (add.getRhs() == out))
    return std::nullopt;
  Value product = add.getLhs() == out ? add.getRhs() : add.getLhs();
  Value a = body->getArgument(0), b = body->getArgument(1);
  // A named op that accumulates bf16 products into f32 extends its
  // operands first (arith.extf in the body).
  auto operand = [&](Value v) {
    auto ext = v.getDefiningOp<arith::ExtFOp>();
    return ext && ext->getBlock() == body ? ext.getIn() : v;
  };
  auto isProduct = [&](Value v) {
    auto mul = v.getDefiningOp<arith::MulFOp>();
    return mul && ((operand(mul.getLhs()) == a && operand(mul.getRhs()) == b) ||
                   (operand(mul.getLhs()) == b && operand(mul.getRhs()) == a));
  };
  // mul, add and yield (and the scaling mul), besides the casts.
  size_t ops =
      body->getOperations().size() - llvm::count_if(*body, [](Operation &op) {
        return isa<arith::ExtFOp>(op);
      });
  if (isProduct(product))
    return ops == 3 ? std::optional<double>(1.0) : std::nullopt;
  auto scaled = product.getDefiningOp<arith::MulFOp>();
  if (!scaled || ops != 4)
    return std::nullopt;
  Value inner = isProduct(scaled.getLhs()) ? scaled.getLhs() : scaled.getRhs();
  Value scale = inner == scaled.getLhs() ? scaled.getRhs() : scaled.getLhs();
  FloatAttr value;
  if (!isProduct(inner) || !matchPattern(scale, m_Constant(&value)))
    return std::nullopt;
  return value.getValueAsDouble();
}

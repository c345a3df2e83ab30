//===- ShareIndexGenerics.cpp - equal tables of indices computed once -----===//
//
// A generic with no inputs and an empty init is a function of its indices
// (a constant table); equivalent ones are computed once.
//
//===----------------------------------------------------------------------===//

#include "loom/Codegen/Common/Passes.h"
#include "loom/Dialect/Coll/CollInterfaces.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/OperationSupport.h"

namespace loom::codegen {
#define GEN_PASS_DEF_CODEGENSHAREINDEXGENERICSPASS
#include "loom/Codegen/Common/Passes.h.inc"
} // namespace loom::codegen

using namespace mlir;

namespace {

/// Whether `op` computes a table of at most `maxBytes` from its indices
/// alone: no inputs, one static empty init.
bool isIndexTable(linalg::GenericOp op, int64_t maxBytes) {
  if (!op.hasPureTensorSemantics() || op.getNumDpsInputs() != 0 ||
      op.getNumDpsInits() != 1 ||
      !op.getDpsInits()[0].getDefiningOp<tensor::EmptyOp>())
    return false;
  std::optional<int64_t> bytes = loom::coll::getStaticSizeInBytes(
      cast<RankedTensorType>(op.getResult(0).getType()));
  return bytes && *bytes <= maxBytes;
}

/// Whether `a` and `b` compute the same table: the same attributes and
/// body, reading the same values from above.
bool sameTable(linalg::GenericOp a, linalg::GenericOp b) {
  if (a.getResult(0).getType() != b.getResult(0).getType())
    return false;
  DenseMap<Value, Value> equivalent;
  auto check = [&](Value lhs, Value rhs) -> LogicalResult {
    if (lhs == rhs || equivalent.lookup(lhs) == rhs)
      return success();
    // The inits: empty tensors of the same type.
    return success(lhs.getDefiningOp<tensor::EmptyOp>() &&
                   rhs.getDefiningOp<tensor::EmptyOp>() &&
                   lhs.getType() == rhs.getType());
  };
  auto mark = [&](Value lhs, Value rhs) { equivalent[lhs] = rhs; };
  return OperationEquivalence::isEquivalentTo(
      a, b, check, mark, OperationEquivalence::IgnoreLocations);
}

struct CodegenShareIndexGenericsPass
    : loom::codegen::impl::CodegenShareIndexGenericsPassBase<
          CodegenShareIndexGenericsPass> {
  using Base::Base;

  void runOnOperation() override {
    IRRewriter rewriter(&getContext());
    getOperation().walk([&](Block *block) {
      SmallVector<linalg::GenericOp> kept;
      for (auto op :
           llvm::make_early_inc_range(block->getOps<linalg::GenericOp>())) {
        if (!isIndexTable(op, maxBytes))
          continue;
        auto first = llvm::find_if(
            kept, [&](linalg::GenericOp k) { return sameTable(k, op); });
        if (first == kept.end()) {
          kept.push_back(op);
          continue;
        }
        rewriter.replaceOp(op, (*first)->getResults());
        ++numShared;
      }
    });
  }
};

} // namespace

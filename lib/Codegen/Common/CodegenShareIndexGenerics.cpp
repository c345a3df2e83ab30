//===- ShareIndexGenerics.cpp - equal tables of indices computed once -----===//
//
// A generic with no inputs and an empty init is a function of its indices
// (a constant table); equivalent ones are computed once.
//
//===----------------------------------------------------------------------===//

#include "loom/Analysis/MemoryTimeline.h"
#include "loom/Codegen/Common/Passes.h"
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
        if (!loom::isIndexTable(op, maxBytes))
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

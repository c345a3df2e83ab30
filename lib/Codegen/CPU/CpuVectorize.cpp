//===- LinalgVectorize.cpp - linalg on buffers to vector loops ------------===//
//
// Each linalg op left after convert-linalg-to-blas (elementwise ops,
// reductions, batched contractions, fills, copies) is tiled so that one
// loop dimension becomes a vector of up to `vector-bytes` and every other
// dimension a scalar loop, then vectorised with linalg::vectorize. The
// vector dimension is one every operand reads contiguously or not at all
// (a broadcast, or the reduced dimension of the output), so each access is
// a plain vector load or store. The unit dimensions are then folded away
// and multi-reductions become ordered vector reductions: the vector code
// adds in the same order as the scalar loops and gives the same bits.
//
//===----------------------------------------------------------------------===//

#include "loom/Codegen/CPU/Passes.h"
#include "loom/Support/AttrNames.h"
#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Dialect/Vector/Transforms/LoweringPatterns.h"
#include "mlir/Dialect/Vector/Transforms/VectorRewritePatterns.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/ADT/bit.h"

namespace loom::codegen {
#define GEN_PASS_DEF_CPUVECTORIZEPASS
#include "loom/Codegen/CPU/Passes.h.inc"
} // namespace loom::codegen

using namespace mlir;
namespace attrs = loom::attrs;

namespace {

/// True if `value` is a memref whose innermost stride is statically 1.
bool hasUnitInnerStride(Value value) {
  auto type = dyn_cast<MemRefType>(value.getType());
  if (!type || !type.hasStaticShape())
    return false;
  if (type.getRank() == 0)
    return true;
  SmallVector<int64_t> strides;
  int64_t offset;
  if (failed(type.getStridesAndOffset(strides, offset)))
    return false;
  return strides.back() == 1;
}

/// The loop dimension to vectorise: the innermost one that every operand
/// reads as its contiguous last dimension or does not read at all, with at
/// least `minLanes` iterations. Scalar (rank-0) operands are broadcasts.
std::optional<unsigned> vectorDim(linalg::LinalgOp op, int64_t minLanes) {
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  for (unsigned d = ranges.size(); d-- > 0;) {
    if (ShapedType::isDynamic(ranges[d]) || ranges[d] < minLanes)
      continue;
    bool ok = true;
    for (OpOperand &operand : op->getOpOperands()) {
      if (!isa<ShapedType>(operand.get().getType()))
        continue; // a scalar: broadcast
      if (!isa<MemRefType>(operand.get().getType())) {
        ok = false;
        break;
      }
      AffineMap map = op.getMatchingIndexingMap(&operand);
      bool reads = map.isFunctionOfDim(d);
      if (!reads)
        continue;
      auto last = dyn_cast<AffineDimExpr>(map.getResults().back());
      if (!last || last.getPosition() != d ||
          !hasUnitInnerStride(operand.get())) {
        ok = false;
        break;
      }
      for (AffineExpr expr : map.getResults().drop_back())
        ok &= !expr.isFunctionOfDim(d);
    }
    if (ok)
      return d;
  }
  return std::nullopt;
}

/// Lanes for `op`'s widest element type in `vectorBytes`, or 0 when an
/// operand's elements are not integers or floats (index, complex).
int64_t lanesFor(linalg::LinalgOp op, int64_t vectorBytes) {
  int64_t widest = 1;
  for (Value operand : op->getOperands())
    if (auto type = dyn_cast<ShapedType>(operand.getType())) {
      if (!type.getElementType().isIntOrFloat())
        return 0;
      widest = std::max<int64_t>(
          widest, llvm::divideCeil(type.getElementTypeBitWidth(), 8));
    }
  return std::max<int64_t>(1, vectorBytes / widest);
}

/// Whether making `dim` the innermost loop keeps every output element's
/// reduction order: true unless `dim` is a reduction followed by another.
bool interchangeKeepsOrder(linalg::LinalgOp op, unsigned dim) {
  SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
  if (iterators[dim] != utils::IteratorType::reduction)
    return true;
  return llvm::none_of(llvm::drop_begin(iterators, dim + 1),
                       [](utils::IteratorType t) {
                         return t == utils::IteratorType::reduction;
                       });
}

struct CpuVectorizePass
    : loom::codegen::impl::CpuVectorizePassBase<CpuVectorizePass> {
  using Base::Base;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    SmallVector<linalg::LinalgOp> ops;
    func.walk([&](linalg::LinalgOp op) {
      if (op.hasPureBufferSemantics())
        ops.push_back(op);
    });
    IRRewriter rewriter(&getContext());
    int64_t vectorized = 0;
    for (linalg::LinalgOp op : ops) {
      int64_t lanes = lanesFor(op, vectorBytes);
      if (lanes == 0)
        continue;
      std::optional<unsigned> dim = vectorDim(op, minLanes);
      // Moving a reduction dimension past another would change the order
      // of the additions (and the bits).
      if (!dim || !interchangeKeepsOrder(op, *dim) ||
          !linalg::hasVectorizationImpl(op) ||
          failed(linalg::vectorizeOpPrecondition(op)))
        continue;
      SmallVector<int64_t> ranges = op.getStaticLoopRanges();
      // The largest power of two up to `lanes` that divides the range, or
      // the whole range when it fits.
      int64_t width = ranges[*dim];
      if (width > lanes) {
        width = int64_t(llvm::bit_floor(uint64_t(lanes)));
        while (ranges[*dim] % width)
          width /= 2;
      }
      if (width < minLanes)
        continue;
      // Make the vector dimension the innermost loop, so that the vector is
      // the minor dimension of every transfer.
      if (*dim != ranges.size() - 1) {
        rewriter.setInsertionPoint(op);
        auto generic = dyn_cast<linalg::GenericOp>(op.getOperation());
        if (!generic) {
          FailureOr<linalg::GenericOp> general =
              linalg::generalizeNamedOp(rewriter, op);
          if (failed(general))
            continue;
          generic = *general;
        }
        SmallVector<unsigned> order;
        for (unsigned d = 0; d < ranges.size(); ++d)
          if (d != *dim)
            order.push_back(d);
        order.push_back(*dim);
        FailureOr<linalg::GenericOp> interchanged =
            linalg::interchangeGenericOp(rewriter, generic, order);
        if (failed(interchanged))
          continue;
        op = *interchanged;
        ranges = op.getStaticLoopRanges();
        dim = ranges.size() - 1;
      }
      // Tile size 0 keeps a dimension whole: the vector one when it fits,
      // and every dimension of extent 1.
      SmallVector<int64_t> tiles;
      for (auto [d, range] : llvm::enumerate(ranges))
        tiles.push_back(d == *dim ? (width == range ? 0 : width)
                                  : (range == 1 ? 0 : 1));
      linalg::LinalgOp tiled = op;
      if (llvm::any_of(tiles, [](int64_t t) { return t != 0; })) {
        rewriter.setInsertionPoint(op);
        linalg::LinalgTilingOptions options;
        options.setTileSizes(tiles).setLoopType(
            linalg::LinalgTilingLoopType::Loops);
        FailureOr<linalg::TiledLinalgOp> result =
            linalg::tileLinalgOp(rewriter, op, options);
        if (failed(result))
          continue;
        rewriter.eraseOp(op);
        tiled = result->op;
      }
      rewriter.setInsertionPoint(tiled);
      if (succeeded(linalg::vectorize(rewriter, tiled))) {
        rewriter.eraseOp(tiled);
        ++vectorized;
      }
    }
    Builder builder(&getContext());
    func->setAttr(attrs::kVectorizedOps, builder.getI64IntegerAttr(vectorized));
    func->setAttr(attrs::kScalarOps,
                  builder.getI64IntegerAttr(int64_t(ops.size()) - vectorized));
    numVectorized += vectorized;
    numScalar += int64_t(ops.size()) - vectorized;
    if (vectorized == 0)
      return;

    // Fold the unit dimensions (a reduction over one becomes elementwise),
    // then lower what the vectorizer made to 1-D loads, stores, arithmetic
    // and ordered reductions.
    MLIRContext *context = &getContext();
    RewritePatternSet folding(context);
    vector::populateCastAwayVectorLeadingOneDimPatterns(folding);
    vector::populateVectorTransferDropUnitDimsPatterns(folding);
    vector::populateDropUnitDimWithShapeCastPatterns(folding);
    vector::MultiDimReductionOp::getCanonicalizationPatterns(folding, context);
    vector::TransferReadOp::getCanonicalizationPatterns(folding, context);
    vector::TransferWriteOp::getCanonicalizationPatterns(folding, context);
    vector::ShapeCastOp::getCanonicalizationPatterns(folding, context);
    vector::BroadcastOp::getCanonicalizationPatterns(folding, context);
    memref::SubViewOp::getCanonicalizationPatterns(folding, context);
    if (failed(applyPatternsGreedily(func, std::move(folding))))
      return signalPassFailure();
    RewritePatternSet lowering(context);
    vector::populateVectorTransferPermutationMapLoweringPatterns(lowering);
    vector::populateVectorMultiReductionLoweringPatterns(
        lowering, vector::VectorMultiReductionLowering::InnerReduction);
    vector::populateVectorBroadcastLoweringPatterns(lowering);
    vector::populateVectorShapeCastLoweringPatterns(lowering);
    vector::populateVectorTransferLoweringPatterns(lowering,
                                                   /*maxTransferRank=*/1);
    if (failed(applyPatternsGreedily(func, std::move(lowering))))
      signalPassFailure();
  }
};

} // namespace

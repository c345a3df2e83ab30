//===- SplitReduction.cpp - column reductions as partials, then a combine -===//
//
// A GPU thread per output is coalesced for a column sum only when there are
// enough outputs to fill the GPU; a norm's weight gradient has 768. Its
// longest reduction dimension is split so that the outer part becomes a
// parallel dimension of partials, which are then folded into the output.
// docs/SplitReduction.md has the rationale.
//
//===----------------------------------------------------------------------===//

#include "loom/Codegen/GPU/Passes.h"
#include "loom/Codegen/Utils/GemmMatch.h"
#include "loom/Codegen/Utils/ReductionMatch.h"
#include "loom/Utils/LinalgBuilder.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Utils/Utils.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"

namespace loom::codegen {
#define GEN_PASS_DEF_GPUSPLITREDUCTIONPASS
#include "loom/Codegen/GPU/Passes.h.inc"
} // namespace loom::codegen

using namespace mlir;

namespace {

/// Loop `dim`, of size `parts x rows`, becomes a parallel loop over `parts`
/// partials and a reduction loop over the `rows` each folds; `combiner`
/// folds the partials into the output.
struct Split {
  unsigned dim;
  int64_t parts, rows;
  Operation *combiner;
};

/// Where and how to split `op` (see the pass description), if at all.
std::optional<Split> planSplit(linalg::GenericOp op, int64_t minRowsEach,
                               int64_t maxOutputs, int64_t minRows) {
  Operation *combiner = loom::codegen::regroupableCombiner(op);
  if (minRowsEach <= 0 || !op.hasPureTensorSemantics() ||
      op.getNumResults() != 1 || !combiner ||
      !op.getBlock()->getOps<linalg::IndexOp>().empty() ||
      loom::codegen::mulAddAlpha(op) ||
      !isa<FloatType>(getElementTypeOrSelf(op.getResult(0).getType())))
    return std::nullopt;
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  if (llvm::any_of(ranges, ShapedType::isDynamic) ||
      !llvm::all_of(op.getIndexingMapsArray(),
                    [](AffineMap map) { return map.isProjectedPermutation(); }))
    return std::nullopt;
  SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
  int64_t outputs = 1, length = 1;
  std::optional<unsigned> longest;
  for (auto [dim, iterator] : llvm::enumerate(iterators)) {
    if (linalg::isParallelIterator(iterator)) {
      outputs *= ranges[dim];
      continue;
    }
    length *= ranges[dim];
    if (!longest || ranges[dim] > ranges[*longest])
      longest = dim;
  }
  if (outputs > maxOutputs || length < minRows || outputs == 0 || length == 0)
    return std::nullopt;
  // A column reduction: every input that reads rows and columns reads a
  // column innermost (row reductions get a coalesced block per row).
  bool columns = false;
  for (OpOperand *input : op.getDpsInputOperands()) {
    AffineMap map = op.getMatchingIndexingMap(input);
    bool readsReduction = false, readsParallel = false;
    for (AffineExpr e : map.getResults()) {
      bool parallel = linalg::isParallelIterator(
          iterators[cast<AffineDimExpr>(e).getPosition()]);
      readsParallel |= parallel;
      readsReduction |= !parallel;
    }
    if (!readsReduction || !readsParallel)
      continue;
    if (!linalg::isParallelIterator(
            iterators[cast<AffineDimExpr>(map.getResults().back())
                          .getPosition()]))
      return std::nullopt;
    columns = true;
  }
  if (!columns)
    return std::nullopt;
  // The fewest rows along the split dimension that still make each partial
  // fold `minRowsEach` elements, rounded up to a divisor of its size.
  int64_t size = ranges[*longest];
  int64_t others = length / size;
  int64_t rows = std::max<int64_t>(1, (minRowsEach + others - 1) / others);
  while (rows < size && size % rows)
    ++rows;
  if (rows >= size)
    return std::nullopt;
  return Split{*longest, size / rows, rows, combiner};
}

/// `op` as partials over `split`, then their combination into its init.
void splitReduction(IRRewriter &rewriter, linalg::GenericOp op,
                    const Split &split) {
  MLIRContext *ctx = op.getContext();
  Location loc = op.getLoc();
  rewriter.setInsertionPoint(op);
  loom::LinalgBuilder lb(rewriter, loc);
  Operation *combiner = split.combiner;
  unsigned loops = op.getNumLoops();
  // Old loop d is new loop d (before the split one) or d + 1 (after it);
  // the split loop becomes the partials' loop, and the one after it the
  // rows each folds.
  auto renumber = [&](unsigned d) { return d <= split.dim ? d : d + 1; };
  AffineExpr part = getAffineDimExpr(split.dim, ctx);
  AffineExpr row = getAffineDimExpr(split.dim + 1, ctx);

  SmallVector<Value> inputs;
  SmallVector<AffineMap> maps;
  for (OpOperand *input : op.getDpsInputOperands()) {
    AffineMap map = op.getMatchingIndexingMap(input);
    SmallVector<AffineExpr> results;
    SmallVector<int64_t> shape;
    SmallVector<SmallVector<int64_t, 2>> groups;
    auto type = dyn_cast<RankedTensorType>(input->get().getType());
    for (auto [index, e] : llvm::enumerate(map.getResults())) {
      unsigned d = cast<AffineDimExpr>(e).getPosition();
      SmallVector<int64_t, 2> group{static_cast<int64_t>(shape.size())};
      if (d == split.dim) {
        results.append({part, row});
        shape.append({split.parts, split.rows});
        group.push_back(group.front() + 1);
      } else {
        results.push_back(getAffineDimExpr(renumber(d), ctx));
        shape.push_back(type.getDimSize(index));
      }
      groups.push_back(group);
    }
    bool expand = map.isFunctionOfDim(split.dim);
    inputs.push_back(expand ? lb.expand(input->get(), shape, groups)
                            : input->get());
    maps.push_back(AffineMap::get(loops + 1, 0, results, ctx));
  }
  // The partials: [parts, output...], from the combiner's neutral element.
  OpOperand *init = op.getDpsInitOperand(0);
  auto outType = cast<RankedTensorType>(init->get().getType());
  SmallVector<AffineExpr> outResults{part};
  for (AffineExpr e : op.getMatchingIndexingMap(init).getResults())
    outResults.push_back(
        getAffineDimExpr(renumber(cast<AffineDimExpr>(e).getPosition()), ctx));
  maps.push_back(AffineMap::get(loops + 1, 0, outResults, ctx));
  SmallVector<int64_t> partialShape{split.parts};
  llvm::append_range(partialShape, outType.getShape());
  Value neutral = arith::ConstantOp::create(
      rewriter, loc, *arith::getNeutralElement(combiner));
  Value partialInit = lb.filled(partialShape, neutral);

  SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
  iterators[split.dim] = utils::IteratorType::parallel;
  iterators.insert(iterators.begin() + split.dim + 1,
                   utils::IteratorType::reduction);
  auto partials = linalg::GenericOp::create(
      rewriter, loc, TypeRange{partialInit.getType()}, inputs,
      ValueRange{partialInit}, maps, iterators);
  rewriter.cloneRegionBefore(op.getRegion(), partials.getRegion(),
                             partials.getRegion().end());

  // The combination: out = combiner(out, partial), partials in order.
  unsigned rank = outType.getRank();
  SmallVector<unsigned> kept;
  for (unsigned d = 1; d <= rank; ++d)
    kept.push_back(d);
  Value outArg = op.getRegionOutputArgs()[0];
  Value total =
      lb.generic(init->get(), partials.getResult(0),
                 {lb.identity(rank + 1), lb.map(rank + 1, kept)},
                 [&](OpBuilder &b, Location, ValueRange args) -> Value {
                   IRMapping pair;
                   for (Value operand : combiner->getOperands())
                     pair.map(operand, operand == outArg ? args[1] : args[0]);
                   return b.clone(*combiner, pair)->getResult(0);
                 });
  rewriter.replaceOp(op, total);
}

struct GpuSplitReductionPass
    : public loom::codegen::impl::GpuSplitReductionPassBase<
          GpuSplitReductionPass> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<std::pair<linalg::GenericOp, Split>> splits;
    getOperation().walk([&](linalg::GenericOp op) {
      if (std::optional<Split> split = planSplit(op, rows, maxOutputs, minRows))
        splits.emplace_back(op, *split);
    });
    IRRewriter rewriter(&getContext());
    for (auto [op, split] : splits)
      splitReduction(rewriter, op, split);
  }
};

} // namespace

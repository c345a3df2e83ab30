//===- MemoryPlan.cpp - a step's tensors in one arena, from the timeline --===//
//
// The plan is made on tensors, from the same MemoryTimeline the scheduler
// bounds, and each buffer is pinned to its offset before bufferisation, so
// the executable's buffers are the timeline's buffers (see the pass
// description in TrainPasses.td).
//
//===----------------------------------------------------------------------===//

#include "loom/Analysis/ArenaPacker.h"
#include "loom/Analysis/MemoryTimeline.h"
#include "loom/Codegen/Common/Passes.h"
#include "loom/Dialect/Coll/CollOps.h"
#include "loom/Dialect/Train/TrainDialect.h"
#include "loom/Support/AttrNames.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Tensor/Transforms/Transforms.h"
#include "mlir/Transforms/WalkPatternRewriteDriver.h"
#include <algorithm>

namespace loom::codegen {
#define GEN_PASS_DEF_CODEGENMEMORYPLANPASS
#include "loom/Codegen/Common/Passes.h.inc"
} // namespace loom::codegen

using namespace mlir;
namespace attrs = loom::attrs;

namespace {

/// Whether `op` reads the value of its init `operand` (a linalg op whose
/// payload ignores it does not).
bool readsInit(OpOperand &operand) {
  if (auto linalgOp = dyn_cast<linalg::LinalgOp>(operand.getOwner()))
    return linalgOp.payloadUsesValueFromOperand(&operand);
  return true;
}

/// CSE merges equal fills, so one zero-filled tensor ends up the init of
/// many ops: it then lives from its first to its last user, and each user
/// copies it. A fill is cheaper to redo: each top-level user after the
/// first gets its own fill right before it.
void cloneSharedFills(Block &block) {
  SmallVector<linalg::FillOp> fills(block.getOps<linalg::FillOp>());
  for (linalg::FillOp fill : fills) {
    if (!fill.hasPureTensorSemantics() ||
        !fill.getOutputs()[0].getDefiningOp<tensor::EmptyOp>())
      continue;
    // A release names the buffer a collective start read: it follows that
    // start's fill (below) rather than getting one of its own.
    SmallVector<OpOperand *> uses, releases;
    for (OpOperand &use : fill->getResult(0).getUses())
      (isa<loom::coll::ReleaseOp>(use.getOwner()) ? releases : uses)
          .push_back(&use);
    if (uses.size() < 2)
      continue;
    // Keep the earliest user; the rest get their own fill.
    llvm::sort(uses, [&](OpOperand *a, OpOperand *b) {
      return block.findAncestorOpInBlock(*a->getOwner())
          ->isBeforeInBlock(block.findAncestorOpInBlock(*b->getOwner()));
    });
    OpBuilder builder(fill);
    for (OpOperand *use : llvm::drop_begin(uses)) {
      Operation *top = block.findAncestorOpInBlock(*use->getOwner());
      builder.setInsertionPoint(top);
      Operation *empty = builder.clone(*fill.getOutputs()[0].getDefiningOp());
      IRMapping mapping;
      mapping.map(fill.getOutputs()[0], empty->getResult(0));
      use->set(builder.clone(*fill, mapping)->getResult(0));
    }
    for (OpOperand *release : releases)
      for (OpOperand *use : uses)
        if (isa<loom::coll::CollectiveOpInterface>(use->getOwner())) {
          release->set(use->get());
          break;
        }
  }
}

/// CSE also merges the empty tensors that parts are joined in
/// (eliminate-empty-tensors has each part's op write into a slice of one,
/// and the slice inserted back): the timeline updates a slice of X in place
/// only if X has no other use. Each such extract, write, insert gets an
/// empty tensor of its own.
void cloneSharedJoins(Block &block) {
  SmallVector<tensor::InsertSliceOp> inserts(
      block.getOps<tensor::InsertSliceOp>());
  for (tensor::InsertSliceOp insert : inserts) {
    auto empty = insert.getDest().getDefiningOp<tensor::EmptyOp>();
    auto part = dyn_cast<OpResult>(insert.getSource());
    if (!empty || !part || llvm::range_size(empty->getUses()) <= 2 ||
        loom::getSliceWriteBack(part) != insert)
      continue;
    auto extract =
        loom::getTiedInit(part)->get().getDefiningOp<tensor::ExtractSliceOp>();
    OpBuilder builder(extract);
    Value own = builder.clone(*empty)->getResult(0);
    extract.getSourceMutable().assign(own);
    insert.getDestMutable().assign(own);
  }
}

/// A block's buffers placed in one region of the arena: each pinned result
/// with its offset from the region's start (a loop body's buffers are
/// placed in a region of their own, which is one buffer of the enclosing
/// block, live while the loop runs).
struct BlockPlan {
  SmallVector<std::pair<OpResult, int64_t>> pins;
  int64_t bytes = 0, bound = 0, peak = 0;
  unsigned unplanned = 0;
};

BlockPlan planBlock(Block &block, bool callerOwnedResults) {
  loom::MemoryTimeline timeline(block,
                                {callerOwnedResults, loom::kArenaAlignment});
  BlockPlan plan;
  plan.peak = timeline.getPeakBytes();
  SmallVector<loom::PackItem> items;
  SmallVector<OpResult> direct;
  for (const loom::BufferInterval &buffer : timeline.getBuffers()) {
    if (buffer.bytes == 0 || buffer.callerOwned || buffer.external ||
        isa<BlockArgument>(buffer.value))
      continue;
    auto result = cast<OpResult>(buffer.value);
    if (!isa<loom::coll::WaitOp, tensor::EmptyOp>(result.getOwner()) &&
        !loom::getTiedInit(result)) {
      ++plan.unplanned;
      continue;
    }
    direct.push_back(result);
    items.push_back({buffer.bytes, buffer.begin, buffer.end});
  }
  // Each loop body's region, live at the loop's position.
  SmallVector<BlockPlan> nested;
  for (auto [index, op] : llvm::enumerate(block)) {
    auto loop = dyn_cast<scf::ForOp>(op);
    if (!loop)
      continue;
    BlockPlan body = planBlock(*loop.getBody(), /*callerOwnedResults=*/false);
    plan.unplanned += body.unplanned;
    if (body.bytes == 0)
      continue;
    items.push_back({body.bytes, unsigned(index), unsigned(index)});
    nested.push_back(std::move(body));
  }
  loom::Packing packing = loom::packIntervals(items, loom::kArenaAlignment);
  plan.bytes = packing.arenaBytes;
  // The live bound: the most bytes live at once, a loop body's region
  // counted at its own bound (the packer saw it at its packed size).
  SmallVector<loom::PackItem> atBounds(items);
  for (auto [body, item] :
       llvm::zip(nested, MutableArrayRef(atBounds).drop_front(direct.size())))
    item.bytes = body.bound;
  std::vector<int64_t> live = loom::liveBytes(atBounds, loom::kArenaAlignment);
  plan.bound = live.empty() ? 0 : *std::max_element(live.begin(), live.end());
  for (auto [result, offset] : llvm::zip(direct, packing.offsets))
    plan.pins.push_back({result, offset});
  for (auto [body, offset] :
       llvm::zip(nested, ArrayRef(packing.offsets).drop_front(direct.size())))
    for (auto [result, inner] : body.pins)
      plan.pins.push_back({result, offset + inner});
  return plan;
}

struct CodegenMemoryPlanPass
    : public loom::codegen::impl::CodegenMemoryPlanPassBase<
          CodegenMemoryPlanPass> {
  using CodegenMemoryPlanPassBase::CodegenMemoryPlanPassBase;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal() || !func.getBody().hasOneBlock())
      return;
    Block &block = func.getBody().front();
    // tensor.concat (gradient buckets) becomes insert_slices into one
    // destination, which the plan can pin.
    RewritePatternSet patterns(&getContext());
    tensor::populateDecomposeTensorConcatPatterns(patterns);
    walkAndApplyPatterns(func, std::move(patterns));
    // Every block's fills are cloned before any timeline is built (a loop
    // body's peak is part of its parent's timeline).
    cloneSharedFills(block);
    cloneSharedJoins(block);
    func.walk([](scf::ForOp loop) {
      cloneSharedFills(*loop.getBody());
      cloneSharedJoins(*loop.getBody());
    });
    BlockPlan plan = planBlock(block, callerOwnedResults);

    OpBuilder builder(func.getContext());
    func->setAttr(loom::train::TrainDialect::kTimelinePeakBytesAttrName,
                  builder.getI64IntegerAttr(plan.peak));
    func->setAttr(loom::train::TrainDialect::kArenaBytesAttrName,
                  builder.getI64IntegerAttr(plan.bytes));
    func->setAttr(loom::train::TrainDialect::kArenaBoundBytesAttrName,
                  builder.getI64IntegerAttr(plan.bound));
    if (plan.unplanned)
      func->setAttr(attrs::kUnplannedBuffers,
                    builder.getI64IntegerAttr(plan.unplanned));
    arenaBytes += plan.bytes;
    numUnplanned += plan.unplanned;
    if (plan.pins.empty())
      return;

    Location loc = func.getLoc();
    builder.setInsertionPointToStart(&block);
    auto arena = memref::AllocOp::create(
        builder, loc, MemRefType::get({plan.bytes}, builder.getI8Type()),
        builder.getI64IntegerAttr(loom::kArenaAlignment));
    arena->setAttr(attrs::kArena, builder.getUnitAttr());

    // A tensor in the arena at `offset`, built before `before`.
    auto slot = [&](Operation *before, RankedTensorType type,
                    int64_t offset) -> Value {
      builder.setInsertionPoint(before);
      Value at = arith::ConstantIndexOp::create(builder, loc, offset);
      Value view = memref::ViewOp::create(
          builder, before->getLoc(),
          MemRefType::get(type.getShape(), type.getElementType()), arena, at,
          ValueRange{});
      return bufferization::ToTensorOp::create(builder, before->getLoc(), type,
                                               view, /*restrict=*/true,
                                               /*writable=*/true);
    };

    for (auto [result, offset] : plan.pins) {
      Operation *op = result.getOwner();
      if (auto wait = dyn_cast<loom::coll::WaitOp>(op)) {
        if (Operation *start = wait.getStart())
          start->setAttr(attrs::kArenaOffset,
                         builder.getI64IntegerAttr(offset));
        continue;
      }
      auto type = cast<RankedTensorType>(result.getType());
      // An empty tensor whose slices are written in place (see
      // MemoryTimeline): the tensor itself is the arena's.
      if (auto empty = dyn_cast<tensor::EmptyOp>(op)) {
        empty.getResult().replaceAllUsesWith(slot(op, type, offset));
        empty.erase();
        continue;
      }
      OpOperand *init = loom::getTiedInit(result);
      Value pinned = slot(op, type, offset);
      if (!init->get().getDefiningOp<tensor::EmptyOp>() && readsInit(*init))
        pinned =
            linalg::CopyOp::create(builder, op->getLoc(), init->get(), pinned)
                .getResult(0);
      init->set(pinned);
    }
  }
};

} // namespace

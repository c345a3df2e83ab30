//===- MemoryPlan.cpp - one arena per function, offsets from lifetimes ----===//

#include "loom/Dialect/Train/TrainPasses.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include <functional>
#include <tuple>

namespace loom::train {
#define GEN_PASS_DEF_LOOMMEMORYPLANPASS
#include "loom/Dialect/Train/TrainPasses.h.inc"
} // namespace loom::train

using namespace mlir;

namespace {

constexpr int64_t kAlignment = 64;

struct Buffer {
  memref::AllocOp alloc;
  int64_t bytes;
  unsigned begin, end;
  int64_t offset = -1;
  SmallVector<Operation *> deallocs;
};

int64_t alignUp(int64_t n) { return (n + kAlignment - 1) / kAlignment * kAlignment; }

/// The buffer's lifetime in top-level positions, or nullopt if it escapes
/// (returned, passed to a call, stored, yielded out of a region) and must
/// keep its own allocation.
std::optional<Buffer> analyse(memref::AllocOp alloc, Block &block,
                              const DenseMap<Operation *, unsigned> &position) {
  MemRefType type = alloc.getType();
  if (!type.hasStaticShape() || !type.getLayout().isIdentity() ||
      type.getMemorySpace() || !alloc.getDynamicSizes().empty() ||
      !type.getElementType().isIntOrFloat())
    return std::nullopt;
  Buffer buffer{alloc,
                type.getNumElements() *
                    int64_t((type.getElementTypeBitWidth() + 7) / 8),
                position.lookup(alloc), position.lookup(alloc), -1, {}};
  SmallVector<Value> worklist = {alloc.getResult()};
  while (!worklist.empty()) {
    Value value = worklist.pop_back_val();
    for (OpOperand &use : value.getUses()) {
      Operation *user = use.getOwner();
      // The buffer's address (as an index or integer) is the buffer too:
      // runtime calls read and write through it (an asynchronous
      // collective until its wait), and CSE may have merged the address a
      // later call takes with an earlier one.
      if (!isa<MemRefType>(value.getType())) {
        if (isa<arith::IndexCastOp, arith::IndexCastUIOp>(user))
          worklist.append(user->result_begin(), user->result_end());
        if (Operation *top = block.findAncestorOpInBlock(*user))
          buffer.end = std::max(buffer.end, position.lookup(top));
        else
          return std::nullopt;
        continue;
      }
      if (isa<memref::ExtractAlignedPointerAsIndexOp>(user))
        worklist.push_back(user->getResult(0));
      if (isa<memref::DeallocOp>(user)) {
        if (user->getBlock() != &block)
          return std::nullopt;
        buffer.deallocs.push_back(user);
        continue;
      }
      if (isa<func::ReturnOp, func::CallOp, memref::StoreOp>(user) ||
          user->hasTrait<OpTrait::IsTerminator>())
        return std::nullopt;
      if (auto view = dyn_cast<ViewLikeOpInterface>(user))
        if (view.getViewSource() == value)
          worklist.append(user->result_begin(), user->result_end());
      // The base buffer of the metadata is the allocation itself.
      if (auto meta = dyn_cast<memref::ExtractStridedMetadataOp>(user))
        worklist.push_back(meta.getBaseBuffer());
      Operation *top = block.findAncestorOpInBlock(*user);
      if (!top)
        return std::nullopt;
      buffer.end = std::max(buffer.end, position.lookup(top));
    }
  }
  return buffer;
}

/// Places the buffers in `order`, each at the lowest offset where it
/// overlaps no placed buffer live at the same time. Returns the arena size.
int64_t placeInOrder(ArrayRef<Buffer *> order) {
  SmallVector<Buffer *> placed;
  int64_t arena = 0;
  for (Buffer *b : order) {
    SmallVector<std::pair<int64_t, int64_t>> taken;
    for (Buffer *p : placed)
      if (p->begin <= b->end && b->begin <= p->end)
        taken.push_back({p->offset, p->offset + alignUp(p->bytes)});
    llvm::sort(taken);
    int64_t offset = 0;
    for (auto [lo, hi] : taken) {
      if (offset + alignUp(b->bytes) <= lo)
        break;
      offset = std::max(offset, hi);
    }
    b->offset = offset;
    arena = std::max(arena, offset + alignUp(b->bytes));
    placed.push_back(b);
  }
  return arena;
}

/// First fit under a few orders (largest first, earliest first, longest
/// first, largest area first), keeping the smallest arena. Ties in every
/// order break on position, so the plan is deterministic.
int64_t assignOffsets(MutableArrayRef<Buffer> buffers) {
  using Key = std::function<std::tuple<int64_t, int64_t, int64_t>(const Buffer *)>;
  SmallVector<Key> orders = {
      [](const Buffer *b) {
        return std::make_tuple(-b->bytes, int64_t(b->begin), int64_t(b->end));
      },
      [](const Buffer *b) {
        return std::make_tuple(int64_t(b->begin), -b->bytes, int64_t(b->end));
      },
      [](const Buffer *b) {
        return std::make_tuple(int64_t(b->begin) - int64_t(b->end), -b->bytes,
                               int64_t(b->begin));
      },
      [](const Buffer *b) {
        return std::make_tuple(-b->bytes * (int64_t(b->end - b->begin) + 1),
                               int64_t(b->begin), int64_t(b->end));
      }};
  int64_t best = -1;
  SmallVector<int64_t> bestOffsets;
  for (const Key &key : orders) {
    SmallVector<Buffer *> order;
    for (Buffer &b : buffers)
      order.push_back(&b);
    llvm::sort(order, [&](Buffer *a, Buffer *b) { return key(a) < key(b); });
    int64_t arena = placeInOrder(order);
    if (best < 0 || arena < best) {
      best = arena;
      bestOffsets.clear();
      for (Buffer &b : buffers)
        bestOffsets.push_back(b.offset);
    }
  }
  for (auto [b, offset] : llvm::zip(buffers, bestOffsets))
    b.offset = offset;
  return best;
}

/// The most bytes live at once over the planned lifetimes: no placement
/// can use less arena than this.
int64_t livePeak(ArrayRef<Buffer> buffers, unsigned numOps) {
  std::vector<int64_t> delta(numOps + 1, 0);
  for (const Buffer &b : buffers) {
    delta[b.begin] += alignUp(b.bytes);
    delta[b.end + 1] -= alignUp(b.bytes);
  }
  int64_t live = 0, peak = 0;
  for (int64_t d : delta)
    peak = std::max(peak, live += d);
  return peak;
}

struct LoomMemoryPlanPass
    : public loom::train::impl::LoomMemoryPlanPassBase<LoomMemoryPlanPass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal() || !func.getBody().hasOneBlock())
      return;
    Block &block = func.getBody().front();
    DenseMap<Operation *, unsigned> position;
    for (auto [index, op] : llvm::enumerate(block))
      position[&op] = index;
    SmallVector<Buffer> buffers;
    for (auto alloc : block.getOps<memref::AllocOp>())
      if (std::optional<Buffer> buffer = analyse(alloc, block, position))
        buffers.push_back(std::move(*buffer));
    if (buffers.empty())
      return;
    int64_t arenaBytes = assignOffsets(buffers);
    OpBuilder builder(func.getContext());
    func->setAttr("loom.arena_bytes", builder.getI64IntegerAttr(arenaBytes));
    func->setAttr("loom.live_peak_bytes",
                  builder.getI64IntegerAttr(livePeak(buffers, block.getOperations().size())));

    builder.setInsertionPointToStart(&block);
    Location loc = func.getLoc();
    auto arena = memref::AllocOp::create(
        builder, loc, MemRefType::get({arenaBytes}, builder.getI8Type()),
        builder.getI64IntegerAttr(kAlignment));
    for (Buffer &b : buffers) {
      builder.setInsertionPoint(b.alloc);
      Value offset = arith::ConstantIndexOp::create(builder, loc, b.offset);
      Value view = memref::ViewOp::create(builder, b.alloc.getLoc(),
                                          b.alloc.getType(), arena, offset,
                                          ValueRange{});
      b.alloc.replaceAllUsesWith(view);
      b.alloc.erase();
      for (Operation *dealloc : b.deallocs)
        dealloc->erase();
    }
    for (Operation &op : block)
      if (op.hasTrait<OpTrait::ReturnLike>()) {
        builder.setInsertionPoint(&op);
        memref::DeallocOp::create(builder, loc, arena);
      }
  }
};

} // namespace

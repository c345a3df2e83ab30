//===- PackBuffers.cpp - what bufferisation allocated, in one arena -------===//

#include "loom/Analysis/ArenaPacker.h"
#include "loom/Codegen/Common/Passes.h"
#include "loom/Dialect/Train/TrainDialect.h"
#include "loom/Support/AttrNames.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

namespace loom::codegen {
#define GEN_PASS_DEF_CODEGENPACKBUFFERSPASS
#include "loom/Codegen/Common/Passes.h.inc"
} // namespace loom::codegen

using namespace mlir;
namespace attrs = loom::attrs;

namespace {

struct Buffer {
  memref::AllocOp alloc;
  int64_t bytes;
  unsigned begin, end;
  int64_t offset = -1;
  SmallVector<Operation *> deallocs;
};

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
                position.lookup(alloc),
                position.lookup(alloc),
                -1,
                {}};
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

struct CodegenPackBuffersPass
    : public loom::codegen::impl::CodegenPackBuffersPassBase<
          CodegenPackBuffersPass> {
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
      if (!alloc->hasAttr(attrs::kArena))
        if (std::optional<Buffer> buffer = analyse(alloc, block, position))
          buffers.push_back(std::move(*buffer));
    if (buffers.empty())
      return;
    SmallVector<loom::PackItem> items;
    for (const Buffer &b : buffers)
      items.push_back({b.bytes, b.begin, b.end});
    loom::Packing packing = loom::packIntervals(items, loom::kArenaAlignment);
    for (auto [b, offset] : llvm::zip(buffers, packing.offsets))
      b.offset = offset;
    int64_t arenaBytes = packing.arenaBytes;
    numPacked += buffers.size();
    packedBytes += arenaBytes;
    OpBuilder builder(func.getContext());
    func->setAttr(loom::train::TrainDialect::kPackedBytesAttrName,
                  builder.getI64IntegerAttr(arenaBytes));
    func->setAttr(loom::train::TrainDialect::kPackedBoundBytesAttrName,
                  builder.getI64IntegerAttr(packing.lowerBound));

    builder.setInsertionPointToStart(&block);
    Location loc = func.getLoc();
    auto arena = memref::AllocOp::create(
        builder, loc, MemRefType::get({arenaBytes}, builder.getI8Type()),
        builder.getI64IntegerAttr(loom::kArenaAlignment));
    for (Buffer &b : buffers) {
      builder.setInsertionPoint(b.alloc);
      Value offset = arith::ConstantIndexOp::create(builder, loc, b.offset);
      Value view =
          memref::ViewOp::create(builder, b.alloc.getLoc(), b.alloc.getType(),
                                 arena, offset, ValueRange{});
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

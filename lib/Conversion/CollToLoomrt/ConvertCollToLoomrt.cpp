//===- ConvertCollToLoomrt.cpp - coll ops to loomrt calls -----------------===//

#include "loom/Analysis/OpIds.h"
#include "loom/Conversion/CollToLoomrt.h"
#include "loom/Conversion/Passes.h"
#include "loom/Dialect/Coll/CollOps.h"
#include "loom/Runtime/Symbols.h"
#include "loom/Runtime/loomrt.h"
#include "loom/Support/AttrNames.h"
#include "loom/Utils/ShapeChecks.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

namespace loom {
#define GEN_PASS_DEF_CONVERTCOLLTOLOOMRTPASS
#include "loom/Conversion/Passes.h.inc"
} // namespace loom

using namespace mlir;
namespace attrs = loom::attrs;
namespace symbols = loom::runtime::symbols;
using namespace loom::coll;

// The runtime numbers collective kinds and reductions as the dialect does:
// the lowering passes the enums' values straight through.
static_assert(int64_t(CollectiveKind::AllGather) == LOOMRT_ALL_GATHER &&
                  int64_t(CollectiveKind::ReduceScatter) ==
                      LOOMRT_REDUCE_SCATTER &&
                  int64_t(CollectiveKind::AllReduce) == LOOMRT_ALL_REDUCE &&
                  int64_t(CollectiveKind::Broadcast) == LOOMRT_BROADCAST &&
                  int64_t(CollectiveKind::Send) == LOOMRT_SEND &&
                  int64_t(CollectiveKind::Recv) == LOOMRT_RECV,
              "coll::CollectiveKind and loomrt.h's kinds differ");
static_assert(int64_t(ReductionKind::Sum) == LOOMRT_SUM &&
                  int64_t(ReductionKind::Avg) == LOOMRT_AVG &&
                  int64_t(ReductionKind::Max) == LOOMRT_MAX &&
                  int64_t(ReductionKind::Min) == LOOMRT_MIN,
              "coll::ReductionKind and loomrt.h's reductions differ");

namespace {

/// The arena codegen-memory-plan allocated in `op`'s function, if any.
Value findArena(Operation *op) {
  auto func = op->getParentOfType<func::FuncOp>();
  for (auto alloc : func.getBody().getOps<memref::AllocOp>())
    if (alloc->hasAttr(attrs::kArena))
      return alloc.getResult();
  return Value();
}

/// The buffer's address as an i64.
Value addressOf(OpBuilder &builder, Location loc, Value memref) {
  Value index =
      memref::ExtractAlignedPointerAsIndexOp::create(builder, loc, memref);
  return arith::IndexCastOp::create(builder, loc, builder.getI64Type(), index);
}

/// Why `start` cannot lower, or an empty string.
std::string checkLowerable(CollectiveOpInterface start) {
  Type element = start.getResultType().getElementType();
  if (!element.isF32() && !element.isF64() && !element.isBF16()) {
    std::string why = "loomrt collectives take f32, f64 or bf16, got ";
    llvm::raw_string_ostream os(why);
    os << element;
    return why;
  }
  int64_t axis = 0;
  if (auto gather = dyn_cast<AllGatherStartOp>(start.getOperation()))
    axis = gather.getGatherAxis();
  else if (auto scatter = dyn_cast<ReduceScatterStartOp>(start.getOperation()))
    axis = scatter.getScatterAxis();
  if (axis != 0)
    return "loomrt collectives use the rank-major layout (axis 0), got "
           "axis " +
           std::to_string(axis);
  if (!getRootComm(start.getComm()).getDefiningOp<CommWorldOp>())
    return "loomrt collectives run on the world communicator or a "
           "coll.comm_group of it";
  if (!start.getWait())
    return "the collective has no coll.wait";
  // The result buffer is allocated from the static shape.
  for (Value value : {Value(start.getInput()), Value(start.getFuture())}) {
    auto future = dyn_cast_or_null<FutureType>(value ? value.getType() : Type());
    auto type = future ? future.getValueType()
                       : dyn_cast_or_null<RankedTensorType>(
                             value ? value.getType() : Type());
    if (type && !loom::getStaticSizeInBytes(type)) {
      std::string why = "loomrt collectives take static shapes, got ";
      llvm::raw_string_ostream os(why);
      os << type;
      return why;
    }
  }
  return "";
}

/// The runtime's handle of `comm`: 0 for the world, else what
/// loomrt_comm_group returned for it, called where the group is made.
Value getCommHandle(ModuleOp module, Value comm,
                    DenseMap<Value, Value> &handles) {
  if (Value handle = handles.lookup(comm))
    return handle;
  OpBuilder builder(module.getContext());
  Type i64 = builder.getI64Type();
  Value handle;
  if (auto group = comm.getDefiningOp<CommGroupOp>()) {
    Value parent = getCommHandle(module, group.getParent(), handles);
    func::FuncOp groupFn =
        declarePrivateFunction(module, symbols::kCommGroup,
                               builder.getFunctionType({i64, i64, i64}, {i64}));
    builder.setInsertionPointAfter(group);
    Location loc = group.getLoc();
    handle = func::CallOp::create(
                 builder, loc, groupFn,
                 ValueRange{parent,
                            arith::ConstantIntOp::create(builder, loc, i64,
                                                         group.getSize()),
                            arith::ConstantIntOp::create(builder, loc, i64,
                                                         group.getStride())})
                 .getResult(0);
  } else {
    Operation *world = comm.getDefiningOp();
    builder.setInsertionPointAfter(world);
    handle = arith::ConstantIntOp::create(builder, world->getLoc(), i64,
                                          LOOMRT_COMM_WORLD);
  }
  handles[comm] = handle;
  return handle;
}

struct ConvertCollToLoomrtPass
    : public loom::impl::ConvertCollToLoomrtPassBase<ConvertCollToLoomrtPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    CollOpsToLower ops = collectCollOps(module);
    bool unlowerable = false;
    for (Operation *op : ops.starts)
      if (std::string why = checkLowerable(cast<CollectiveOpInterface>(op));
          !why.empty()) {
        op->emitOpError("cannot lower to loomrt: ") << why;
        unlowerable = true;
      }
    if (unlowerable)
      return signalPassFailure();

    for (Operation *op : ops.releases)
      op->erase();
    OpBuilder builder(module.getContext());
    Type i64 = builder.getI64Type();
    func::FuncOp startFn = declarePrivateFunction(
        module, symbols::kCollStart,
        builder.getFunctionType(SmallVector<Type>(10, i64), {i64}));
    func::FuncOp waitFn =
        declarePrivateFunction(module, symbols::kCollWait,
                               builder.getFunctionType({i64, i64, i64}, {}));
    DenseMap<Value, Value> commHandles;
    for (Operation *op : ops.starts) {
      auto start = cast<CollectiveOpInterface>(op);
      auto wait = cast<WaitOp>(start.getWait());
      Value comm = getCommHandle(module, start.getComm(), commHandles);
      RankedTensorType outType = start.getResultType();
      Type element = outType.getElementType();
      // A receive reads nothing: its input is the null address.
      RankedTensorType inType = start.getInput()
                                    ? start.getInput().getType()
                                    : RankedTensorType::get({0}, element);
      auto constant = [&](int64_t v) -> Value {
        return arith::ConstantIntOp::create(builder, op->getLoc(), i64, v);
      };
      auto bufferOf = [&](Location loc, Value tensor) -> Value {
        if (!tensor)
          return Value();
        auto toBuffer = bufferization::ToBufferOp::create(
            builder, loc, MemRefType::get(inType.getShape(), element), tensor);
        toBuffer.setReadOnly(true);
        return toBuffer.getResult();
      };

      builder.setInsertionPoint(op);
      Location loc = op->getLoc();
      Value in = bufferOf(loc, start.getInput());
      // codegen-memory-plan may have placed the result in the arena.
      auto outMemRef = MemRefType::get(outType.getShape(), element);
      Value out;
      auto offset = op->getAttrOfType<IntegerAttr>(attrs::kArenaOffset);
      Value arena = offset ? findArena(op) : Value();
      if (offset && !arena) {
        op->emitOpError("has loom.arena_offset but its function has no "
                        "loom.arena allocation");
        return signalPassFailure();
      }
      if (arena)
        out = memref::ViewOp::create(
            builder, loc, outMemRef, arena,
            arith::ConstantIndexOp::create(builder, loc, offset.getInt()),
            ValueRange{});
      else
        out = memref::AllocOp::create(builder, loc, outMemRef);
      int64_t reduction = 0, arg = 0;
      if (std::optional<ReductionKind> kind = start.getReductionKind())
        reduction = int64_t(*kind);
      if (auto broadcast = dyn_cast<BroadcastStartOp>(op))
        arg = broadcast.getRoot();
      // Point-to-point: the peer, and the tag in the reduction's place.
      if (start.isPointToPoint())
        std::tie(arg, reduction) = getPeerAndTag(start);
      auto addressOrNull = [&](Value memref) -> Value {
        return memref ? addressOf(builder, loc, memref) : constant(0);
      };
      Value handle = func::CallOp::create(
                         builder, loc, startFn,
                         ValueRange{constant(int64_t(start.getKind())),
                                    constant(reduction),
                                    constant(element.isF64()    ? LOOMRT_F64
                                             : element.isBF16() ? LOOMRT_BF16
                                                                : LOOMRT_F32),
                                    comm, constant(arg), addressOrNull(in),
                                    constant(inType.getNumElements()),
                                    addressOf(builder, loc, out),
                                    constant(outType.getNumElements()),
                                    constant(loom::getOpId(op).value_or(-1))})
                         .getResult(0);

      builder.setInsertionPoint(wait);
      loc = wait.getLoc();
      // The input is read until the wait: referencing it here keeps its
      // buffer alive and unwritten until then.
      Value inAgain = bufferOf(loc, start.getInput());
      func::CallOp::create(builder, loc, waitFn,
                           ValueRange{handle, addressOrNull(inAgain),
                                      addressOf(builder, loc, out)});
      auto toTensor = bufferization::ToTensorOp::create(builder, loc, outType,
                                                        out);
      toTensor.setRestrict(true);
      toTensor.setWritable(true);
      wait.getResult().replaceAllUsesWith(toTensor.getResult());
      wait.erase();
      op->erase();
    }
    if (failed(lowerRanksAndWorlds(module, ops, symbols::kRank)))
      return signalPassFailure();
  }
};

} // namespace

//===- ConvertCollToLoomrt.cpp - coll ops to loomrt calls -----------------===//
//
// A dialect conversion, as upstream's AsyncToLLVM is: a type converter (a
// communicator is its runtime handle, a future its handle and output
// buffer) and one pattern per op, populateCollToLoomrtPatterns.
//
//===----------------------------------------------------------------------===//

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
#include "mlir/Transforms/DialectConversion.h"

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
    auto future =
        dyn_cast_or_null<FutureType>(value ? value.getType() : Type());
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

/// coll.comm_world: the world's handle, LOOMRT_COMM_WORLD.
struct CommWorldLowering : public OpConversionPattern<CommWorldOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(CommWorldOp op, OpAdaptor,
                  ConversionPatternRewriter &rewriter) const override {
    rewriter.replaceOp(op, arith::ConstantIntOp::create(rewriter, op.getLoc(),
                                                        rewriter.getI64Type(),
                                                        LOOMRT_COMM_WORLD));
    return success();
  }
};

/// coll.comm_group: the handle loomrt_comm_group(parent, size, stride)
/// returns where the group is made.
struct CommGroupLowering : public OpConversionPattern<CommGroupOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(CommGroupOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Type i64 = rewriter.getI64Type();
    func::FuncOp groupFn = declarePrivateFunction(
        op->getParentOfType<ModuleOp>(), symbols::kCommGroup,
        rewriter.getFunctionType({i64, i64, i64}, {i64}));
    Location loc = op.getLoc();
    Value size = arith::ConstantIntOp::create(rewriter, loc, i64, op.getSize());
    Value stride =
        arith::ConstantIntOp::create(rewriter, loc, i64, op.getStride());
    rewriter.replaceOpWithNewOp<func::CallOp>(
        op, groupFn, ValueRange{adaptor.getParent(), size, stride});
    return success();
  }
};

/// coll.comm_rank: loomrt_rank, then per group floor(r / stride) mod size.
struct CommRankLowering : public OpConversionPattern<CommRankOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(CommRankOp op, OpAdaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Type i64 = rewriter.getI64Type();
    func::FuncOp rankFn =
        declarePrivateFunction(op->getParentOfType<ModuleOp>(), symbols::kRank,
                               rewriter.getFunctionType({}, {i64}));
    Location loc = op.getLoc();
    Value rank =
        func::CallOp::create(rewriter, loc, rankFn, ValueRange{}).getResult(0);
    rank = getGroupRank(rewriter, loc, rank, op.getComm());
    rewriter.replaceOpWithNewOp<arith::IndexCastOp>(op, rewriter.getIndexType(),
                                                    rank);
    return success();
  }
};

/// coll.release: nothing (bufferisation's deallocation frees buffers after
/// their last use).
struct ReleaseLowering : public OpConversionPattern<ReleaseOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(ReleaseOp op, OpAdaptor,
                  ConversionPatternRewriter &rewriter) const override {
    rewriter.eraseOp(op);
    return success();
  }
};

/// The input's buffer, read-only (null for a receive).
Value inputBuffer(OpBuilder &builder, Location loc,
                  CollectiveOpInterface start) {
  Value input = start.getInput();
  if (!input)
    return Value();
  auto type = cast<RankedTensorType>(input.getType());
  auto toBuffer = bufferization::ToBufferOp::create(
      builder, loc, MemRefType::get(type.getShape(), type.getElementType()),
      input);
  toBuffer.setReadOnly(true);
  return toBuffer.getResult();
}

/// A collective's start: loomrt_coll_start on the input's buffer and an
/// output buffer (in the arena where codegen-memory-plan placed it); its
/// future becomes the handle and the output buffer.
struct StartLowering
    : public OpInterfaceConversionPattern<CollectiveOpInterface> {
  using OpInterfaceConversionPattern::OpInterfaceConversionPattern;
  LogicalResult
  matchAndRewrite(CollectiveOpInterface start, ArrayRef<ValueRange> operands,
                  ConversionPatternRewriter &rewriter) const override {
    Operation *op = start.getOperation();
    Type i64 = rewriter.getI64Type();
    auto module = op->getParentOfType<ModuleOp>();
    func::FuncOp startFn = declarePrivateFunction(
        module, symbols::kCollStart,
        rewriter.getFunctionType(SmallVector<Type>(10, i64), {i64}));
    RankedTensorType outType = start.getResultType();
    Type element = outType.getElementType();
    // A receive reads nothing: its input is the null address.
    int64_t inCount =
        start.getInput() ? start.getInput().getType().getNumElements() : 0;
    Location loc = op->getLoc();
    auto constant = [&](int64_t v) -> Value {
      return arith::ConstantIntOp::create(rewriter, loc, i64, v);
    };
    Value in = inputBuffer(rewriter, loc, start);
    // codegen-memory-plan may have placed the result in the arena.
    auto outMemRef = MemRefType::get(outType.getShape(), element);
    Value out;
    auto offset = op->getAttrOfType<IntegerAttr>(attrs::kArenaOffset);
    Value arena = offset ? findArena(op) : Value();
    if (offset && !arena)
      return op->emitOpError("has loom.arena_offset but its function has no "
                             "loom.arena allocation");
    if (arena)
      out = memref::ViewOp::create(
          rewriter, loc, outMemRef, arena,
          arith::ConstantIndexOp::create(rewriter, loc, offset.getInt()),
          ValueRange{});
    else
      out = memref::AllocOp::create(rewriter, loc, outMemRef);
    int64_t reduction = 0, arg = 0;
    if (std::optional<ReductionKind> kind = start.getReductionKind())
      reduction = int64_t(*kind);
    if (auto broadcast = dyn_cast<BroadcastStartOp>(op))
      arg = broadcast.getRoot();
    // Point-to-point: the peer, and the tag in the reduction's place.
    if (start.isPointToPoint())
      std::tie(arg, reduction) = getPeerAndTag(start);
    auto addressOrNull = [&](Value memref) -> Value {
      return memref ? addressOf(rewriter, loc, memref) : constant(0);
    };
    // The communicator is the start's one operand of type !coll.comm.
    Value comm;
    for (auto [operand, converted] :
         llvm::zip_equal(op->getOperands(), operands))
      if (operand == start.getComm())
        comm = converted.front();
    Value handle =
        func::CallOp::create(
            rewriter, loc, startFn,
            ValueRange{constant(int64_t(start.getKind())), constant(reduction),
                       constant(element.isF64()    ? LOOMRT_F64
                                : element.isBF16() ? LOOMRT_BF16
                                                   : LOOMRT_F32),
                       comm, constant(arg), addressOrNull(in),
                       constant(inCount), addressOf(rewriter, loc, out),
                       constant(outType.getNumElements()),
                       constant(loom::getOpId(op).value_or(-1))})
            .getResult(0);
    rewriter.replaceOpWithMultiple(op, {{handle, out}});
    return success();
  }
};

/// coll.wait: loomrt_coll_wait on the handle, the input's buffer (taken
/// again: the input is read until the wait, and referencing it here keeps
/// its buffer alive and unwritten until then) and the output, whose tensor
/// replaces the wait's result.
struct WaitLowering : public OpConversionPattern<WaitOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(WaitOp wait, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    ValueRange future = adaptor.getFuture();
    auto start = wait.getFuture().getDefiningOp<CollectiveOpInterface>();
    if (future.size() != 2 || !start)
      return rewriter.notifyMatchFailure(wait, "not the wait of a start");
    Type i64 = rewriter.getI64Type();
    func::FuncOp waitFn = declarePrivateFunction(
        wait->getParentOfType<ModuleOp>(), symbols::kCollWait,
        rewriter.getFunctionType({i64, i64, i64}, {}));
    Location loc = wait.getLoc();
    Value handle = future[0], out = future[1];
    Value in = inputBuffer(rewriter, loc, start);
    Value inAddress =
        in ? addressOf(rewriter, loc, in)
           : arith::ConstantIntOp::create(rewriter, loc, i64, 0).getResult();
    func::CallOp::create(
        rewriter, loc, waitFn,
        ValueRange{handle, inAddress, addressOf(rewriter, loc, out)});
    auto toTensor = bufferization::ToTensorOp::create(
        rewriter, loc, wait.getResult().getType(), out);
    toTensor.setRestrict(true);
    toTensor.setWritable(true);
    rewriter.replaceOp(wait, toTensor.getResult());
    return success();
  }
};

struct ConvertCollToLoomrtPass
    : public loom::impl::ConvertCollToLoomrtPassBase<ConvertCollToLoomrtPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *context = &getContext();
    bool unlowerable = false;
    module.walk([&](CollectiveOpInterface start) {
      if (std::string why = checkLowerable(start); !why.empty()) {
        start->emitOpError("cannot lower to loomrt: ") << why;
        unlowerable = true;
      }
    });
    if (unlowerable)
      return signalPassFailure();
    CollToLoomrtTypeConverter converter(context);
    RewritePatternSet patterns(context);
    populateCollToLoomrtPatterns(converter, patterns);
    ConversionTarget target(*context);
    target.addIllegalDialect<CollDialect>();
    target.markUnknownOpDynamicallyLegal([](Operation *) { return true; });
    if (failed(applyPartialConversion(module, target, std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace

loom::coll::CollToLoomrtTypeConverter::CollToLoomrtTypeConverter(
    MLIRContext *context) {
  addConversion([](Type type) { return type; });
  // A communicator is its runtime handle.
  addConversion([context](CommType) { return IntegerType::get(context, 64); });
  // A future is the start's handle and its output buffer.
  addConversion([context](FutureType type, SmallVectorImpl<Type> &results) {
    auto value = cast<RankedTensorType>(type.getValueType());
    results.push_back(IntegerType::get(context, 64));
    results.push_back(
        MemRefType::get(value.getShape(), value.getElementType()));
    return success();
  });
}

void loom::coll::populateCollToLoomrtPatterns(TypeConverter &converter,
                                              RewritePatternSet &patterns) {
  MLIRContext *context = patterns.getContext();
  patterns.add<CommWorldLowering, CommGroupLowering, CommRankLowering,
               ReleaseLowering, WaitLowering>(converter, context);
  patterns.add<StartLowering>(converter, context);
}

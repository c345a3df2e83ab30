//===- ZeroPartition.cpp - ZeRO stages 1-3 on a training step -------------===//
//
// The training step has three parts the pass treats differently:
//
//   forward and backward   read whole parameters; in stage 3 each region
//                          gathers them before its first use and releases
//                          them after its last.
//   gradients              full-shaped values feeding the update; each is
//                          reduce-scattered into this rank's shard as soon as
//                          it exists.
//   the update             the elementwise generics that produce the updated
//                          parameters and state; they are rebuilt on shards.
//
// Everything sharded is a flat tensor<S> (S = ceil(E / N)) of the flattened
// tensor padded with zeros to N * S.
//
//===----------------------------------------------------------------------===//

#include "loom/Analysis/MemoryTimeline.h"
#include "loom/Dialect/Coll/CollOps.h"
#include "loom/Dialect/Train/TrainOps.h"
#include "loom/Sharding/Passes.h"
#include "loom/Utils/LinalgBuilder.h"
#include "loom/Utils/ShapeChecks.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/SetVector.h"

namespace loom::sharding {
#define GEN_PASS_DEF_ZEROPARTITIONPASS
#include "loom/Sharding/Passes.h.inc"
} // namespace loom::sharding

using namespace mlir;
using namespace loom;
using namespace loom::coll;
using loom::train::TrainDialect;

namespace {

/// Returns true if `op` is an elementwise generic the update may contain:
/// every map is the identity or maps to nothing (a 0-d scalar).
bool isElementwiseUpdate(Operation *op) {
  auto generic = dyn_cast<linalg::GenericOp>(op);
  if (!generic || generic->getNumResults() != 1 ||
      generic.getNumReductionLoops() != 0)
    return false;
  auto type = cast<RankedTensorType>(generic->getResult(0).getType());
  if (type.getRank() == 0 || !type.hasStaticShape())
    return false;
  for (auto [operand, map] :
       llvm::zip(generic->getOperands(), generic.getIndexingMapsArray())) {
    auto operandType = dyn_cast<RankedTensorType>(operand.getType());
    if (!operandType)
      return false;
    bool scalar = operandType.getRank() == 0 && map.getNumResults() == 0;
    bool full = operandType == type && map.isIdentity();
    if (!scalar && !full)
      return false;
  }
  return true;
}

/// Reshapes between a flat tensor<E> and `type` (E elements, any rank),
/// grouping all of the shaped side's dimensions into the flat one.
Value reshapeFlat(OpBuilder &builder, Location loc, Value value,
                  RankedTensorType type) {
  auto from = cast<RankedTensorType>(value.getType());
  if (from == type)
    return value;
  RankedTensorType shaped = from.getRank() == 1 ? type : from;
  SmallVector<ReassociationIndices> groups;
  if (shaped.getRank() > 0)
    groups.push_back(
        llvm::to_vector<2>(llvm::seq<int64_t>(0, shaped.getRank())));
  if (type.getRank() > from.getRank())
    return tensor::ExpandShapeOp::create(builder, loc, type, value, groups);
  return tensor::CollapseShapeOp::create(builder, loc, type, value, groups);
}

class Partitioner {
public:
  Partitioner(func::FuncOp func, unsigned stage, int64_t ranks,
              ReductionKind reduction)
      : func(func), stage(stage), ranks(ranks), reduction(reduction),
        builder(func.getContext()) {
    // A stage (as the pass selects them) reads its grid from loom.pipeline.
    if (!func->hasAttr(loom::train::TrainDialect::kPipelineStageAttrName))
      return;
    auto pipeline = func->getAttrOfType<loom::train::PipelineAttr>(
        loom::train::TrainDialect::kPipelineAttrName);
    pipelineStages = pipeline ? pipeline.getStages() : -1;
    pipelineReplicas = pipeline ? pipeline.getReplicas() : -1;
  }

  LogicalResult run();

private:
  LogicalResult checkInput();
  LogicalResult findUpdateRegion();
  /// The shard size and the sharded type of a tensor of `type`.
  int64_t getShardSize(RankedTensorType type) const {
    return llvm::divideCeil(type.getNumElements(), ranks);
  }
  RankedTensorType getShardType(RankedTensorType type) const {
    return RankedTensorType::get({getShardSize(type)}, type.getElementType());
  }
  /// Flattens `full` and pads it with zeros to N * S.
  Value flattenAndPad(Location loc, Value full);
  /// Reduce-scatters the full gradient `grad` into this rank's shard.
  Value reduceScatter(Value grad);
  /// All-gathers `shard` and reshapes it to `fullType`; returns the wait's
  /// result (for a release) and the full-shaped view.
  std::pair<Value, Value> gather(Location loc, Value shard,
                                 RankedTensorType fullType);
  /// This rank's shard of the whole tensor `full` (stages 1 and 2).
  Value localShard(Value full);
  Value getRank();
  /// The shard that stands for `value` in the update.
  FailureOr<Value> getShard(Value value);
  LogicalResult rebuildUpdate();
  LogicalResult gatherParameterUses(BlockArgument param,
                                    RankedTensorType fullType);

  func::FuncOp func;
  unsigned stage;
  int64_t ranks;
  ReductionKind reduction;
  /// A pipeline stage's (pp-partition): the world is pipelineStages x
  /// pipelineReplicas ranks, and the step is sharded over the stage's
  /// replicas. 0 for a whole step, -1 for a stage that does not say.
  int64_t pipelineStages = 0, pipelineReplicas = 1;
  /// The world's ranks.
  int64_t getWorldRanks() const {
    return pipelineStages > 0 ? pipelineStages * pipelineReplicas : ranks;
  }
  OpBuilder builder;
  Value comm, rank;
  func::ReturnOp ret;
  Operation *lossOp = nullptr;
  SmallVector<BlockArgument> params, states;
  llvm::SetVector<Operation *> updateOps;
  DenseMap<Value, Value> shards;
  DenseMap<Value, Value> gradientShards;
  /// Stage 1's full gradients, released just before the return.
  SmallVector<Value> releasedAtEnd;
};

LogicalResult Partitioner::checkInput() {
  if (!func.getBody().hasOneBlock())
    return func.emitOpError("zero-partition expects a single-block function");
  for (BlockArgument arg : func.getArguments()) {
    if (func.getArgAttr(arg.getArgNumber(), TrainDialect::kParamAttrName))
      params.push_back(arg);
    else if (func.getArgAttr(arg.getArgNumber(), TrainDialect::kStateAttrName))
      states.push_back(arg);
    else if (auto commType = dyn_cast<CommType>(arg.getType());
             commType && commType.getSize() != getWorldRanks())
      return func.emitOpError("world size ")
             << getWorldRanks() << " does not match the communicator argument #"
             << arg.getArgNumber() << " of type " << commType;
  }
  if (pipelineStages < 0 || pipelineReplicas < 1)
    return func.emitOpError("is a pipeline stage (train.pipeline_stage) "
                            "without train.pipeline's stages and replicas");
  if (pipelineStages && ranks != pipelineReplicas)
    return func.emitOpError("world-size ")
           << ranks << " does not match the pipeline's " << pipelineReplicas
           << " data-parallel replicas (pp-partition{replicas}): a stage is "
              "sharded over its replicas";
  if (pipelineStages && stage == 3)
    return func.emitOpError("is a pipeline stage: zero-partition shards "
                            "stages at ZeRO stage 1 or 2 (stage 3 would "
                            "gather each parameter once per microbatch)");
  if (params.empty())
    return func.emitOpError("is not a training step: it has a train.loss "
                            "result but no train.param argument");
  for (BlockArgument arg : llvm::concat<BlockArgument>(params, states)) {
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    if (!type || !type.hasStaticShape())
      return func.emitOpError("expected argument #")
             << arg.getArgNumber() << " to be a static tensor, got "
             << arg.getType();
  }
  // Gradients are reduced across the ranks by sharding them; a 0-d
  // parameter has nothing to shard, and its gradient would stay this rank's.
  for (BlockArgument param : params)
    if (cast<RankedTensorType>(param.getType()).getRank() == 0)
      return func.emitOpError("parameter argument #")
             << param.getArgNumber()
             << " is 0-d; zero-partition shards parameters of rank >= 1 "
                "(make it tensor<1x...>)";
  // Shards are sized from the element counts: an overflow would size them
  // zero.
  if (failed(loom::checkStaticShapes(func, "zero-partition")))
    return failure();
  // Stages 1 and 2 keep parameters whole; a gradient the step returns (no
  // optimizer consumed it) would be a shard of a whole parameter's type.
  if (stage != 3)
    for (unsigned i = 0, e = func.getNumResults(); i < e; ++i)
      if (func.getResultAttr(i, TrainDialect::kGradAttrName))
        return func.emitOpError("returns gradients (result #")
               << i << ") but stage " << stage
               << " keeps parameters whole; run train-optimizer first, or "
                  "use stage 3";
  WalkResult walk = func.walk([&](CommWorldOp op) {
    if (op.getComm().getType().getSize() != getWorldRanks()) {
      op.emitOpError("world size ")
          << getWorldRanks() << " does not match this communicator of type "
          << op.getComm().getType();
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return failure();
  // A pipeline stage's transfers stay; any other collective means the step
  // is sharded already.
  if (!func.walk([&](CollectiveOpInterface op) {
             return pipelineStages && op.isPointToPoint()
                        ? WalkResult::advance()
                        : WalkResult::interrupt();
           })
           .wasInterrupted())
    return success();
  return func.emitOpError("is already partitioned: it contains collectives");
}

/// The update: the ops train-optimizer tagged `train.update`, in program
/// order. The 0-d ones (the step counter) stay as they are.
LogicalResult Partitioner::findUpdateRegion() {
  for (Operation &op : func.getBody().front()) {
    if (!op.hasAttr(TrainDialect::kUpdateAttrName))
      continue;
    auto type = dyn_cast<RankedTensorType>(op.getResult(0).getType());
    if (type && type.getRank() == 0)
      continue;
    if (!isElementwiseUpdate(&op))
      return op.emitOpError("is tagged train.update but is not an "
                            "elementwise generic zero-partition can shard");
    updateOps.insert(&op);
  }
  for (unsigned i = 0, e = func.getNumResults(); i < e; ++i) {
    if (!func.getResultAttr(i, TrainDialect::kParamAttrName) &&
        !func.getResultAttr(i, TrainDialect::kStateAttrName))
      continue;
    auto type = cast<RankedTensorType>(ret.getOperand(i).getType());
    Operation *def = ret.getOperand(i).getDefiningOp();
    if (type.getRank() != 0 && (!def || !updateOps.contains(def)))
      return func.emitOpError("result #")
             << i
             << " is an updated parameter or state not produced by a "
                "train.update op; run zero-partition on the output of "
                "train-optimizer";
  }
  return success();
}

Value Partitioner::flattenAndPad(Location loc, Value full) {
  auto type = cast<RankedTensorType>(full.getType());
  int64_t elements = type.getNumElements();
  auto flatType = RankedTensorType::get({elements}, type.getElementType());
  Value flat = reshapeFlat(builder, loc, full, flatType);
  int64_t padded = getShardSize(type) * ranks;
  if (padded == elements)
    return flat;
  LinalgBuilder lb(builder, loc);
  Value zeros = lb.filled({padded}, type.getElementType(), 0.0);
  return tensor::InsertSliceOp::create(
      builder, loc, flat, zeros,
      ArrayRef<OpFoldResult>{builder.getIndexAttr(0)},
      ArrayRef<OpFoldResult>{builder.getIndexAttr(elements)},
      ArrayRef<OpFoldResult>{builder.getIndexAttr(1)});
}

Value Partitioner::reduceScatter(Value grad) {
  if (Value shard = gradientShards.lookup(grad))
    return shard;
  auto type = cast<RankedTensorType>(grad.getType());
  Location loc = grad.getLoc();
  // Start as soon as the gradient exists; wait just before the first use.
  if (Operation *def = grad.getDefiningOp())
    builder.setInsertionPointAfter(def);
  else
    builder.setInsertionPointToStart(grad.getParentBlock());
  Value input = flattenAndPad(loc, grad);
  RankedTensorType shardType = getShardType(type);
  auto start = ReduceScatterStartOp::create(
      builder, loc, FutureType::get(shardType), input, comm,
      /*scatter_axis=*/0, reduction);
  // Stage 1 keeps the full gradient to the end of the step; stage 2 frees
  // it once the reduce-scatter has read it, and the forward too where the
  // gradient is one of its values (a zero fill, when the loss does not read
  // the parameter).
  if (stage == 2) {
    Operation *last = start;
    for (Value value : {grad, input})
      for (Operation *user : value.getUsers())
        if (Operation *top = start->getBlock()->findAncestorOpInBlock(*user))
          if (!updateOps.contains(top) && top != ret &&
              last->isBeforeInBlock(top))
            last = top;
    builder.setInsertionPointAfter(last);
    ReleaseOp::create(builder, loc, input);
  } else if (stage == 1)
    releasedAtEnd.push_back(input);
  SmallVector<Operation *> users;
  Operation *firstUser = nullptr;
  for (Operation *user : grad.getUsers())
    if (updateOps.contains(user) || user == ret)
      if (!firstUser || user->isBeforeInBlock(firstUser))
        firstUser = user;
  builder.setInsertionPoint(firstUser ? firstUser : ret.getOperation());
  Value shard = WaitOp::create(builder, loc, start.getFuture());
  gradientShards[grad] = shard;
  return shard;
}

std::pair<Value, Value> Partitioner::gather(Location loc, Value shard,
                                            RankedTensorType fullType) {
  int64_t shardSize = getShardSize(fullType);
  auto paddedType =
      RankedTensorType::get({shardSize * ranks}, fullType.getElementType());
  auto start =
      AllGatherStartOp::create(builder, loc, FutureType::get(paddedType), shard,
                               comm, /*gather_axis=*/0);
  Value waited = WaitOp::create(builder, loc, start.getFuture());
  Value full = waited;
  int64_t elements = fullType.getNumElements();
  if (elements != paddedType.getDimSize(0))
    full = tensor::ExtractSliceOp::create(
        builder, loc,
        RankedTensorType::get({elements}, fullType.getElementType()), full,
        ArrayRef<OpFoldResult>{builder.getIndexAttr(0)},
        ArrayRef<OpFoldResult>{builder.getIndexAttr(elements)},
        ArrayRef<OpFoldResult>{builder.getIndexAttr(1)});
  full = reshapeFlat(builder, loc, full, fullType);
  return {waited, full};
}

Value Partitioner::getRank() {
  if (!rank) {
    OpBuilder::InsertionGuard guard(builder);
    builder.setInsertionPointAfterValue(comm);
    rank = CommRankOp::create(builder, func.getLoc(), builder.getIndexType(),
                              comm);
  }
  return rank;
}

Value Partitioner::localShard(Value full) {
  auto type = cast<RankedTensorType>(full.getType());
  Location loc = full.getLoc();
  builder.setInsertionPointAfterValue(getRank());
  if (Operation *def = full.getDefiningOp())
    if (getRank().getDefiningOp()->isBeforeInBlock(def))
      builder.setInsertionPointAfter(def);
  Value padded = flattenAndPad(loc, full);
  int64_t size = getShardSize(type);
  Value sizeValue = arith::ConstantIndexOp::create(builder, loc, size);
  Value offset = arith::MulIOp::create(builder, loc, getRank(), sizeValue);
  return tensor::ExtractSliceOp::create(
      builder, loc, getShardType(type), padded, ArrayRef<OpFoldResult>{offset},
      ArrayRef<OpFoldResult>{builder.getIndexAttr(size)},
      ArrayRef<OpFoldResult>{builder.getIndexAttr(1)});
}

FailureOr<Value> Partitioner::getShard(Value value) {
  if (Value shard = shards.lookup(value))
    return shard;
  auto type = cast<RankedTensorType>(value.getType());
  if (type.getRank() == 0)
    return value;
  auto arg = dyn_cast<BlockArgument>(value);
  bool isParam = arg && llvm::is_contained(params, arg);
  if (isParam) {
    // Stage 3 parameters are shards already; stages 1-2 slice their own.
    Value shard = stage == 3 ? value : localShard(value);
    shards[value] = shard;
    return shard;
  }
  if (value.getDefiningOp<tensor::EmptyOp>())
    return Value();
  if (arg)
    return func.emitOpError("the update reads argument #")
           << arg.getArgNumber()
           << ", which is neither a parameter nor optimizer state";
  // Anything else full-shaped is a gradient computed by the backward.
  Value shard = reduceScatter(value);
  shards[value] = shard;
  return shard;
}

/// Rebuilds each update generic on shards, in program order.
LogicalResult Partitioner::rebuildUpdate() {
  for (Operation *op : updateOps) {
    auto generic = cast<linalg::GenericOp>(op);
    auto fullType = cast<RankedTensorType>(op->getResult(0).getType());
    RankedTensorType shardType = getShardType(fullType);
    SmallVector<Value> inputs;
    SmallVector<AffineMap> maps;
    LinalgBuilder lb(builder, op->getLoc());
    for (auto [operand, map] :
         llvm::zip(generic.getDpsInputs(), generic.getIndexingMapsArray())) {
      FailureOr<Value> shard = getShard(operand);
      if (failed(shard))
        return failure();
      inputs.push_back(*shard);
      bool scalar = map.getNumResults() == 0;
      maps.push_back(scalar ? lb.map(1, {}) : lb.identity(1));
    }
    maps.push_back(lb.identity(1));
    builder.setInsertionPoint(op);
    Value init = lb.empty(shardType.getShape(), shardType.getElementType());
    auto rebuilt = linalg::GenericOp::create(
        builder, op->getLoc(), TypeRange{shardType}, inputs, ValueRange{init},
        maps, SmallVector<utils::IteratorType>{utils::IteratorType::parallel});
    rebuilt->setAttr(TrainDialect::kUpdateAttrName, builder.getUnitAttr());
    rebuilt.getRegion().takeBody(generic.getRegion());
    shards[op->getResult(0)] = rebuilt.getResult(0);
  }
  return success();
}

/// The later of `last` and the last op of `block` that reads `user`'s
/// operand: `user` itself or, when it is a view (a slice or a reshape: the
/// gathered buffer itself once bufferized), the last reader of its results.
static Operation *lastReader(Block &block, Operation *user, Operation *last) {
  if (!last || last->isBeforeInBlock(user))
    last = user;
  if (!isBufferView(user))
    return last;
  for (Value result : user->getResults())
    for (Operation *reader : result.getUsers())
      if (Operation *top = block.findAncestorOpInBlock(*reader))
        last = lastReader(block, top, last);
  return last;
}

/// Stage 3: gathers a sharded parameter before each region that uses it
/// (the forward, up to the loss; the backward, after it) and releases it
/// after the region's last use.
LogicalResult Partitioner::gatherParameterUses(BlockArgument param,
                                               RankedTensorType fullType) {
  Block &block = func.getBody().front();
  // Group the top-level users by region, skipping the update.
  SmallVector<SmallVector<OpOperand *>, 2> regions(2);
  for (OpOperand &use : param.getUses()) {
    Operation *user = block.findAncestorOpInBlock(*use.getOwner());
    if (updateOps.contains(user))
      continue;
    // The gathered copy is released after its last use; one the step
    // returns never is.
    if (user == ret)
      return func.emitOpError("returns parameter argument #")
             << param.getArgNumber()
             << " itself; zero-partition stage 3 shards it, so the step must "
                "return its update (run train-optimizer first)";
    bool backward = lossOp && lossOp->isBeforeInBlock(user);
    regions[backward].push_back(&use);
  }
  for (SmallVector<OpOperand *> &uses : regions) {
    if (uses.empty())
      continue;
    Operation *first = nullptr, *last = nullptr;
    for (OpOperand *use : uses) {
      Operation *user = block.findAncestorOpInBlock(*use->getOwner());
      if (!first || user->isBeforeInBlock(first))
        first = user;
      last = lastReader(block, user, last);
    }
    builder.setInsertionPoint(first);
    auto [waited, full] = gather(param.getLoc(), param, fullType);
    for (OpOperand *use : uses)
      use->set(full);
    builder.setInsertionPointAfter(last);
    ReleaseOp::create(builder, param.getLoc(), waited);
  }
  return success();
}

LogicalResult Partitioner::run() {
  if (failed(checkInput()))
    return failure();
  Block &block = func.getBody().front();
  ret = cast<func::ReturnOp>(block.getTerminator());
  // A pipeline's stages other than the last return no loss.
  std::optional<unsigned> lossIndex = train::getLossResultIndex(func);
  if (lossIndex)
    lossOp = ret.getOperand(*lossIndex).getDefiningOp();

  builder.setInsertionPointToStart(&block);
  // The world (the stage's own, if pp-partition made one), and on a
  // pipeline's stage, its replicas: ranks s * D ... s * D + D - 1.
  for (CommWorldOp world : block.getOps<CommWorldOp>()) {
    comm = world;
    world->moveBefore(&block, block.begin());
    break;
  }
  if (!comm)
    comm =
        CommWorldOp::create(builder, func.getLoc(),
                            CommType::get(func.getContext(), getWorldRanks()));
  builder.setInsertionPointAfterValue(comm);
  if (pipelineStages)
    comm = CommGroupOp::create(builder, func.getLoc(),
                               CommType::get(func.getContext(), ranks), comm,
                               ranks, /*stride=*/1);
  if (failed(findUpdateRegion()))
    return failure();

  // Optimizer state is sharded in every stage; it may only feed the update.
  for (BlockArgument state : states) {
    auto type = cast<RankedTensorType>(state.getType());
    if (type.getRank() == 0)
      continue;
    for (Operation *user : state.getUsers())
      if (!updateOps.contains(user) && user != ret)
        return user->emitOpError("reads optimizer state outside the update; "
                                 "zero-partition cannot shard it");
    state.setType(getShardType(type));
    shards[state] = state;
  }

  // Stage 3 parameters arrive as shards, gathered where the forward and
  // backward read them (before the update is rebuilt on the shards).
  if (stage == 3)
    for (BlockArgument param : params) {
      auto fullType = cast<RankedTensorType>(param.getType());
      if (failed(gatherParameterUses(param, fullType)))
        return failure();
      param.setType(getShardType(fullType));
      shards[param] = param;
    }
  if (failed(rebuildUpdate()))
    return failure();

  // Results: updated parameters (shards in stage 3, gathered back to whole
  // in stages 1-2), state shards, gradient shards, the rank-averaged loss.
  builder.setInsertionPoint(ret);
  SmallVector<Value> operands(ret.getOperands());
  for (unsigned i = 0, e = operands.size(); i < e; ++i) {
    Value value = operands[i];
    if (func.getResultAttr(i, TrainDialect::kGradAttrName)) {
      operands[i] = reduceScatter(value);
      builder.setInsertionPoint(ret);
      continue;
    }
    bool isParam = bool(func.getResultAttr(i, TrainDialect::kParamAttrName));
    bool isState = bool(func.getResultAttr(i, TrainDialect::kStateAttrName));
    if (!isParam && !isState)
      continue;
    auto type = cast<RankedTensorType>(value.getType());
    if (type.getRank() == 0)
      continue;
    FailureOr<Value> shard = getShard(value);
    if (failed(shard))
      return failure();
    builder.setInsertionPoint(ret);
    operands[i] = *shard;
    if (isParam && stage != 3)
      operands[i] = gather(ret.getLoc(), *shard, type).second;
  }
  if (lossIndex)
    if (auto lossType =
            dyn_cast<RankedTensorType>(operands[*lossIndex].getType())) {
      auto start = AllReduceStartOp::create(
          builder, ret.getLoc(), FutureType::get(lossType),
          operands[*lossIndex], comm, ReductionKind::Avg);
      operands[*lossIndex] =
          WaitOp::create(builder, ret.getLoc(), start.getFuture());
    }
  ret->setOperands(operands);
  builder.setInsertionPoint(ret);
  for (Value gradient : releasedAtEnd)
    ReleaseOp::create(builder, ret.getLoc(), gradient);

  // The full-shaped update is dead now.
  for (Operation *op : llvm::reverse(updateOps)) {
    if (!op->use_empty())
      return op->emitOpError("is still used after the update was sharded");
    op->erase();
  }
  func.setType(FunctionType::get(func.getContext(), block.getArgumentTypes(),
                                 ret.getOperandTypes()));
  return success();
}

/// Tags each argument and result whose type partitioning changed with its
/// unpartitioned shape (the trainer initialises and checkpoints tensors
/// whole), and the function with the stage.
void recordFullShapes(func::FuncOp func, FunctionType fullType,
                      unsigned stage) {
  Builder builder(func.getContext());
  auto fullShape = [&](Type type) {
    return builder.getDenseI64ArrayAttr(cast<ShapedType>(type).getShape());
  };
  for (auto [index, type] : llvm::enumerate(fullType.getInputs()))
    if (func.getArgumentTypes()[index] != type)
      func.setArgAttr(index, loom::train::TrainDialect::kFullShapeAttrName,
                      fullShape(type));
  for (auto [index, type] : llvm::enumerate(fullType.getResults()))
    if (func.getResultTypes()[index] != type)
      func.setResultAttr(index, loom::train::TrainDialect::kFullShapeAttrName,
                         fullShape(type));
  func->setAttr(loom::train::TrainDialect::kZeroStageAttrName,
                builder.getI64IntegerAttr(stage));
}

struct ZeroPartitionPass
    : public loom::sharding::impl::ZeroPartitionPassBase<ZeroPartitionPass> {
  using ZeroPartitionPassBase::ZeroPartitionPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (stage < 1 || stage > 3) {
      module.emitError() << "zero-partition: expected stage 1, 2 or 3, got "
                         << static_cast<unsigned>(stage);
      return signalPassFailure();
    }
    if (worldSize < 1) {
      module.emitError() << "zero-partition: expected world-size >= 1, got "
                         << static_cast<int64_t>(worldSize);
      return signalPassFailure();
    }
    std::optional<ReductionKind> kind = symbolizeReductionKind(reduction);
    if (!kind || (*kind != ReductionKind::Avg && *kind != ReductionKind::Sum)) {
      module.emitError() << "zero-partition: expected reduction avg or sum, "
                            "got '"
                         << reduction << "'";
      return signalPassFailure();
    }
    bool found = false;
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      if (!train::getLossResultIndex(func) &&
          !func->hasAttr(loom::train::TrainDialect::kPipelineStageAttrName))
        continue;
      found = true;
      // Sharding changes the step's signature: a caller (the trainer's
      // entry point, made after sharding in loomc) would pass full tensors.
      if (std::optional<SymbolTable::UseRange> uses =
              SymbolTable::getSymbolUses(func, module);
          !uses || !uses->empty()) {
        func.emitError() << "zero-partition: @" << func.getSymName()
                         << " is called in the module; shard a training step "
                            "before anything calls it (loomc makes the "
                            "trainer's entry point after sharding)";
        return signalPassFailure();
      }
      FunctionType fullType = func.getFunctionType();
      if (failed(Partitioner(func, stage, worldSize, *kind).run()))
        return signalPassFailure();
      recordFullShapes(func, fullType, stage);
    }
    if (!found) {
      module.emitError("zero-partition: expected a training step (a function "
                       "with a train.loss result), found none");
      signalPassFailure();
    }
  }
};

} // namespace

//===- MemoryTimeline.cpp - live bytes at every program point -------------===//

#include "loom/Analysis/MemoryTimeline.h"
#include "loom/Analysis/ArenaPacker.h"
#include "loom/Dialect/Coll/CollOps.h"
#include "loom/Dialect/Train/TrainDialect.h"
#include "loom/Dialect/Train/TrainOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Interfaces/DestinationStyleOpInterface.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/Support/xxhash.h"
#include <map>

using namespace mlir;
using namespace loom;

llvm::StringRef loom::stringifyBufferKind(BufferKind kind) {
  switch (kind) {
  case BufferKind::Parameter:
    return "parameters";
  case BufferKind::OptimizerState:
    return "optimizer state";
  case BufferKind::Gradient:
    return "gradients";
  case BufferKind::Activation:
    return "activations";
  case BufferKind::Communication:
    return "communication";
  case BufferKind::Input:
    return "inputs";
  }
  llvm_unreachable("unknown buffer kind");
}

bool loom::isBufferView(Operation *op) {
  return isa<tensor::ExpandShapeOp, tensor::CollapseShapeOp,
             tensor::ExtractSliceOp, tensor::CastOp>(op);
}

/// A fill of a new tensor that several top-level ops take as their init:
/// codegen-memory-plan gives each user a fill of its own, right before it
/// (cloneSharedFills), so its buffer is each user's result, as for a
/// tensor.empty.
static bool isSharedFill(Operation *op) {
  auto fill = dyn_cast<linalg::FillOp>(op);
  if (!fill || !fill.hasPureTensorSemantics() ||
      !fill.getOutputs()[0].getDefiningOp<tensor::EmptyOp>())
    return false;
  Block *block = op->getBlock();
  llvm::SmallPtrSet<Operation *, 4> users;
  for (OpOperand &use : fill->getResult(0).getUses()) {
    Operation *top = block->findAncestorOpInBlock(*use.getOwner());
    if (!top)
      return false;
    if (isa<coll::ReleaseOp>(top))
      continue;
    auto dps = dyn_cast<DestinationStyleOpInterface>(use.getOwner());
    if (top != use.getOwner() || !dps || !dps.isDpsInit(&use))
      return false;
    users.insert(top);
  }
  return users.size() >= 2;
}

static int64_t bytesOf(Value value) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  if (!type)
    return 0;
  return coll::getStaticSizeInBytes(type).value_or(0);
}

bool loom::isIndexTable(linalg::GenericOp op, int64_t maxBytes) {
  if (!op.hasPureTensorSemantics() || op.getNumDpsInputs() != 0 ||
      op.getNumDpsInits() != 1 ||
      !op.getDpsInits()[0].getDefiningOp<tensor::EmptyOp>())
    return false;
  auto type = cast<RankedTensorType>(op.getResult(0).getType());
  std::optional<int64_t> bytes = coll::getStaticSizeInBytes(type);
  return bytes && *bytes <= maxBytes;
}

std::optional<int64_t> loom::getIndexTableKey(linalg::GenericOp table) {
  if (!isIndexTable(table))
    return std::nullopt;
  std::string text;
  llvm::raw_string_ostream os(text);
  DenseMap<Value, unsigned> number;
  auto describe = [&](Value value) {
    if (auto it = number.find(value); it != number.end()) {
      os << "%" << it->second;
    } else if (auto argument = dyn_cast<BlockArgument>(value)) {
      os << "^" << argument.getArgNumber() << ":" << argument.getType();
    } else if (auto constant = value.getDefiningOp<arith::ConstantOp>()) {
      os << constant.getValue();
    } else {
      os << "?" << value.getType();
    }
  };
  table->walk<WalkOrder::PreOrder>([&](Operation *op) {
    os << op->getName() << "(";
    for (Value operand : op->getOperands()) {
      describe(operand);
      os << ",";
    }
    os << ")" << op->getRawDictionaryAttrs() << op->getPropertiesAsAttribute()
       << ":";
    for (Value result : op->getResults()) {
      number.try_emplace(result, number.size());
      os << result.getType() << ",";
    }
    os << ";";
  });
  return int64_t(llvm::xxh3_64bits(text));
}

OpOperand *loom::getTiedInit(OpResult result) {
  Operation *op = result.getOwner();
  unsigned index = result.getResultNumber();
  if (auto dps = dyn_cast<DestinationStyleOpInterface>(op))
    return index < dps.getNumDpsInits() ? dps.getDpsInitOperand(index)
                                        : nullptr;
  if (auto loop = dyn_cast<scf::ForOp>(op))
    return &loop.getInitArgsMutable()[index];
  if (auto footprint = op->getAttrOfType<train::FootprintAttr>(
          train::TrainDialect::kFootprintAttrName)) {
    ArrayRef<int64_t> inPlace = footprint.getInPlace().asArrayRef();
    if (index < inPlace.size() && inPlace[index] >= 0 &&
        inPlace[index] < int64_t(op->getNumOperands()))
      return &op->getOpOperand(inPlace[index]);
  }
  return nullptr;
}

int64_t loom::getScratchBytes(Operation *op) {
  auto footprint = op->getAttrOfType<train::FootprintAttr>(
      train::TrainDialect::kFootprintAttrName);
  return footprint ? footprint.getScratch() : 0;
}

tensor::InsertSliceOp loom::getSliceWriteBack(OpResult result) {
  OpOperand *tied = getTiedInit(result);
  auto extract =
      tied ? tied->get().getDefiningOp<tensor::ExtractSliceOp>() : nullptr;
  if (!extract || !tied->get().hasOneUse() || !result.hasOneUse())
    return nullptr;
  auto insert = dyn_cast<tensor::InsertSliceOp>(*result.getUsers().begin());
  if (!insert || insert.getSource() != result ||
      insert.getDest() != extract.getSource() ||
      insert.getMixedOffsets() != extract.getMixedOffsets() ||
      insert.getMixedSizes() != extract.getMixedSizes() ||
      insert.getMixedStrides() != extract.getMixedStrides())
    return nullptr;
  return insert;
}

/// For `result` written back into a slice of X (getSliceWriteBack) later in
/// the block: X when X has no other use than the slice and the insertion;
/// else null. (X may be a tensor.empty: a tensor joined from parts.)
/// `position` and `index` place the ops.
static Value updatedSubset(OpResult result,
                           const DenseMap<Operation *, unsigned> &position,
                           unsigned index) {
  tensor::InsertSliceOp insert = getSliceWriteBack(result);
  if (!insert || !position.count(insert) || position.lookup(insert) <= index)
    return {};
  Value whole = insert.getDest();
  Operation *extract = getTiedInit(result)->get().getDefiningOp();
  for (Operation *user : whole.getUsers())
    if (user != insert && user != extract)
      return {};
  return whole;
}

/// The results of `func` that update an argument: the same train.param or
/// train.state name and type, returned once, from an elementwise linalg op
/// that writes a new tensor (codegen-update-in-place's candidates, less its
/// check that nothing reads the argument after the update, which the
/// order decides), as train.tied_results spells them.
static DenseI64ArrayAttr predictTiedResults(FunctionOpInterface func) {
  std::map<std::pair<StringRef, StringRef>, unsigned> argOf;
  for (unsigned i = 0; i < func.getNumArguments(); ++i)
    if (auto key = train::getParamOrStateKey(func.getArgAttrDict(i));
        !key.first.empty())
      argOf.emplace(key, i);
  SmallVector<int64_t> tied(func.getNumResults(), -1);
  Operation *terminator = func.getFunctionBody().front().getTerminator();
  auto elementwiseUpdate = [&](Value value) {
    auto op = value.getDefiningOp<linalg::LinalgOp>();
    if (!op || !op.hasPureTensorSemantics() ||
        op.getNumLoops() != op.getNumParallelLoops() ||
        llvm::count(terminator->getOperands(), value) != 1)
      return false;
    OpOperand *init =
        op.getDpsInitOperand(cast<OpResult>(value).getResultNumber());
    return !op.payloadUsesValueFromOperand(init) &&
           init->get().getDefiningOp<tensor::EmptyOp>();
  };
  for (unsigned i = 0; i < func.getNumResults(); ++i) {
    auto it = argOf.find(train::getParamOrStateKey(func.getResultAttrDict(i)));
    if (it != argOf.end() &&
        func.getArgumentTypes()[it->second] == func.getResultTypes()[i] &&
        !llvm::is_contained(tied, int64_t(it->second)) &&
        elementwiseUpdate(terminator->getOperand(i)))
      tied[i] = it->second;
  }
  return DenseI64ArrayAttr::get(func->getContext(), tied);
}

MemoryTimelineOptions MemoryTimelineOptions::asPlanned(Block &block) {
  auto func = dyn_cast_or_null<FunctionOpInterface>(block.getParentOp());
  bool step = func && &func.getFunctionBody().front() == &block &&
              (train::getLossResultIndex(func) ||
               func->hasAttr(train::TrainDialect::kPipelineStageAttrName));
  return step ? MemoryTimelineOptions{true, kArenaAlignment, true, true}
              : MemoryTimelineOptions{};
}

MemoryTimeline::MemoryTimeline(Block &block, MemoryTimelineOptions options) {
  SmallVector<Operation *> ops;
  for (Operation &op : block)
    ops.push_back(&op);
  analyse(block, ops, options);
}

MemoryTimeline::MemoryTimeline(Block &block, ArrayRef<Operation *> ops,
                               MemoryTimelineOptions options) {
  analyse(block, ops, options);
}

void MemoryTimeline::analyse(Block &block, ArrayRef<Operation *> ops,
                             MemoryTimelineOptions options) {
  DenseMap<Operation *, unsigned> position;
  for (auto [index, op] : llvm::enumerate(ops))
    position[op] = index;
  unsigned last = ops.empty() ? 0 : ops.size() - 1;

  // Where each value is last used, by top-level position.
  DenseMap<Value, unsigned> lastUse;
  for (auto [index, op] : llvm::enumerate(ops)) {
    op->walk([&, index = index](Operation *nested) {
      for (Value operand : nested->getOperands())
        lastUse[operand] = std::max<unsigned>(lastUse.lookup(operand), index);
    });
  }

  // Each value maps to the buffer it lives in (views and in-place results
  // share their source's). `aliasEnd` is the last use so far known of any
  // value in each buffer, or of a collective reading it.
  DenseMap<Value, unsigned> bufferOf;
  std::vector<unsigned> aliasEnd;
  auto bind = [&](Value value, unsigned buffer) {
    bufferOf[value] = buffer;
    aliasEnd[buffer] = std::max(aliasEnd[buffer], lastUse.lookup(value));
  };
  auto newBuffer = [&](Value value, unsigned begin, BufferKind kind) {
    buffers.push_back({value, bytesOf(value), begin, begin, kind});
    aliasEnd.push_back(begin);
    bind(value, buffers.size() - 1);
  };
  auto extend = [&](Value value, unsigned at) {
    auto it = bufferOf.find(value);
    if (it != bufferOf.end())
      buffers[it->second].end = std::max(buffers[it->second].end, at);
  };

  // Arguments are live for the whole function. A nested block's arguments
  // (a loop's induction variable and carried values) and the values it
  // reads from outside are owned outside: external.
  auto func = dyn_cast<FunctionOpInterface>(block.getParentOp());
  bool functionBody = func && &func.getFunctionBody().front() == &block;
  ArrayAttr argAttrs = functionBody ? func.getAllArgAttrs() : ArrayAttr();
  auto external = [&](Value value) {
    newBuffer(value, 0, BufferKind::Input);
    buffers.back().end = last;
    buffers.back().external = true;
  };
  if (!functionBody) {
    for (BlockArgument arg : block.getArguments())
      external(arg);
    for (Operation *op : ops)
      for (Value operand : op->getOperands())
        if (operand.getParentBlock() != &block && !bufferOf.count(operand))
          external(operand);
  }
  for (BlockArgument arg : block.getArguments()) {
    if (!functionBody)
      break;
    BufferKind kind = BufferKind::Input;
    auto attrs = argAttrs
                     ? dyn_cast<DictionaryAttr>(argAttrs[arg.getArgNumber()])
                     : DictionaryAttr();
    if (attrs && attrs.contains(train::TrainDialect::kParamAttrName))
      kind = BufferKind::Parameter;
    else if (attrs && attrs.contains(train::TrainDialect::kStateAttrName))
      kind = BufferKind::OptimizerState;
    newBuffer(arg, 0, kind);
    buffers.back().end = last;
  }

  // The index tables codegen-share-index-generics computes once: a train
  // op's (its footprint's) and the step's own table generics, one buffer
  // per table from the first op that computes it to the last use.
  DenseMap<Operation *, unsigned> tableOf;
  if (options.sharedAsPlanned) {
    llvm::MapVector<int64_t, unsigned> tables;
    auto addTo = [&](int64_t key, int64_t bytes, Value value, unsigned index) {
      auto [it, added] = tables.try_emplace(key, buffers.size());
      if (added) {
        buffers.push_back({value, bytes, index, index});
        aliasEnd.push_back(index);
      }
      BufferInterval &table = buffers[it->second];
      table.bytes = std::max(table.bytes, bytes);
      table.end = std::max(table.end, index);
      return it->second;
    };
    for (auto [index, op] : llvm::enumerate(ops)) {
      if (auto generic = dyn_cast<linalg::GenericOp>(op)) {
        if (std::optional<int64_t> key = getIndexTableKey(generic))
          tableOf[op] = addTo(*key, bytesOf(generic.getResult(0)),
                              generic.getResult(0), index);
        continue;
      }
      auto footprint = op->getAttrOfType<train::FootprintAttr>(
          train::TrainDialect::kFootprintAttrName);
      if (!footprint || !footprint.getTables() || op->getNumResults() == 0)
        continue;
      ArrayRef<int64_t> pairs = footprint.getTables().asArrayRef();
      for (size_t i = 0; i + 1 < pairs.size(); i += 2)
        addTo(pairs[i], pairs[i + 1], op->getResult(0), index);
    }
  }

  for (auto [index, op] : llvm::enumerate(ops)) {
    // A collective reads its input until its wait.
    if (auto start = dyn_cast<coll::CollectiveOpInterface>(op))
      if (Operation *wait = start.getWait(); wait && position.count(wait))
        if (auto it = bufferOf.find(start.getInput()); it != bufferOf.end())
          aliasEnd[it->second] = std::max(aliasEnd[it->second], position[wait]);
    if (auto it = tableOf.find(op); it != tableOf.end()) {
      bind(op->getResult(0), it->second);
      continue;
    }
    for (Value result : op->getResults()) {
      if (!isa<RankedTensorType>(result.getType()))
        continue;
      if (isBufferView(op) && bufferOf.count(op->getOperand(0))) {
        bind(result, bufferOf[op->getOperand(0)]);
        continue;
      }
      if (isa<tensor::EmptyOp>(op) ||
          (options.sharedAsPlanned && isSharedFill(op))) {
        newBuffer(result, index, BufferKind::Activation);
        buffers.back().bytes = 0;
        continue;
      }
      if (auto wait = dyn_cast<coll::WaitOp>(op)) {
        // The collective writes its result from the start.
        coll::CollectiveOpInterface start = wait.getStart();
        unsigned begin =
            start && position.count(start) ? position[start] : unsigned(index);
        bool gathersParam =
            start && start.getKind() == coll::CollectiveKind::AllGather &&
            bufferOf.count(start.getInput()) &&
            buffers[bufferOf[start.getInput()]].kind == BufferKind::Parameter;
        newBuffer(result, begin,
                  gathersParam ? BufferKind::Parameter
                               : BufferKind::Communication);
        // The collective writes into it until the wait, used or not.
        buffers.back().end = index;
        continue;
      }
      // An op writes into its init when no alias of the init's buffer is
      // used later. Function arguments, values from outside a loop body
      // and tensor.empty (0 bytes) are never written in place; a loop's
      // carried arguments are.
      if (OpOperand *tied = getTiedInit(cast<OpResult>(result))) {
        auto it = bufferOf.find(tied->get());
        auto writable = [&](const BufferInterval &buffer) {
          if (buffer.external)
            return isa<BlockArgument>(buffer.value) &&
                   cast<BlockArgument>(buffer.value).getOwner() == &block;
          return !isa<BlockArgument>(buffer.value);
        };
        if (it != bufferOf.end() && aliasEnd[it->second] <= index &&
            writable(buffers[it->second]) &&
            buffers[it->second].bytes >= bytesOf(result)) {
          bind(result, it->second);
          continue;
        }
        // A subset updated in place: the init is a slice of X, and the
        // result's only use inserts it back into X at the same place (as
        // one-shot bufferization does for matching extract/insert pairs).
        if (Value whole =
                updatedSubset(cast<OpResult>(result), position, index)) {
          auto found = bufferOf.find(whole);
          if (found != bufferOf.end() && writable(buffers[found->second])) {
            // X is a tensor.empty: its buffer begins at the first slice
            // written into it (the memory plan pins the empty tensor).
            BufferInterval &buffer = buffers[found->second];
            if (buffer.bytes == 0 && whole.getDefiningOp<tensor::EmptyOp>()) {
              buffer.bytes = bytesOf(whole);
              buffer.begin = index;
            }
            if (buffer.bytes >= bytesOf(result) &&
                aliasEnd[found->second] <=
                    position.lookup(*result.getUsers().begin())) {
              bind(result, found->second);
              continue;
            }
          }
        }
      }
      newBuffer(result, index, BufferKind::Activation);
    }
  }
  // Lifetimes: to the last use of any alias, a collective's input to its
  // wait, returned values to the end; releases end buffers.
  for (auto &[value, buffer] : bufferOf)
    if (lastUse.count(value))
      buffers[buffer].end = std::max(buffers[buffer].end, lastUse[value]);
  for (auto [index, op] : llvm::enumerate(ops)) {
    if (auto start = dyn_cast<coll::CollectiveOpInterface>(op)) {
      if (Operation *wait = start.getWait(); wait && position.count(wait))
        extend(start.getInput(), position[wait]);
      if (start.getKind() == coll::CollectiveKind::ReduceScatter &&
          bufferOf.count(start.getInput()))
        buffers[bufferOf[start.getInput()]].kind = BufferKind::Gradient;
    }
    if (op->hasTrait<OpTrait::ReturnLike>())
      for (Value operand : op->getOperands())
        extend(operand, last);
  }
  for (auto [index, op] : llvm::enumerate(ops)) {
    auto release = dyn_cast<coll::ReleaseOp>(op);
    if (!release || !bufferOf.count(release.getBuffer()))
      continue;
    BufferInterval &buffer = buffers[bufferOf[release.getBuffer()]];
    unsigned end = index;
    // The input of a collective is freed when the collective is done.
    for (Operation *user : release.getBuffer().getUsers())
      if (auto start = dyn_cast<coll::CollectiveOpInterface>(user))
        if (start.getInput() == release.getBuffer())
          if (Operation *wait = start.getWait(); wait && position.count(wait))
            end = std::max(end, position[wait]);
    buffer.end = end;
  }
  if (options.callerOwnedResults && !ops.empty() &&
      ops.back()->hasTrait<OpTrait::ReturnLike>()) {
    // Results codegen-update-in-place writes into their arguments' buffers.
    auto tied = block.getParentOp()
                    ? block.getParentOp()->getAttrOfType<DenseI64ArrayAttr>(
                          loom::train::TrainDialect::kTiedResultsAttrName)
                    : DenseI64ArrayAttr();
    if (!tied && options.predictTies && functionBody)
      tied = predictTiedResults(func);
    for (auto [index, result] : llvm::enumerate(ops.back()->getOperands())) {
      auto it = bufferOf.find(result);
      if (it == bufferOf.end() || bytesOf(result) == 0)
        continue;
      BufferInterval &buffer = buffers[it->second];
      if (tied && index < size_t(tied.size()) && tied[index] >= 0) {
        buffer.external = true;
        continue;
      }
      // Written straight into the caller's buffer: a new buffer whose op's
      // init is a tensor.empty, returned once.
      auto produced = dyn_cast<OpResult>(buffer.value);
      OpOperand *init = produced ? getTiedInit(produced) : nullptr;
      if (!buffer.callerOwned && init &&
          init->get().getDefiningOp<tensor::EmptyOp>() &&
          buffer.bytes == bytesOf(result)) {
        buffer.callerOwned = true;
        buffer.begin = 0;
        buffer.end = last;
        continue;
      }
      // Otherwise copied into it at the end.
      BufferKind kind = buffer.kind;
      buffers.push_back({result, bytesOf(result), 0, last, kind, true});
    }
  }

  // A loop body's own peak is live while the loop runs, and so is what a
  // train op's lowering holds beyond its operands and results.
  transient.assign(ops.size(), 0);
  for (auto [index, op] : llvm::enumerate(ops))
    if (auto loop = dyn_cast<scf::ForOp>(op))
      transient[index] =
          MemoryTimeline(*loop.getBody(), {false, options.alignment, false,
                                           options.sharedAsPlanned})
              .getPeakBytes();
    else
      transient[index] = getScratchBytes(op);

  // Sweep: +bytes at begin, -bytes after end.
  auto charged = [&](const BufferInterval &buffer) -> int64_t {
    if (buffer.external)
      return 0;
    if (buffer.callerOwned || isa<BlockArgument>(buffer.value))
      return buffer.bytes;
    int64_t align = std::max<int64_t>(1, options.alignment);
    return (buffer.bytes + align - 1) / align * align;
  };
  std::vector<int64_t> delta(ops.size() + 1, 0);
  for (const BufferInterval &buffer : buffers) {
    if (buffer.bytes == 0)
      continue;
    delta[buffer.begin] += charged(buffer);
    delta[buffer.end + 1] -= charged(buffer);
  }
  live.assign(ops.size(), 0);
  int64_t current = 0;
  for (unsigned i = 0; i < ops.size(); ++i) {
    current += delta[i];
    live[i] = current + transient[i];
    if (live[i] > peakBytes) {
      peakBytes = live[i];
      peakPosition = i;
      peakOp = ops[i];
    }
  }
  for (const BufferInterval &buffer : buffers)
    if (buffer.begin <= peakPosition && peakPosition <= buffer.end)
      peakBreakdown[unsigned(buffer.kind)] += charged(buffer);
  if (!ops.empty())
    peakBreakdown[unsigned(BufferKind::Activation)] += transient[peakPosition];
}

//===----------------------------------------------------------------------===//
// MemoryTracker
//===----------------------------------------------------------------------===//

/// The number of top-level ops of `block` that use `value`.
static int64_t countTopLevelUsers(Block &block, Value value) {
  llvm::SmallPtrSet<Operation *, 8> users;
  for (Operation *user : value.getUsers())
    if (Operation *top = block.findAncestorOpInBlock(*user))
      users.insert(top);
  return users.size();
}

MemoryTracker::MemoryTracker(Block &block) : block(block) {
  for (BlockArgument arg : block.getArguments()) {
    // Arguments are pinned (the extra 1): live for the whole function.
    buffers.push_back({bytesOf(arg), 1});
    addUsers(buffers.size() - 1, arg);
    live += bytesOf(arg);
  }
  peak = live;
}

void MemoryTracker::addUsers(unsigned buffer, Value value) {
  bufferOf[value] = buffer;
  buffers[buffer].remaining += countTopLevelUsers(block, value);
}

SmallVector<std::pair<unsigned, int64_t>>
MemoryTracker::getReadBuffers(Operation *op) const {
  SmallVector<std::pair<unsigned, int64_t>> reads;
  llvm::SmallPtrSet<Value, 8> seen;
  op->walk([&](Operation *nested) {
    for (Value operand : nested->getOperands()) {
      // A value defined inside `op` is not one of its reads.
      if (operand.getParentBlock() != &block || !seen.insert(operand).second)
        continue;
      auto it = bufferOf.find(operand);
      if (it == bufferOf.end())
        continue;
      auto *existing = llvm::find_if(
          reads, [&](auto &entry) { return entry.first == it->second; });
      if (existing != reads.end())
        ++existing->second;
      else
        reads.push_back({it->second, 1});
    }
  });
  return reads;
}

std::optional<unsigned> MemoryTracker::getInPlaceBuffer(OpResult result) const {
  if (!isa<RankedTensorType>(result.getType()))
    return std::nullopt;
  OpOperand *tied = getTiedInit(result);
  if (!tied)
    return std::nullopt;
  Value init = tied->get();
  auto it = bufferOf.find(init);
  if (it == bufferOf.end() || isa<BlockArgument>(init))
    return std::nullopt;
  const Buffer &buffer = buffers[it->second];
  // The init dies here if this op holds all its remaining uses.
  int64_t usesHere = 0;
  for (auto [index, uses] : getReadBuffers(result.getOwner()))
    if (index == it->second)
      usesHere = uses;
  if (buffer.remaining != usesHere || buffer.bytes < bytesOf(result))
    return std::nullopt;
  return it->second;
}

SmallVector<std::optional<unsigned>>
MemoryTracker::getInPlaceBuffers(Operation *op) const {
  SmallVector<std::optional<unsigned>> inPlace;
  for (OpResult result : op->getResults()) {
    std::optional<unsigned> buffer = getInPlaceBuffer(result);
    // A buffer takes one result (the timeline's rule: the first result
    // bound to it extends its life past this op).
    if (buffer && llvm::is_contained(inPlace, buffer))
      buffer = std::nullopt;
    inPlace.push_back(buffer);
  }
  return inPlace;
}

MemoryTracker::Effect MemoryTracker::getEffect(Operation *op) const {
  Effect effect;
  SmallVector<std::optional<unsigned>> inPlace = getInPlaceBuffers(op);
  auto start = dyn_cast<coll::CollectiveOpInterface>(op);
  if (start) {
    effect.allocated =
        coll::getStaticSizeInBytes(start.getResultType()).value_or(0);
  } else if (!isBufferView(op) && !isa<tensor::EmptyOp, coll::WaitOp>(op)) {
    for (OpResult result : op->getResults()) {
      if (inPlace[result.getResultNumber()])
        continue;
      effect.allocated += bytesOf(result);
      // A result nobody reads is freed as soon as the op is done.
      if (countTopLevelUsers(block, result) == 0)
        effect.freed += bytesOf(result);
    }
  }
  if (auto wait = dyn_cast<coll::WaitOp>(op)) {
    coll::CollectiveOpInterface waited = wait.getStart();
    auto it = waited ? pendingResult.find(waited) : pendingResult.end();
    if (it != pendingResult.end() &&
        countTopLevelUsers(block, wait.getResult()) == 0)
      effect.freed += buffers[it->second].bytes;
    // The collective's input is released by its wait.
    if (waited)
      if (auto input = bufferOf.find(waited.getInput());
          input != bufferOf.end() && buffers[input->second].remaining == 1)
        effect.freed += buffers[input->second].bytes;
  }
  for (auto [index, uses] : getReadBuffers(op)) {
    const Buffer &buffer = buffers[index];
    // A started collective pins its input; an in-place result keeps it.
    bool pinned =
        start && start.getInput() && bufferOf.lookup(start.getInput()) == index;
    if (buffer.remaining == uses && !pinned &&
        !llvm::is_contained(inPlace, std::optional<unsigned>(index)))
      effect.freed += buffer.bytes;
  }
  return effect;
}

int64_t MemoryTracker::place(Operation *op) {
  Effect effect = getEffect(op);
  SmallVector<std::optional<unsigned>> inPlace = getInPlaceBuffers(op);
  auto start = dyn_cast<coll::CollectiveOpInterface>(op);
  SmallVector<std::pair<unsigned, int64_t>> reads = getReadBuffers(op);
  // Buffers this op binds a result to; freed below if nothing reads them.
  SmallVector<unsigned> bound;

  if (start) {
    pendingResult[op] = buffers.size();
    // Pinned by its wait until the wait binds it.
    buffers.push_back({effect.allocated, 1});
    // The collective reads its input until its wait.
    if (auto it = bufferOf.find(start.getInput()); it != bufferOf.end())
      ++buffers[it->second].remaining;
  } else if (auto wait = dyn_cast<coll::WaitOp>(op)) {
    coll::CollectiveOpInterface waited = wait.getStart();
    auto it = waited ? pendingResult.find(waited) : pendingResult.end();
    if (it != pendingResult.end()) {
      unsigned buffer = it->second;
      pendingResult.erase(it);
      --buffers[buffer].remaining;
      addUsers(buffer, wait.getResult());
      bound.push_back(buffer);
      if (auto input = bufferOf.find(waited.getInput());
          input != bufferOf.end()) {
        --buffers[input->second].remaining;
        bound.push_back(input->second);
      }
    }
  } else {
    for (OpResult result : op->getResults()) {
      if (!isa<RankedTensorType>(result.getType()))
        continue;
      if (isBufferView(op) && bufferOf.count(op->getOperand(0))) {
        addUsers(bufferOf[op->getOperand(0)], result);
        continue;
      }
      if (std::optional<unsigned> buffer = inPlace[result.getResultNumber()]) {
        addUsers(*buffer, result);
        continue;
      }
      unsigned buffer = buffers.size();
      buffers.push_back({isa<tensor::EmptyOp>(op) ? 0 : bytesOf(result), 0});
      addUsers(buffer, result);
      bound.push_back(buffer);
    }
  }
  live += effect.allocated;
  int64_t during = live + getScratchBytes(op);
  peak = std::max(peak, during);

  // This op's uses are done: free what nothing else needs.
  auto freeIfDead = [&](unsigned index) {
    Buffer &buffer = buffers[index];
    if (buffer.remaining == 0 && buffer.bytes) {
      live -= buffer.bytes;
      buffer.bytes = 0;
    }
  };
  for (auto [index, uses] : reads) {
    buffers[index].remaining -= uses;
    freeIfDead(index);
  }
  for (unsigned index : bound)
    freeIfDead(index);
  return during;
}

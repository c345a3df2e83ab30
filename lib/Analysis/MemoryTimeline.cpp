//===- MemoryTimeline.cpp - live bytes at every program point -------------===//

#include "loom/Analysis/MemoryTimeline.h"
#include "loom/Dialect/Coll/CollOps.h"
#include "loom/Dialect/Train/TrainDialect.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Interfaces/DestinationStyleOpInterface.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

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

static bool isView(Operation *op) {
  return isa<tensor::ExpandShapeOp, tensor::CollapseShapeOp,
             tensor::ExtractSliceOp, tensor::CastOp>(op);
}

static int64_t bytesOf(Value value) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  if (!type)
    return 0;
  return coll::getStaticSizeInBytes(type).value_or(0);
}

MemoryTimeline::MemoryTimeline(Block &block) {
  SmallVector<Operation *> ops;
  for (Operation &op : block)
    ops.push_back(&op);
  analyse(block, ops);
}

MemoryTimeline::MemoryTimeline(Block &block, ArrayRef<Operation *> ops) {
  analyse(block, ops);
}

void MemoryTimeline::analyse(Block &block, ArrayRef<Operation *> ops) {
  DenseMap<Operation *, unsigned> position;
  for (auto [index, op] : llvm::enumerate(ops))
    position[op] = index;
  unsigned last = ops.empty() ? 0 : ops.size() - 1;

  // Each value maps to the buffer it lives in (views and in-place results
  // share their source's).
  DenseMap<Value, unsigned> bufferOf;
  auto newBuffer = [&](Value value, unsigned begin, BufferKind kind) {
    bufferOf[value] = buffers.size();
    buffers.push_back({value, bytesOf(value), begin, begin, kind});
  };
  auto extend = [&](Value value, unsigned at) {
    auto it = bufferOf.find(value);
    if (it != bufferOf.end())
      buffers[it->second].end = std::max(buffers[it->second].end, at);
  };

  // Arguments are live for the whole function.
  auto func = dyn_cast<FunctionOpInterface>(block.getParentOp());
  for (BlockArgument arg : block.getArguments()) {
    BufferKind kind = BufferKind::Input;
    if (func && func.getArgAttr(arg.getArgNumber(),
                                train::TrainDialect::kParamAttrName))
      kind = BufferKind::Parameter;
    else if (func && func.getArgAttr(arg.getArgNumber(),
                                     train::TrainDialect::kStateAttrName))
      kind = BufferKind::OptimizerState;
    newBuffer(arg, 0, kind);
    buffers.back().end = last;
  }

  // Where each value is last used, by top-level position.
  DenseMap<Value, unsigned> lastUse;
  for (auto [index, op] : llvm::enumerate(ops)) {
    op->walk([&, index = index](Operation *nested) {
      for (Value operand : nested->getOperands())
        lastUse[operand] = std::max<unsigned>(lastUse.lookup(operand), index);
    });
  }

  for (auto [index, op] : llvm::enumerate(ops)) {
    for (Value result : op->getResults()) {
      if (!isa<RankedTensorType>(result.getType()))
        continue;
      if (isView(op) && bufferOf.count(op->getOperand(0))) {
        bufferOf[result] = bufferOf[op->getOperand(0)];
        continue;
      }
      if (isa<tensor::EmptyOp>(op)) {
        bufferOf[result] = buffers.size();
        buffers.push_back({result, 0, unsigned(index), unsigned(index),
                           BufferKind::Activation});
        continue;
      }
      if (auto wait = dyn_cast<coll::WaitOp>(op)) {
        // The collective writes its result from the start.
        coll::CollectiveOpInterface start = wait.getStart();
        unsigned begin = start && position.count(start)
                             ? position[start]
                             : unsigned(index);
        bool gathersParam =
            start && start.getKind() == coll::CollectiveKind::AllGather &&
            bufferOf.count(start.getInput()) &&
            buffers[bufferOf[start.getInput()]].kind == BufferKind::Parameter;
        newBuffer(result, begin,
                  gathersParam ? BufferKind::Parameter
                               : BufferKind::Communication);
        continue;
      }
      // A destination-style op writes into an init that dies here.
      if (auto dps = dyn_cast<DestinationStyleOpInterface>(op)) {
        unsigned resultIndex = cast<OpResult>(result).getResultNumber();
        Value init = dps.getDpsInits()[resultIndex];
        auto it = bufferOf.find(init);
        // Arguments and tensor.empty (0 bytes) are never written in place.
        if (it != bufferOf.end() && lastUse.lookup(init) <= index &&
            !isa<BlockArgument>(init) &&
            buffers[it->second].bytes >= bytesOf(result)) {
          bufferOf[result] = it->second;
          continue;
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

  // Sweep: +bytes at begin, -bytes after end.
  std::vector<int64_t> delta(ops.size() + 1, 0);
  for (const BufferInterval &buffer : buffers) {
    if (buffer.bytes == 0)
      continue;
    delta[buffer.begin] += buffer.bytes;
    delta[buffer.end + 1] -= buffer.bytes;
  }
  live.assign(ops.size(), 0);
  int64_t current = 0;
  for (unsigned i = 0; i < ops.size(); ++i) {
    current += delta[i];
    live[i] = current;
    if (current > peakBytes) {
      peakBytes = current;
      peakPosition = i;
      peakOp = ops[i];
    }
  }
  for (const BufferInterval &buffer : buffers)
    if (buffer.begin <= peakPosition && peakPosition <= buffer.end)
      peakBreakdown[unsigned(buffer.kind)] += buffer.bytes;
}

//===- StepGraph.cpp - what train-remat sees of a training step -----------===//

#include "StepGraph.h"

#include "loom/Dialect/Coll/CollDialect.h"
#include "loom/Dialect/Coll/CollOps.h"
#include "loom/Dialect/Train/TrainDialect.h"
#include "loom/Dialect/Train/TrainOps.h"
#include "loom/Utils/ReadValues.h"
#include "loom/Utils/ShapeChecks.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/IR/LinalgInterfaces.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/bit.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace loom;
using namespace loom::remat;

namespace {

bool isView(Operation *op) {
  if (auto slice = dyn_cast<tensor::ExtractSliceOp>(op))
    return slice->getNumOperands() == 1;
  return isa<tensor::ExpandShapeOp, tensor::CollapseShapeOp, tensor::CastOp>(
      op);
}

/// Free to recreate and never worth saving: reused or cloned as they are.
bool isFree(Operation *op) {
  if (isa<tensor::EmptyOp, arith::ConstantOp>(op))
    return true;
  if (auto fill = dyn_cast<linalg::FillOp>(op))
    return fill.getOutputs()[0].getDefiningOp<tensor::EmptyOp>() &&
           fill.getInputs()[0].getDefiningOp<arith::ConstantOp>();
  return false;
}

bool isCollective(Operation *op) {
  // Ops of unregistered dialects have no Dialect.
  return isa_and_nonnull<coll::CollDialect>(op->getDialect());
}

bool isLoss(Operation *op) {
  return isa<train::CrossEntropyOp, train::LinearCrossEntropyOp>(op);
}

bool isHeavy(Operation *op) {
  // A runtime kernel is a fused attention or loss (train-fuse-attention).
  if (isa<train::AttentionOp, train::LinearCrossEntropyOp,
          train::CallKernelOp>(op))
    return true;
  auto linalgOp = dyn_cast<linalg::LinalgOp>(op);
  return linalgOp && linalg::isaContractionOpInterface(linalgOp);
}

Value stripViews(Value value) {
  while (Operation *def = value.getDefiningOp()) {
    if (!isView(def))
      break;
    value = def->getOperand(0);
  }
  return value;
}

int64_t bytesOf(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  return tensor ? loom::getStaticSizeInBytes(tensor).value_or(0) : 0;
}

/// The gathered block argument a wait's result is, if it is one.
BlockArgument getGatheredArgument(Value value) {
  auto wait = value.getDefiningOp<coll::WaitOp>();
  if (!wait)
    return {};
  auto start = dyn_cast_or_null<coll::AllGatherStartOp>(
      wait.getFuture().getDefiningOp());
  if (!start)
    return {};
  return dyn_cast<BlockArgument>(start.getInput());
}

/// The `train.param` group ("layers.3") of a parameter, "" for a parameter
/// outside any numbered group, nullopt for anything else.
std::optional<std::string> getGroupOf(func::FuncOp func, Value value) {
  value = stripViews(value);
  BlockArgument argument = getGatheredArgument(value);
  if (!argument)
    argument = dyn_cast<BlockArgument>(value);
  if (!argument || argument.getOwner()->getParentOp() != func)
    return std::nullopt;
  auto name = func.getArgAttrOfType<StringAttr>(
      argument.getArgNumber(), train::TrainDialect::kParamAttrName);
  if (!name)
    return std::nullopt;
  return train::getParamGroup(name.getValue());
}

} // namespace

int StepGraph::getNodeOf(Value value) const {
  value = stripViews(value);
  Operation *def = value.getDefiningOp();
  if (!def)
    return -1;
  auto it = nodeOf.find(def);
  return it == nodeOf.end() ? -1 : int(it->second);
}

FailureOr<StepGraph> StepGraph::build(func::FuncOp func,
                                      const CostModel &model,
                                      unsigned segment) {
  assert(segment >= 1 && "a segment holds at least one group");
  std::optional<unsigned> lossIndex = train::getLossResultIndex(func);
  if (!lossIndex)
    return emitError(func.getLoc(),
                     "train-remat: expected a training step (a function "
                     "with a train.loss result)");
  if (!func.getBody().hasOneBlock())
    return emitError(func.getLoc(),
                     "train-remat: expected a step of one block");
  Block &entry = func.getBody().front();
  Operation *last = entry.empty() ? nullptr : &entry.back();
  if (!isa_and_nonnull<func::ReturnOp>(last))
    return emitError(func.getLoc())
           << "train-remat: expected the step to end in func.return, found '"
           << (last ? last->getName().getStringRef() : "nothing") << "'";
  StepGraph graph;
  graph.func = func;
  graph.block = &func.getBody().front();
  Block &block = *graph.block;
  Operation *terminator = block.getTerminator();

  // The forward: what the loss depends on.
  SmallVector<Operation *> worklist;
  auto visit = [&](Value value) {
    Operation *def = value.getDefiningOp();
    if (!def)
      return;
    def = block.findAncestorOpInBlock(*def);
    if (def && graph.forward.insert(def).second)
      worklist.push_back(def);
  };
  visit(terminator->getOperand(*lossIndex));
  while (!worklist.empty())
    for (Value value : getReadValues(worklist.pop_back_val()))
      visit(value);

  // Groups in order of first appearance; each forward op's group.
  llvm::StringMap<int> layerOfGroup;
  DenseMap<Operation *, int> groupOf;
  int current = kPrologue;
  for (Operation &op : block) {
    if (!graph.forward.contains(&op))
      continue;
    for (Value operand : op.getOperands()) {
      std::optional<std::string> group = getGroupOf(func, operand);
      if (!group)
        continue;
      if (group->empty()) {
        if (current != kPrologue)
          current = kEpilogue;
        continue;
      }
      // A numbered group read after the epilogue began is the epilogue's.
      if (current != kEpilogue)
        current = layerOfGroup.try_emplace(*group, int(layerOfGroup.size()))
                      .first->second;
    }
    groupOf[&op] = current;
  }
  // Runs of `segment` groups are the solvers' layers. A run of every group
  // takes the prologue and the epilogue too: the whole forward is one run,
  // whose options reach down to recomputing all of it from the step's
  // inputs (what PyTorch's activation_memory_budget=0 does).
  if (segment > 1 && segment >= layerOfGroup.size())
    for (auto &[op, layer] : groupOf)
      layer = 0;
  else if (segment > 1)
    for (auto &[op, layer] : groupOf)
      if (layer >= 0 && layer != kEpilogue)
        layer /= int(segment);
  graph.layers.resize((layerOfGroup.size() + segment - 1) / segment);

  // The backward's gathers, first per parameter, whose start may move up
  // to any point of the backward (it reads arguments and forward values).
  DenseMap<BlockArgument, Operation *> backwardWaitOf;
  for (Operation &op : block)
    if (auto wait = dyn_cast<coll::WaitOp>(&op))
      if (!graph.forward.contains(&op))
        if (BlockArgument argument = getGatheredArgument(wait.getResult())) {
          Operation *start = wait.getFuture().getDefiningOp();
          bool movable = llvm::all_of(start->getOperands(), [&](Value v) {
            Operation *def = v.getDefiningOp();
            return !def || graph.forward.contains(def) ||
                   isa<coll::CommWorldOp>(def);
          });
          if (movable)
            backwardWaitOf.try_emplace(argument, &op);
        }

  // Nodes.
  for (Operation &op : block) {
    if (!graph.forward.contains(&op) || isView(&op) || isFree(&op) ||
        isCollective(&op) || op.getNumResults() == 0)
      continue;
    Node node;
    node.op = &op;
    node.layer = groupOf.lookup(&op);
    for (Value result : op.getResults())
      node.bytes += bytesOf(result.getType());
    node.seconds = model.getComputeTime(&op);
    node.heavy = isHeavy(&op);
    node.recomputable = true;
    if (!isPure(&op))
      node.reason = "it has side effects";
    else if (isLoss(&op))
      node.reason = "it is the loss";
    for (Value value : getReadValues(&op)) {
      Value source = stripViews(value);
      Operation *def = source.getDefiningOp();
      if (!def || isFree(def))
        continue;
      if (auto it = graph.nodeOf.find(def); it != graph.nodeOf.end()) {
        if (!llvm::is_contained(node.operands, it->second))
          node.operands.push_back(it->second);
        continue;
      }
      if (BlockArgument argument = getGatheredArgument(source)) {
        if (Operation *wait = backwardWaitOf.lookup(argument)) {
          graph.backwardGather[source] = wait;
          continue;
        }
        node.reason = "the backward does not gather a parameter it reads";
        continue;
      }
      if (node.reason.empty())
        node.reason = "it reads " + def->getName().getStringRef().str();
    }
    node.recomputable = node.reason.empty();
    graph.nodeOf[&op] = graph.nodes.size();
    graph.nodes.push_back(std::move(node));
  }

  // Needed by the backward; interfaces between groups; returned values.
  for (Node &node : graph.nodes) {
    SmallVector<Value> values(node.op->getResults());
    while (!values.empty()) {
      Value value = values.pop_back_val();
      for (OpOperand &use : value.getUses()) {
        Operation *user = block.findAncestorOpInBlock(*use.getOwner());
        if (!user)
          continue;
        if (user == terminator) {
          node.recomputable = false;
          node.reason = "the step returns it";
        } else if (!graph.forward.contains(user)) {
          node.needed = true;
        } else if (isView(user)) {
          values.append(user->result_begin(), user->result_end());
        } else if (groupOf.lookup(user) != node.layer) {
          node.interface = true;
        }
      }
    }
  }
  for (auto [index, node] : llvm::enumerate(graph.nodes))
    if (node.layer >= 0 && node.layer != kEpilogue)
      graph.layers[node.layer].push_back(index);

  // Layer classes: the layer's nodes, their ops, types, attributes and how
  // they connect, parameters named within the group.
  llvm::StringMap<unsigned> classOf;
  for (auto [layer, members] : llvm::enumerate(graph.layers)) {
    std::string signature;
    llvm::raw_string_ostream os(signature);
    DenseMap<unsigned, unsigned> local;
    for (unsigned index : members)
      local[index] = local.size();
    for (unsigned index : members) {
      const Node &node = graph.nodes[index];
      // Times too: with a profile, layers alike in shape differ in them.
      os << node.op->getName() << node.op->getAttrDictionary()
         << node.op->getResultTypes() << node.needed << node.recomputable
         << node.interface << llvm::format_hex(llvm::bit_cast<uint64_t>(node.seconds), 18);
      for (Region &region : node.op->getRegions())
        region.walk([&](Operation *nested) { os << nested->getName(); });
      for (unsigned operand : node.operands)
        os << (local.count(operand) ? "n" + std::to_string(local[operand])
                                    : std::string("x"));
      os << ";";
    }
    auto [it, inserted] = classOf.try_emplace(signature, graph.numClasses);
    if (inserted)
      ++graph.numClasses;
    graph.layerClass.push_back(it->second);
  }
  return graph;
}

KeepSet loom::remat::keepAll(const StepGraph &graph) {
  return KeepSet(graph.nodes.size(), true);
}

bool loom::remat::getRecomputed(const StepGraph &graph, const KeepSet &keep,
                                llvm::BitVector &recomputed) {
  recomputed = llvm::BitVector(graph.nodes.size());
  SmallVector<unsigned> worklist;
  for (auto [index, node] : llvm::enumerate(graph.nodes))
    if (node.needed && !keep[index]) {
      recomputed.set(index);
      worklist.push_back(index);
    }
  while (!worklist.empty()) {
    const Node &node = graph.nodes[worklist.pop_back_val()];
    if (!node.recomputable)
      return false;
    for (unsigned operand : node.operands)
      if (!keep[operand] && !recomputed[operand]) {
        recomputed.set(operand);
        worklist.push_back(operand);
      }
  }
  return true;
}

unsigned loom::remat::rewrite(const StepGraph &graph, const KeepSet &keep) {
  llvm::BitVector recomputed;
  if (!getRecomputed(graph, keep, recomputed) || recomputed.none())
    return 0;
  Block &block = *graph.block;
  SmallVector<Operation *> backward;
  for (Operation &op : block)
    if (!graph.forward.contains(&op) && &op != block.getTerminator())
      backward.push_back(&op);

  IRMapping mapping;
  unsigned cloned = 0;
  // The backward value standing for forward value `value`, created before
  // `before` if need be.
  std::function<Value(Value, Operation *)> materialize =
      [&](Value value, Operation *before) -> Value {
    if (Value mapped = mapping.lookupOrNull(value))
      return mapped;
    Operation *def = value.getDefiningOp();
    if (!def || !graph.forward.contains(def))
      return value;
    if (auto it = graph.backwardGather.find(value);
        it != graph.backwardGather.end()) {
      // Move the backward's gather of the parameter up to the clone.
      Operation *wait = it->second;
      if (before->isBeforeInBlock(wait)) {
        Operation *start = cast<coll::WaitOp>(wait).getFuture().getDefiningOp();
        if (before->isBeforeInBlock(start))
          start->moveBefore(before);
        wait->moveBefore(before);
      }
      mapping.map(value, wait->getResult(0));
      return wait->getResult(0);
    }
    bool clone = false;
    if (isView(def)) {
      clone = materialize(def->getOperand(0), before) != def->getOperand(0);
    } else if (isa<linalg::FillOp>(def) && isFree(def)) {
      // A fresh buffer next to the clone that fills it, rather than the
      // forward's, kept alive into the backward.
      clone = true;
    } else if (auto it = graph.nodeOf.find(def); it != graph.nodeOf.end()) {
      clone = recomputed[it->second];
    }
    if (!clone)
      return value;
    IRMapping operands;
    for (Value read : getReadValues(def))
      operands.map(read, materialize(read, before));
    OpBuilder builder(before);
    Operation *copy = builder.clone(*def, operands);
    ++cloned;
    for (auto [from, to] : llvm::zip(def->getResults(), copy->getResults()))
      mapping.map(from, to);
    return mapping.lookup(value);
  };

  for (Operation *op : backward) {
    SmallVector<OpOperand *> uses;
    op->walk([&](Operation *nested) {
      for (OpOperand &operand : nested->getOpOperands())
        if (Operation *def = operand.get().getDefiningOp())
          if (def->getBlock() == &block && graph.forward.contains(def))
            uses.push_back(&operand);
    });
    for (OpOperand *use : uses) {
      int node = graph.getNodeOf(use->get());
      // A zero-filled init the backward shares with the forward gets its
      // own fill too: the forward's then dies with its last forward use
      // instead of living through the step.
      Operation *def = use->get().getDefiningOp();
      if ((node >= 0 && recomputed[node]) ||
          (isa<linalg::FillOp>(def) && isFree(def)))
        use->set(materialize(use->get(), op));
    }
  }
  // A backward gather now read by clones stays gathered until its last
  // reader: its release moves after it when it was before.
  // (In block order, so that releases moved after the same op keep a
  // deterministic order.)
  llvm::SmallPtrSet<Operation *, 16> gathered;
  for (auto &entry : graph.backwardGather)
    gathered.insert(entry.second);
  SmallVector<Operation *> waits;
  for (Operation &op : block)
    if (gathered.contains(&op))
      waits.push_back(&op);
  for (Operation *wait : waits) {
    Operation *release = nullptr, *last = wait;
    SmallVector<Value> values{wait->getResult(0)};
    while (!values.empty())
      for (Operation *user : values.pop_back_val().getUsers()) {
        user = block.findAncestorOpInBlock(*user);
        if (isa<coll::ReleaseOp>(user)) {
          release = user;
          continue;
        }
        if (last->isBeforeInBlock(user))
          last = user;
        if (isView(user))
          values.append(user->result_begin(), user->result_end());
      }
    if (release && release->isBeforeInBlock(last))
      release->moveAfter(last);
  }
  return cloned;
}

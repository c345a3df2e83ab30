//===- PpPartition.cpp - pp-partition -------------------------------------===//
//
// Splits a training step into pipeline stages, one function per stage, each
// running its schedule's actions over the microbatches with point-to-point
// transfers where values cross stages.
//
// 1. Units. Parameters are grouped as train-remat's layers are
//    (train::getParamGroup): each numbered group is a transformer block `t`;
//    parameters outside any numbered group belong to `E` when the forward
//    first reads them before the first block, to `L` otherwise. A forward op
//    belongs to the latest unit among its operands'; an op of the backward
//    to its forward op's unit (train-autodiff gives adjoint ops their
//    forward op's location), else as Partitioner::assignOpUnits says.
// 2. Stages. A layout string (Megatron's: "Et*2|t*2L") assigns units to
//    stages; without one, units are cut into contiguous stages minimising
//    the costliest stage's time on the cost model (exact, by dynamic
//    programming over the cuts).
// 3. Actions. A forward op of microbatch m (train-microbatch's
//    train.microbatch) is in F(m); a backward op in B(m), or for zero bubble
//    in I(m) when a value another stage receives depends on it and W(m)
//    otherwise. Ops of no one microbatch (gradient accumulation, the loss's
//    sum, the optimizer) run as soon as their operands exist on their stage.
//    Ops that read only constants, inputs and optimizer state are cloned
//    into every stage that uses them.
// 4. Programs. Each stage's ops are emitted in its schedule's order; a value
//    another stage uses is sent right after it is computed, and received
//    right before its first use. Between two stages, messages are received
//    in the order they are sent (NCCL matches them by order; the tag is the
//    message's index, which the MPI backend checks). A send is waited after
//    the first message received from its peer that the peer sends after its
//    first use of the sent value (then the peer has surely received it: an
//    activation's send is complete once the peer's next message after its
//    forward is back, a gradient's once the peer's next forward's
//    activation is), else at the end of the program. The MPI backend and
//    loom-run post sends and complete them without waiting for the
//    receiver, so no schedule that is valid with buffered transfers
//    deadlocks. NCCL, whose send waits for its receive on an in-order
//    stream, would need crossing transfers grouped: the CUDA target does
//    not take stages yet.
//
//===----------------------------------------------------------------------===//

#include "Accumulation.h"
#include "loom/Analysis/CostModel.h"
#include "loom/Analysis/OpIds.h"
#include "loom/Dialect/Coll/CollOps.h"
#include "loom/Dialect/Train/TrainDialect.h"
#include "loom/Dialect/Train/TrainOps.h"
#include "loom/PipelineParallel/Layout.h"
#include "loom/PipelineParallel/Passes.h"
#include "loom/PipelineParallel/Schedules.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"

#include <functional>
#include <map>
#include <set>

namespace loom::pp {
#define GEN_PASS_DEF_PPPARTITIONPASS
#include "loom/PipelineParallel/Passes.h.inc"
} // namespace loom::pp

using namespace mlir;
using namespace loom;
using namespace loom::pp;

namespace {

constexpr int64_t kFree = -1;
constexpr int64_t kNoMicrobatch = -1;
constexpr int64_t kManyMicrobatches = -2;
constexpr llvm::StringLiteral kActionAttr =
    loom::train::TrainDialect::kActionAttrName;

/// What pp-partition decides about one top-level op of the step.
struct OpInfo {
  /// kFree for ops cloned wherever they are used.
  int64_t unit = kFree;
  int64_t stage = kFree;
  int64_t microbatch = kNoMicrobatch;
  bool forward = false;
  /// For zero bubble: a backward op another stage waits for.
  bool inputGrad = false;
  /// Its place in its stage's action list.
  int64_t position = 0;
  /// Its index in its stage's program (`order`).
  size_t index = 0;
};

/// One step split into stages: each method is one of the steps the file's
/// comment lists, in order.
class Partitioner {
public:
  Partitioner(func::FuncOp step, int64_t stages, int64_t replicas,
              ScheduleKind kind, StringRef scheduleName, StringRef layout)
      : step(step), body(step.getBody().front()),
        ret(cast<func::ReturnOp>(body.getTerminator())), numStages(stages),
        numReplicas(replicas), kind(kind), scheduleName(scheduleName),
        layout(layout), loc(step.getLoc()) {}

  LogicalResult run();

private:
  /// The values `op` (and ops in its regions) reads from the step's block.
  /// The values `op` and the ops in its regions read from the step's
  /// block, in walk order (which orders the clones of free ops), found
  /// once per op.
  ArrayRef<Value> readValues(Operation *op) const;
  /// The unit of a parameter or of the op defining `v`; kFree otherwise.
  int64_t unitOfValue(Value v) const;
  /// The top-level op of the step that uses a value in `user`, or null
  /// for the return.
  Operation *topLevel(Operation *user) const;

  void findForward();
  LogicalResult assignParameterUnits();
  LogicalResult assignOpUnits();
  LogicalResult assignStages();
  void shareParameters();
  void assignMicrobatches();
  void splitInputGradients();
  void placeInSchedules();
  LogicalResult planTransfers();
  LogicalResult checkParameters();
  void planSignatures();
  LogicalResult emitStage(int64_t s, OpBuilder &moduleBuilder);
  /// The args of the step that computing `root` on a stage reads (through
  /// the free ops it clones).
  llvm::SetVector<unsigned> argsReached(Value root) const;

  func::FuncOp step;
  Block &body;
  func::ReturnOp ret;
  int64_t numStages;
  /// Data-parallel replicas of the pipeline: the world is numStages x
  /// numReplicas ranks.
  int64_t numReplicas;
  ScheduleKind kind;
  StringRef scheduleName, layout;
  Location loc;
  int64_t microbatches = 1;

  DenseSet<Operation *> forward;
  SmallVector<Operation *> ops;
  DenseMap<Operation *, OpInfo> info;
  DenseMap<Value, int64_t> unitOf;
  /// The gradients the step returns (train.grad results): the returned
  /// value, its parameter's name and unit.
  struct ReturnedGrad {
    Value value;
    StringAttr param;
    int64_t unit;
  };
  SmallVector<ReturnedGrad> returnedGrads;
  SmallVector<std::string> unitKinds;
  SmallVector<int64_t> stageOfUnit;
  std::string layoutText;
  std::vector<std::vector<Action>> actions;
  std::vector<std::map<std::pair<int, int64_t>, int64_t>> positionOf;
  /// Each stage's ops in program order.
  std::vector<SmallVector<Operation *>> order;
  /// Values sent between each pair of stages, in the sender's order.
  std::map<std::pair<int64_t, int64_t>, SmallVector<Value>> messages;
  /// (value, receiving stage) -> its index among its sender's messages to
  /// that stage (the tag).
  DenseMap<std::pair<Value, int64_t>, int64_t> messageIndex;
  std::vector<llvm::SetVector<unsigned>> stageArgs;
  std::vector<SmallVector<unsigned>> stageResults;
  mutable std::map<Operation *, SmallVector<Value>> reads;
};

ArrayRef<Value> Partitioner::readValues(Operation *op) const {
  // A std::map: its entries stay where they are while others are added.
  auto [it, inserted] = reads.try_emplace(op);
  if (inserted) {
    SetVector<Value> values;
    op->walk([&](Operation *inner) {
      for (Value v : inner->getOperands())
        if (v.getParentBlock() == &body)
          values.insert(v);
    });
    it->second.assign(values.begin(), values.end());
  }
  return it->second;
}

int64_t Partitioner::unitOfValue(Value v) const {
  if (auto it = unitOf.find(v); it != unitOf.end())
    return it->second;
  if (Operation *def = v.getDefiningOp())
    if (auto it = info.find(def); it != info.end())
      return it->second.unit;
  return kFree;
}

Operation *Partitioner::topLevel(Operation *user) const {
  Operation *top = body.findAncestorOpInBlock(*user);
  return top == body.getTerminator() ? nullptr : top;
}

LogicalResult Partitioner::run() {
  if (auto attr = step->getAttrOfType<IntegerAttr>(
          loom::train::TrainDialect::kMicrobatchesAttrName))
    microbatches = attr.getInt();
  if (microbatches < 1)
    return emitError(loc) << "pp-partition: "
                          << loom::train::TrainDialect::kMicrobatchesAttrName
                          << " must be at least 1, got " << microbatches;
  WalkResult outOfRange = step.walk([&](Operation *op) {
    auto mb = op->getAttrOfType<IntegerAttr>(
        loom::train::TrainDialect::kMicrobatchAttrName);
    if (mb && (mb.getInt() < 0 || mb.getInt() >= microbatches)) {
      op->emitOpError("pp-partition: ")
          << loom::train::TrainDialect::kMicrobatchAttrName << " "
          << mb.getInt() << " is not one of the " << microbatches
          << " microbatches";
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  if (outOfRange.wasInterrupted())
    return failure();
  findForward();
  accumulateInMicrobatchOrder(body, forward);
  reads.clear(); // the rewrite erased ops and made new ones
  for (Operation &op : body.without_terminator())
    ops.push_back(&op);
  if (failed(assignParameterUnits()) || failed(assignOpUnits()) ||
      failed(assignStages()))
    return failure();
  shareParameters();
  assignMicrobatches();
  if (kind == ScheduleKind::ZeroBubbleH1)
    splitInputGradients();
  placeInSchedules();
  if (failed(planTransfers()) || failed(checkParameters()))
    return failure();
  planSignatures();
  OpBuilder moduleBuilder(step);
  for (int64_t s = 0; s < numStages; ++s)
    if (failed(emitStage(s, moduleBuilder)))
      return failure();
  step.erase();
  return success();
}

/// The forward: every op the loss depends on.
void Partitioner::findForward() {
  Value loss = ret.getOperand(*train::getLossResultIndex(step));
  SmallVector<Operation *> worklist;
  if (Operation *def = loss.getDefiningOp())
    worklist.push_back(def);
  while (!worklist.empty()) {
    Operation *op = worklist.pop_back_val();
    if (op->getBlock() != &body || !forward.insert(op).second)
      continue;
    for (Value v : readValues(op))
      if (Operation *def = v.getDefiningOp())
        worklist.push_back(def);
  }
}

/// Units of the parameters, in the forward's order of first use: E (read
/// before the first numbered group), one t per group, L (the rest).
LogicalResult Partitioner::assignParameterUnits() {
  DenseMap<Value, int64_t> firstUse;
  for (auto [index, op] : llvm::enumerate(ops))
    if (forward.contains(op))
      for (Value v : readValues(op))
        if (isa<BlockArgument>(v))
          firstUse.try_emplace(v, index);
  struct Param {
    Value arg;
    int64_t first;
    std::string group;
  };
  SmallVector<Param> params;
  int64_t firstBlock = INT64_MAX;
  for (BlockArgument arg : step.getArguments()) {
    auto name = step.getArgAttrOfType<StringAttr>(
        arg.getArgNumber(), loom::train::TrainDialect::kParamAttrName);
    if (!name)
      continue;
    auto it = firstUse.find(arg);
    int64_t first = it == firstUse.end() ? INT64_MAX : it->second;
    std::string group = train::getParamGroup(name.getValue());
    params.push_back({arg, first, group});
    if (!group.empty())
      firstBlock = std::min(firstBlock, first);
  }
  // Blocks in order of first use.
  std::map<std::string, int64_t> blockFirst;
  for (Param &p : params)
    if (!p.group.empty()) {
      auto [it, inserted] = blockFirst.try_emplace(p.group, p.first);
      it->second = std::min(it->second, p.first);
    }
  // (first use, name): groups the forward never reads sort last, by name.
  SmallVector<std::pair<int64_t, std::string>> blocks;
  for (auto &[group, first] : blockFirst)
    blocks.push_back({first, group});
  llvm::sort(blocks);
  auto isE = [&](const Param &p) {
    return p.group.empty() && p.first < firstBlock;
  };
  auto isL = [&](const Param &p) { return p.group.empty() && !isE(p); };
  if (llvm::any_of(params, isE))
    unitKinds.push_back("E");
  std::map<std::string, int64_t> blockUnit;
  for (auto &[first, group] : blocks) {
    blockUnit[group] = unitKinds.size();
    unitKinds.push_back("t");
  }
  if (llvm::any_of(params, isL))
    unitKinds.push_back("L");
  DenseMap<StringAttr, int64_t> unitOfName;
  for (Param &p : params) {
    unitOf[p.arg] = !p.group.empty() ? blockUnit[p.group]
                    : isE(p)         ? 0
                                     : int64_t(unitKinds.size()) - 1;
    unitOfName[step.getArgAttrOfType<StringAttr>(
        cast<BlockArgument>(p.arg).getArgNumber(),
        loom::train::TrainDialect::kParamAttrName)] = unitOf[p.arg];
  }
  for (auto [index, value] : llvm::enumerate(ret.getOperands()))
    if (auto name = step.getResultAttrOfType<StringAttr>(
            index, loom::train::TrainDialect::kGradAttrName))
      if (auto unit = unitOfName.find(name); unit != unitOfName.end())
        returnedGrads.push_back({value, name, unit->second});
  if (int64_t(unitKinds.size()) < numStages)
    return emitError(loc) << "pp-partition: the step has " << unitKinds.size()
                          << " units (embedding, blocks, output) for "
                          << numStages << " stages";
  return success();
}

/// A forward op belongs to the latest unit among its operands'. An op of
/// the backward belongs to its forward op's unit (train-autodiff gives
/// adjoint ops their forward op's location); without one, to the latest
/// unit of the forward values it reads, or for an op reading only
/// gradients the earliest of theirs, raised to the least its backward
/// users need (a partial result of an adjoint, an RMSNorm's sum of squares,
/// belongs with the rest of it); a gradient the step returns, to its
/// parameter's unit. Ops reading only constants, inputs and optimizer state
/// are free: cloned where used.
LogicalResult Partitioner::assignOpUnits() {
  DenseMap<Location, int64_t> unitOfLoc;
  DenseSet<Location> ambiguous;
  DenseSet<Operation *> byLocation;
  for (Operation *op : ops) {
    OpInfo &i = info[op];
    i.forward = forward.contains(op);
    if (!isMemoryEffectFree(op))
      return op->emitOpError("pp-partition: cannot place an op with side "
                             "effects");
    int64_t latest = kFree, earliest = INT64_MAX, latestForward = kFree;
    for (Value v : readValues(op)) {
      int64_t u = unitOfValue(v);
      if (u == kFree)
        continue;
      latest = std::max(latest, u);
      earliest = std::min(earliest, u);
      Operation *def = v.getDefiningOp();
      if (unitOf.count(v) || (def && forward.contains(def)))
        latestForward = std::max(latestForward, u);
    }
    if (latest == kFree)
      continue;
    if (i.forward) {
      i.unit = latest;
      auto [it, inserted] = unitOfLoc.try_emplace(op->getLoc(), latest);
      if (!inserted && it->second != latest)
        ambiguous.insert(op->getLoc());
      continue;
    }
    auto it = unitOfLoc.find(op->getLoc());
    if (it != unitOfLoc.end() && !ambiguous.contains(op->getLoc())) {
      i.unit = it->second;
      byLocation.insert(op);
      continue;
    }
    i.unit = latestForward != kFree ? latestForward : earliest;
  }
  // A gradient the step returns is its parameter's: it is computed on the
  // parameter's stage, which returns it (what it reads from other stages is
  // sent there).
  DenseMap<Value, int64_t> gradUnit;
  for (const ReturnedGrad &grad : returnedGrads)
    gradUnit[grad.value] = grad.unit;
  for (Operation *op : llvm::reverse(ops)) {
    OpInfo &i = info[op];
    if (i.unit == kFree || i.forward || byLocation.contains(op))
      continue;
    auto returned = llvm::find_if(op->getResults(), [&](Value result) {
      return gradUnit.contains(result);
    });
    if (returned != op->result_end()) {
      i.unit = gradUnit.lookup(*returned);
      continue;
    }
    int64_t least = INT64_MAX;
    for (Operation *user : op->getUsers()) {
      Operation *top = topLevel(user);
      if (top && info[top].unit != kFree && !info[top].forward)
        least = std::min(least, info[top].unit);
    }
    if (least != INT64_MAX)
      i.unit = std::max(i.unit, least);
  }
  return success();
}

/// Stages of the units: the layout, or balanced on the cost model.
LogicalResult Partitioner::assignStages() {
  std::string expected;
  for (const std::string &k : unitKinds)
    expected += k;
  if (!layout.empty()) {
    std::string error;
    SmallVector<std::string> parsed = parseLayout(layout, error);
    if (!error.empty())
      return emitError(loc) << "pp-partition: " << error;
    if (int64_t(parsed.size()) != numStages)
      return emitError(loc)
             << "pp-partition: layout \"" << layout << "\" has "
             << parsed.size() << " stages, expected " << numStages;
    std::string flat;
    for (auto [s, units] : llvm::enumerate(parsed)) {
      if (units.empty())
        return emitError(loc) << "pp-partition: stage " << s << " of layout \""
                              << layout << "\" is empty";
      for (char c : units) {
        flat.push_back(c);
        stageOfUnit.push_back(s);
      }
    }
    if (flat != expected)
      return emitError(loc)
             << "pp-partition: layout \"" << layout << "\" lists units \""
             << flat << "\", the step has \"" << expected << "\"";
  } else {
    std::optional<CostModel> model =
        getCostModel(step->getParentOp(), "pp-partition",
                     /*bindProfile=*/false);
    if (!model)
      return failure();
    SmallVector<double> cost(unitKinds.size(), 0);
    for (Operation *op : ops)
      if (info[op].unit != kFree)
        cost[info[op].unit] += model->getComputeTime(op);
    stageOfUnit = balanceUnits(cost, numStages);
  }
  layoutText = printLayout(unitKinds, stageOfUnit);
  for (Operation *op : ops)
    if (info[op].unit != kFree)
      info[op].stage = stageOfUnit[info[op].unit];
  return success();
}

/// A parameter read on stages other than its own (a tied embedding, which
/// the output projection reads on the last stage) is sent to them: their
/// reads take a tensor.cast of it made on its own stage, which
/// planTransfers sends as it sends an activation. The gradient those stages
/// compute for it comes back as any gradient does, is added on its own
/// stage, and the update stays there: the tied weight has one copy of its
/// optimizer state, and each step moves it out and its gradient back.
void Partitioner::shareParameters() {
  OpBuilder builder(step.getContext());
  for (BlockArgument arg : step.getArguments()) {
    auto unit = unitOf.find(arg);
    if (unit == unitOf.end())
      continue;
    int64_t home = stageOfUnit[unit->second];
    SmallVector<OpOperand *> away;
    for (OpOperand &use : arg.getUses())
      if (Operation *top = topLevel(use.getOwner()))
        if (info[top].stage != kFree && info[top].stage != home)
          away.push_back(&use);
    if (away.empty())
      continue;
    builder.setInsertionPointToStart(&body);
    auto copy =
        tensor::CastOp::create(builder, arg.getLoc(), arg.getType(), arg);
    OpInfo &copyInfo = info[copy];
    copyInfo.unit = unit->second;
    copyInfo.stage = home;
    copyInfo.forward = true;
    forward.insert(copy);
    ops.insert(ops.begin(), copy);
    for (OpOperand *use : away)
      use->set(copy.getResult());
  }
  reads.clear();
}

/// A forward clone's microbatch is train-microbatch's attribute (which
/// train-autodiff copies to the adjoint); otherwise the one microbatch
/// among the operands', none, or many.
void Partitioner::assignMicrobatches() {
  for (Operation *op : ops) {
    OpInfo &i = info[op];
    if (i.stage == kFree)
      continue;
    if (microbatches == 1) {
      i.microbatch = 0;
      continue;
    }
    if (auto mb = op->getAttrOfType<IntegerAttr>(
            loom::train::TrainDialect::kMicrobatchAttrName)) {
      i.microbatch = mb.getInt();
      continue;
    }
    int64_t found = kNoMicrobatch;
    for (Value v : readValues(op)) {
      Operation *def = v.getDefiningOp();
      if (!def || !info.count(def) || info[def].stage == kFree ||
          info[def].microbatch == kNoMicrobatch)
        continue;
      int64_t m = info[def].microbatch;
      found = (found == kNoMicrobatch || found == m) ? m : kManyMicrobatches;
    }
    i.microbatch = found;
  }
}

/// Zero bubble's I: the backward ops (per stage and microbatch) whose
/// results another stage reads, and their producers in the same backward.
void Partitioner::splitInputGradients() {
  for (Operation *op : llvm::reverse(ops)) {
    OpInfo &i = info[op];
    if (i.stage == kFree || i.forward || i.microbatch < 0)
      continue;
    for (Operation *user : op->getUsers())
      if (Operation *top = topLevel(user))
        if (info[top].stage != kFree && info[top].stage != i.stage)
          i.inputGrad = true;
    if (!i.inputGrad)
      continue;
    for (Value v : readValues(op))
      if (Operation *def = v.getDefiningOp())
        if (info.count(def) && info[def].stage == i.stage &&
            !info[def].forward && info[def].microbatch == i.microbatch)
          info[def].inputGrad = true;
  }
}

/// Each op's place in its stage's action list: its own action (F, B, I or
/// W of its microbatch), or for an op of no single microbatch the first
/// action after its operands; never before an operand's, nor, for a value
/// received, before the action that handles the same microbatch in the
/// same direction.
void Partitioner::placeInSchedules() {
  actions = buildSchedule(kind, numStages, microbatches);
  positionOf.resize(numStages);
  for (int64_t s = 0; s < numStages; ++s)
    for (auto [p, action] : llvm::enumerate(actions[s]))
      positionOf[s][{int(action.kind), action.microbatch}] = p;
  auto isWhole = [&](int64_t s, int64_t m) {
    return positionOf[s].count({int(ActionKind::Backward), m}) != 0;
  };
  auto position = [&](int64_t s, ActionKind kind, int64_t m) {
    return positionOf[s][{int(kind), m}];
  };
  for (Operation *op : ops) {
    OpInfo &i = info[op];
    if (i.stage == kFree)
      continue;
    int64_t at = 0;
    if (i.microbatch >= 0) {
      ActionKind own = i.forward                        ? ActionKind::Forward
                       : isWhole(i.stage, i.microbatch) ? ActionKind::Backward
                       : i.inputGrad                    ? ActionKind::InputGrad
                                     : ActionKind::WeightGrad;
      at = position(i.stage, own, i.microbatch);
    }
    for (Value v : readValues(op)) {
      Operation *def = v.getDefiningOp();
      if (!def || !info.count(def) || info[def].stage == kFree)
        continue;
      const OpInfo &d = info[def];
      if (d.stage == i.stage) {
        at = std::max(at, d.position);
        continue;
      }
      const Action &sent = actions[d.stage][d.position];
      ActionKind matching =
          sent.kind == ActionKind::Forward    ? ActionKind::Forward
          : isWhole(i.stage, sent.microbatch) ? ActionKind::Backward
                                              : ActionKind::InputGrad;
      at = std::max(at, position(i.stage, matching, sent.microbatch));
    }
    i.position = at;
  }
  order.resize(numStages);
  for (Operation *op : ops)
    if (info[op].stage != kFree)
      order[info[op].stage].push_back(op);
  for (auto &stageOps : order) {
    llvm::stable_sort(stageOps, [&](Operation *a, Operation *b) {
      return info[a].position < info[b].position;
    });
    for (auto [index, op] : llvm::enumerate(stageOps))
      info[op].index = index;
  }
}

/// The values each stage sends each other stage, in the sender's order.
LogicalResult Partitioner::planTransfers() {
  for (int64_t s = 0; s < numStages; ++s)
    for (Operation *op : order[s])
      for (Value r : op->getResults()) {
        std::set<int64_t> to;
        for (Operation *user : r.getUsers())
          if (Operation *top = topLevel(user))
            if (info[top].stage != kFree && info[top].stage != s)
              to.insert(info[top].stage);
        for (int64_t t : to)
          messages[{s, t}].push_back(r);
      }
  for (auto &[pair, values] : messages)
    for (auto [index, value] : llvm::enumerate(values))
      messageIndex[{value, pair.second}] = index;
  for (auto &[pair, values] : messages)
    if (values.size() > 32768)
      return emitError(loc)
             << "pp-partition: " << values.size() << " transfers from stage "
             << pair.first << " to stage " << pair.second
             << " (at most 32768, MPI's tags)";
  return success();
}

/// Every parameter is read on its own stage only (elsewhere, its copy sent
/// by shareParameters), and its gradient, if the step returns it, is
/// computed there.
LogicalResult Partitioner::checkParameters() {
  for (const ReturnedGrad &grad : returnedGrads) {
    Operation *def = grad.value.getDefiningOp();
    if (!def || !info.count(def) || info[def].stage == kFree ||
        info[def].stage == stageOfUnit[grad.unit])
      continue;
    return def->emitOpError()
           << "pp-partition: the gradient of parameter '"
           << grad.param.getValue() << "' is computed on stage "
           << info[def].stage << ", its parameter is on stage "
           << stageOfUnit[grad.unit];
  }
  for (BlockArgument value : step.getArguments()) {
    auto found = unitOf.find(value);
    if (found == unitOf.end())
      continue;
    int64_t unit = found->second;
    for (Operation *user : value.getUsers()) {
      Operation *top = topLevel(user);
      if (!top || info[top].stage == stageOfUnit[unit])
        continue;
      auto arg = cast<BlockArgument>(value);
      return emitError(arg.getLoc())
             << "pp-partition: parameter '"
             << step.getArgAttrOfType<StringAttr>(
                        arg.getArgNumber(),
                        loom::train::TrainDialect::kParamAttrName)
                    .getValue()
             << "' of stage " << stageOfUnit[unit] << " is also read on stage "
             << info[top].stage
             << " where it was not sent (an internal error: please report it)";
    }
  }
  return success();
}

llvm::SetVector<unsigned> Partitioner::argsReached(Value root) const {
  llvm::SetVector<unsigned> args;
  SmallVector<Value> worklist{root};
  DenseSet<Operation *> seen;
  while (!worklist.empty()) {
    Value v = worklist.pop_back_val();
    if (auto arg = dyn_cast<BlockArgument>(v)) {
      if (arg.getOwner() == &body)
        args.insert(arg.getArgNumber());
      continue;
    }
    Operation *def = v.getDefiningOp();
    if (!def || def->getBlock() != &body || info.lookup(def).stage != kFree ||
        !seen.insert(def).second)
      continue;
    for (Value w : readValues(def))
      worklist.push_back(w);
  }
  return args;
}

/// Each stage's arguments (what its ops and their free producers read) and
/// results: a value computed on a stage is returned by it; a free result
/// (a shared counter's update) by every stage that reads what it is
/// computed from, else by the last.
void Partitioner::planSignatures() {
  stageArgs.resize(numStages);
  stageResults.resize(numStages);
  for (int64_t s = 0; s < numStages; ++s)
    for (Operation *op : order[s])
      for (Value v : readValues(op))
        stageArgs[s].set_union(argsReached(v));
  for (auto [index, value] : llvm::enumerate(ret.getOperands())) {
    Operation *def = value.getDefiningOp();
    int64_t stage = kFree;
    if (def && info.count(def) && info[def].stage != kFree)
      stage = info[def].stage;
    else if (auto it = unitOf.find(value); it != unitOf.end())
      stage = stageOfUnit[it->second];
    if (stage != kFree) {
      stageResults[stage].push_back(index);
      continue;
    }
    llvm::SetVector<unsigned> from = argsReached(value);
    bool claimed = false;
    for (int64_t s = 0; s < numStages; ++s)
      if (llvm::any_of(from,
                       [&](unsigned a) { return stageArgs[s].contains(a); })) {
        stageResults[s].push_back(index);
        claimed = true;
      }
    if (!claimed)
      stageResults[numStages - 1].push_back(index);
  }
  for (int64_t s = 0; s < numStages; ++s)
    for (unsigned r : stageResults[s])
      stageArgs[s].set_union(argsReached(ret.getOperand(r)));
}

LogicalResult Partitioner::emitStage(int64_t s, OpBuilder &moduleBuilder) {
  MLIRContext *ctx = step.getContext();
  auto i64 = [&](int64_t v) {
    return IntegerAttr::get(IntegerType::get(ctx, 64), v);
  };
  SmallVector<unsigned> argList(stageArgs[s].begin(), stageArgs[s].end());
  llvm::sort(argList);
  SmallVector<unsigned> results = stageResults[s];
  llvm::sort(results);
  SmallVector<Type> argTypes, resultTypes;
  for (unsigned a : argList)
    argTypes.push_back(step.getArgument(a).getType());
  for (unsigned r : results)
    resultTypes.push_back(step.getResultTypes()[r]);
  auto func = func::FuncOp::create(
      moduleBuilder, loc, (step.getSymName() + "_stage" + Twine(s)).str(),
      FunctionType::get(ctx, argTypes, resultTypes));
  for (NamedAttribute attr : step->getDiscardableAttrs())
    func->setAttr(attr.getName(), attr.getValue());
  for (auto [k, a] : llvm::enumerate(argList))
    if (DictionaryAttr attrs = step.getArgAttrDict(a))
      func.setArgAttrs(k, attrs);
  for (auto [k, r] : llvm::enumerate(results))
    if (DictionaryAttr attrs = step.getResultAttrDict(r))
      func.setResultAttrs(k, attrs);
  func->setAttr(loom::train::TrainDialect::kPipelineStageAttrName, i64(s));
  func->setAttr(loom::train::TrainDialect::kPipelineAttrName,
                loom::train::PipelineAttr::get(ctx, numStages, microbatches,
                                               numReplicas, scheduleName,
                                               layoutText));

  Block *entry = func.addEntryBlock();
  OpBuilder b = OpBuilder::atBlockEnd(entry);
  IRMapping mapping;
  for (auto [k, a] : llvm::enumerate(argList))
    mapping.map(step.getArgument(a), entry->getArgument(k));
  Value comm;
  auto getComm = [&]() {
    if (comm)
      return comm;
    // At the entry: every rank makes its communicators before any transfer.
    OpBuilder atEntry = OpBuilder::atBlockBegin(entry);
    comm = coll::CommWorldOp::create(
        atEntry, loc, coll::CommType::get(ctx, numStages * numReplicas));
    // Replica d's stages: ranks d, D + d, 2 D + d, ...
    if (numReplicas > 1)
      comm = coll::CommGroupOp::create(atEntry, loc,
                                       coll::CommType::get(ctx, numStages),
                                       comm, numStages, numReplicas);
    return comm;
  };
  // Receives from each peer, in the peer's send order, up to `v`.
  std::map<int64_t, size_t> received;
  DenseMap<Value, Operation *> recvWaitOf;
  auto receiveUpTo = [&](int64_t from, Value v) {
    SmallVector<Value> &queue = messages[{from, s}];
    size_t &next = received[from];
    while (next < queue.size() && !mapping.contains(v)) {
      Value value = queue[next];
      auto start = coll::RecvStartOp::create(
          b, value.getLoc(),
          coll::FutureType::get(cast<RankedTensorType>(value.getType())),
          getComm(), from, int64_t(next));
      auto wait = coll::WaitOp::create(b, value.getLoc(), start.getFuture());
      mapping.map(value, wait.getResult());
      recvWaitOf[value] = wait;
      ++next;
    }
  };
  // An operand's value here: free ops cloned, values of other stages
  // received.
  std::function<void(Value)> materialize = [&](Value v) {
    Operation *def = v.getDefiningOp();
    if (mapping.contains(v) || !def || def->getBlock() != &body)
      return;
    if (info[def].stage == kFree) {
      for (Value w : readValues(def))
        materialize(w);
      b.clone(*def, mapping);
    } else if (info[def].stage != s) {
      receiveUpTo(info[def].stage, v);
    }
  };
  SmallVector<std::tuple<Value, int64_t, coll::SendStartOp>> sends;
  for (Operation *op : order[s]) {
    for (Value v : readValues(op)) {
      materialize(v);
      if (!mapping.contains(v))
        return op->emitOpError("pp-partition: internal error: an operand of "
                               "stage ")
               << s << " has no value there";
    }
    Operation *clone = b.clone(*op, mapping);
    std::string action = actions[s][info[op].position].str();
    clone->setAttr(kActionAttr, StringAttr::get(ctx, action));
    // The location keeps the action through bufferisation and lowering,
    // where codegen-outline-actions compiles each action's code once.
    clone->setLoc(loom::withAction(clone->getLoc(), action));
    for (Value r : op->getResults())
      for (int64_t t = 0; t < numStages; ++t) {
        auto it = messageIndex.find({r, t});
        if (t == s || it == messageIndex.end())
          continue;
        auto element = cast<RankedTensorType>(r.getType()).getElementType();
        auto send = coll::SendStartOp::create(
            b, op->getLoc(),
            coll::FutureType::get(RankedTensorType::get({0}, element)),
            mapping.lookup(r), getComm(), t, it->second);
        sends.push_back({r, t, send});
      }
  }
  SmallVector<Value> returned;
  for (unsigned r : results) {
    materialize(ret.getOperand(r));
    returned.push_back(mapping.lookup(ret.getOperand(r)));
  }
  auto newRet = func::ReturnOp::create(b, ret.getLoc(), returned);

  // Each send is waited right after the first message received from its
  // peer that the peer sends after its first use of the sent value: the
  // peer has then received it, so the wait does not wait for the peer.
  // An activation's send is complete once a message the peer computes
  // after its forward is back (at the latest, the activation's gradient),
  // a gradient's once the peer's next forward's activation is. Else the
  // send is waited before the return.
  for (auto [value, peer, send] : sends) {
    std::optional<size_t> firstUse;
    for (Operation *user : value.getUsers())
      if (Operation *top = topLevel(user)) {
        OpInfo use = info.lookup(top);
        if (use.stage == peer)
          firstUse = std::min(firstUse.value_or(use.index), use.index);
      }
    Operation *after = nullptr;
    if (firstUse)
      for (Value back : messages[{peer, s}]) {
        Operation *wait = recvWaitOf.lookup(back);
        if (info.lookup(back.getDefiningOp()).index >= *firstUse && wait &&
            send->isBeforeInBlock(wait) &&
            (!after || wait->isBeforeInBlock(after)))
          after = wait;
      }
    if (after)
      b.setInsertionPointAfter(after);
    else
      b.setInsertionPoint(newRet);
    coll::WaitOp::create(b, send.getLoc(), send.getFuture());
  }
  // A receive belongs to the action that reads it (the next one), so that
  // every action of a kind carries its own transfers and its code is the
  // same for every microbatch (codegen-outline-actions).
  StringRef next;
  for (Operation &op : llvm::reverse(entry->getOperations())) {
    StringRef action = loom::getAction(op.getLoc());
    if (!action.empty()) {
      next = action;
      continue;
    }
    auto wait = dyn_cast<coll::WaitOp>(&op);
    Operation *start = wait ? wait.getFuture().getDefiningOp() : &op;
    if (!next.empty() && isa_and_nonnull<coll::RecvStartOp>(start))
      op.setLoc(loom::withAction(op.getLoc(), next));
  }
  return success();
}

struct PPPartitionPass
    : public loom::pp::impl::PPPartitionPassBase<PPPartitionPass> {
  using PPPartitionPassBase::PPPartitionPassBase;
  void runOnOperation() override;
};

void PPPartitionPass::runOnOperation() {
  FailureOr<FunctionOpInterface> found =
      train::findLossFunction(getOperation(), "pp-partition", "training step");
  if (failed(found))
    return signalPassFailure();
  auto step = dyn_cast<func::FuncOp>(found->getOperation());
  if (!step) {
    found->emitError("pp-partition: expected the training step to be a "
                     "func.func");
    return signalPassFailure();
  }
  Location loc = step.getLoc();
  std::optional<ScheduleKind> kind = parseScheduleKind(schedule);
  if (!kind) {
    emitError(loc) << "pp-partition: unknown schedule '" << schedule
                   << "' (expected gpipe, 1f1b or zb-h1)";
    return signalPassFailure();
  }
  if (stages < 1 || replicas < 1) {
    emitError(loc) << "pp-partition: stages and replicas must be at least 1, "
                      "got "
                   << int64_t(stages) << " and " << int64_t(replicas);
    return signalPassFailure();
  }
  if (!step.getBody().hasOneBlock()) {
    emitError(loc) << "pp-partition: expected a one-block step";
    return signalPassFailure();
  }
  Block &entry = step.getBody().front();
  Operation *last = entry.empty() ? nullptr : &entry.back();
  if (!isa_and_nonnull<func::ReturnOp>(last)) {
    emitError(loc) << "pp-partition: expected the step to end in func.return, "
                      "found '"
                   << (last ? last->getName().getStringRef() : "nothing")
                   << "'";
    return signalPassFailure();
  }
  bool hasGrad = false;
  for (unsigned i = 0; i < step.getNumResults(); ++i)
    hasGrad |=
        bool(step.getResultAttr(i, loom::train::TrainDialect::kGradAttrName));
  if (forwardOnly && layout.empty()) {
    emitError(loc) << "pp-partition: forward-only needs the training step's "
                      "layout, so that each stage holds the parameters it "
                      "trains";
    return signalPassFailure();
  }
  if (forwardOnly && hasGrad) {
    emitError(loc) << "pp-partition: forward-only partitions a forward, and "
                      "this step returns gradients";
    return signalPassFailure();
  }
  if (!forwardOnly && !hasGrad &&
      !step->hasAttr(loom::train::TrainDialect::kOptimizerAttrName)) {
    emitError(loc) << "pp-partition: expected a differentiated step (run "
                      "train-autodiff, and train-optimizer, first)";
    return signalPassFailure();
  }
  WalkResult collectives = step.walk([&](Operation *op) {
    // Ops of unregistered dialects have no Dialect.
    return isa_and_nonnull<coll::CollDialect>(op->getDialect())
               ? WalkResult::interrupt()
               : WalkResult::advance();
  });
  if (collectives.wasInterrupted()) {
    emitError(loc) << "pp-partition: the step already has collectives; "
                      "pp-partition runs before zero-partition";
    return signalPassFailure();
  }
  Partitioner partitioner(step, stages, replicas, *kind, schedule, layout);
  if (failed(partitioner.run()))
    signalPassFailure();
}

} // namespace

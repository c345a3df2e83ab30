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
//    forward op's location), else to the latest unit among the parameters it
//    reads, else the earliest among its operands'.
// 2. Stages. A layout string (Megatron's: "Et*2|t*2L") assigns units to
//    stages; without one, units are cut into contiguous stages minimising
//    the costliest stage's time on the cost model (exact, by dynamic
//    programming over the cuts).
// 3. Actions. A forward op of microbatch m (train-microbatch's
//    loom.microbatch) is in F(m); a backward op in B(m), or for zero bubble
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
//    a received value that depends on it (then the peer has surely received
//    it: the activation's send is complete once its gradient is back), else
//    at the end of the program: sends never block, so no schedule that is
//    valid with buffered transfers deadlocks.
//
//===----------------------------------------------------------------------===//

#include "loom/Analysis/CostModel.h"
#include "loom/Dialect/Coll/CollOps.h"
#include "loom/Dialect/Train/TrainDialect.h"
#include "loom/PipelineParallel/Passes.h"
#include "loom/PipelineParallel/Schedules.h"
#include "loom/Support/AttrNames.h"
#include "loom/Utils/LinalgBuilder.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
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
constexpr llvm::StringLiteral kActionAttr = "loom.action";
constexpr int64_t kNoMicrobatch = -1;
constexpr int64_t kManyMicrobatches = -2;

/// What pp-partition decides about one top-level op of the step.
struct OpInfo {
  /// Its index in the step's block.
  int64_t index = 0;
  /// kFree for ops cloned wherever they are used.
  int64_t unit = kFree;
  int64_t stage = kFree;
  int64_t microbatch = kNoMicrobatch;
  bool forward = false;
  /// For zero bubble: a backward op another stage waits for.
  bool inputGrad = false;
  /// Its place in its stage's action list.
  int64_t position = 0;
};

/// A parsed layout: per stage, its units' kinds ('E', 't', 'L').
FailureOr<SmallVector<std::string>> parseLayout(StringRef layout,
                                                Location loc) {
  SmallVector<StringRef> parts;
  layout.split(parts, '|');
  SmallVector<std::string> stages;
  for (StringRef part : parts) {
    std::string units;
    StringRef rest = part.trim();
    while (!rest.empty()) {
      char kind = rest.front();
      rest = rest.drop_front();
      if (kind != 'E' && kind != 't' && kind != 'L')
        return emitError(loc)
               << "pp-partition: unknown unit '" << kind << "' in layout \""
               << layout << "\" (expected E, t, L, *N and |)";
      int64_t count = 1;
      if (rest.consume_front("*")) {
        size_t digits = rest.find_first_not_of("0123456789");
        StringRef number = rest.take_front(digits);
        if (number.empty() || number.getAsInteger(10, count) || count < 1)
          return emitError(loc) << "pp-partition: expected a positive count "
                                   "after '*' in layout \""
                                << layout << "\"";
        rest = rest.drop_front(number.size());
      }
      units.append(count, kind);
    }
    stages.push_back(units);
  }
  return stages;
}

/// If `op` adds two tensors element-wise (what train-autodiff's
/// accumulation builds), its two inputs.
std::optional<std::pair<Value, Value>> getAccumulation(Operation *op) {
  auto generic = dyn_cast<linalg::GenericOp>(op);
  if (!generic || generic.getNumDpsInputs() != 2 ||
      generic.getNumDpsInits() != 1 || generic.getNumResults() != 1 ||
      !llvm::all_of(generic.getIndexingMapsArray(),
                    [](AffineMap m) { return m.isIdentity(); }) ||
      generic.getNumReductionLoops() != 0)
    return std::nullopt;
  Block &body = generic.getRegion().front();
  auto yield = cast<linalg::YieldOp>(body.getTerminator());
  auto add = yield.getOperand(0).getDefiningOp<arith::AddFOp>();
  if (!add || &body.front() != add.getOperation() ||
      !((add.getLhs() == body.getArgument(0) &&
         add.getRhs() == body.getArgument(1)) ||
        (add.getLhs() == body.getArgument(1) &&
         add.getRhs() == body.getArgument(0))))
    return std::nullopt;
  return std::make_pair(generic.getDpsInputs()[0], generic.getDpsInputs()[1]);
}

int64_t getMicrobatch(Value v) {
  if (Operation *def = v.getDefiningOp())
    if (auto mb = def->getAttrOfType<IntegerAttr>(attrs::kMicrobatch))
      return mb.getInt();
  return INT64_MAX;
}

/// Rebuilds each sum of gradients over microbatches (train-autodiff adds
/// them in reverse, the last microbatch first) as a chain in microbatch
/// order, in f32 for narrower floats, so that each microbatch's gradient is
/// added, and freed, in its own backward instead of all living until the
/// last one.
void accumulateInMicrobatchOrder(Block &body) {
  SmallVector<Operation *> roots;
  auto inTree = [](Value v) {
    Operation *def = v.getDefiningOp();
    return def && def->hasOneUse() && getAccumulation(def) &&
           getAccumulation(*def->getUsers().begin());
  };
  for (Operation &op : body) {
    if (!getAccumulation(&op))
      continue;
    bool inner = op.hasOneUse() && getAccumulation(*op.getUsers().begin());
    if (!inner)
      roots.push_back(&op);
  }
  for (Operation *root : roots) {
    SmallVector<Value> leaves;
    SmallVector<Operation *> tree;
    std::function<void(Operation *)> collect = [&](Operation *op) {
      tree.push_back(op);
      auto [a, b] = *getAccumulation(op);
      for (Value v : {a, b}) {
        if (inTree(v))
          collect(v.getDefiningOp());
        else
          leaves.push_back(v);
      }
    };
    collect(root);
    if (leaves.size() < 3)
      continue;
    SmallVector<Value> sorted = leaves;
    llvm::stable_sort(sorted, [](Value a, Value b) {
      return getMicrobatch(a) < getMicrobatch(b);
    });
    auto type = cast<RankedTensorType>(root->getResult(0).getType());
    Type element = type.getElementType();
    Type wide = element.getIntOrFloatBitWidth() < 32
                    ? Float32Type::get(root->getContext())
                    : element;
    OpBuilder b(root);
    Location loc = root->getLoc();
    LinalgBuilder lb(b, loc);
    unsigned rank = type.getRank();
    Value acc = lb.convert(sorted.front(), wide);
    for (Value leaf : ArrayRef(sorted).drop_front()) {
      // acc + widen(leaf), in one pass over the gradient.
      acc = lb.generic(lb.empty(type.getShape(), wide), {acc, leaf},
                       {lb.identity(rank), lb.identity(rank), lb.identity(rank)},
                       [&](OpBuilder &b, Location l, ValueRange args) -> Value {
                         Value x = args[1];
                         if (x.getType() != wide)
                           x = arith::ExtFOp::create(b, l, wide, x);
                         return arith::AddFOp::create(b, l, args[0], x);
                       });
      if (auto mb = leaf.getDefiningOp()
                        ? leaf.getDefiningOp()->getAttr(attrs::kMicrobatch)
                        : Attribute())
        acc.getDefiningOp()->setAttr(attrs::kMicrobatch, mb);
    }
    acc = lb.convert(acc, element);
    root->getResult(0).replaceAllUsesWith(acc);
    for (Operation *op : tree)
      op->dropAllUses();
    for (Operation *op : tree)
      op->erase();
  }
}

struct PPPartitionPass
    : public loom::pp::impl::PPPartitionPassBase<PPPartitionPass> {
  using PPPartitionPassBase::PPPartitionPassBase;

  void runOnOperation() override;

private:
  LogicalResult partition(func::FuncOp step);
};

void PPPartitionPass::runOnOperation() {
  func::FuncOp step;
  for (auto func : getOperation().getOps<func::FuncOp>()) {
    if (func.isExternal() || !train::getLossResultIndex(func))
      continue;
    if (step) {
      func.emitError("pp-partition: expected one training step (a function "
                     "with a train.loss result), found @")
          << step.getSymName() << " and @" << func.getSymName();
      return signalPassFailure();
    }
    step = func;
  }
  if (!step) {
    getOperation().emitError("pp-partition: expected a training step (a "
                             "function with a train.loss result), found none");
    return signalPassFailure();
  }
  if (failed(partition(step)))
    return signalPassFailure();
}

LogicalResult PPPartitionPass::partition(func::FuncOp step) {
  Location loc = step.getLoc();
  std::optional<ScheduleKind> kind = parseScheduleKind(schedule);
  if (!kind)
    return emitError(loc) << "pp-partition: unknown schedule '" << schedule
                          << "' (expected gpipe, 1f1b or zb-h1)";
  if (stages < 1)
    return emitError(loc) << "pp-partition: stages must be at least 1, got "
                          << int64_t(stages);
  if (!step.getBody().hasOneBlock())
    return emitError(loc) << "pp-partition: expected a one-block step";
  Block &body = step.getBody().front();
  bool hasGrad = false;
  for (unsigned i = 0; i < step.getNumResults(); ++i)
    hasGrad |= bool(step.getResultAttr(i, train::TrainDialect::kGradAttrName));
  if (!hasGrad && !step->hasAttr(attrs::kOptimizer))
    return emitError(loc) << "pp-partition: expected a differentiated step "
                             "(run train-autodiff, and train-optimizer, "
                             "first)";
  WalkResult collectives = step.walk([&](Operation *op) {
    if (isa<coll::CollDialect>(op->getDialect()))
      return WalkResult::interrupt();
    return WalkResult::advance();
  });
  if (collectives.wasInterrupted())
    return emitError(loc) << "pp-partition: the step already has collectives; "
                             "pp-partition runs before zero-partition";
  int64_t microbatches = 1;
  if (auto attr = step->getAttrOfType<IntegerAttr>(attrs::kMicrobatches))
    microbatches = attr.getInt();
  int64_t numStages = stages;

  accumulateInMicrobatchOrder(body);
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  Value loss = ret.getOperand(*train::getLossResultIndex(step));

  // The forward: every op the loss depends on.
  DenseSet<Operation *> forward;
  {
    SmallVector<Operation *> worklist;
    if (Operation *def = loss.getDefiningOp())
      worklist.push_back(def);
    while (!worklist.empty()) {
      Operation *op = worklist.pop_back_val();
      if (op->getBlock() != &body || !forward.insert(op).second)
        continue;
      op->walk([&](Operation *inner) {
        for (Value v : inner->getOperands())
          if (Operation *def = v.getDefiningOp())
            if (def->getBlock() == &body)
              worklist.push_back(def);
      });
    }
  }

  // Units of the parameters, in the forward's order of first use.
  DenseMap<Value, int64_t> unitOf;
  SmallVector<std::string> unitKinds;
  {
    DenseMap<Value, int64_t> firstUse;
    int64_t index = 0;
    for (Operation &op : body) {
      op.walk([&](Operation *inner) {
        for (Value v : inner->getOperands())
          if (isa<BlockArgument>(v) && forward.contains(&op))
            firstUse.try_emplace(v, index);
      });
      ++index;
    }
    struct Param {
      Value arg;
      int64_t first;
      std::string group;
    };
    SmallVector<Param> params;
    int64_t firstBlock = INT64_MAX;
    for (BlockArgument arg : step.getArguments()) {
      auto name = step.getArgAttrOfType<StringAttr>(
          arg.getArgNumber(), train::TrainDialect::kParamAttrName);
      if (!name)
        continue;
      auto it = firstUse.find(arg);
      int64_t first = it == firstUse.end() ? INT64_MAX : it->second;
      std::string group = train::getParamGroup(name.getValue());
      params.push_back({arg, first, group});
      if (!group.empty())
        firstBlock = std::min(firstBlock, first);
    }
    // Blocks in order of first use; E before them, L after.
    std::map<int64_t, std::string> blocks;
    std::map<std::string, int64_t> blockFirst;
    for (Param &p : params)
      if (!p.group.empty()) {
        auto [it, inserted] = blockFirst.try_emplace(p.group, p.first);
        it->second = std::min(it->second, p.first);
      }
    for (auto &[group, first] : blockFirst)
      blocks[first] = group;
    bool hasE = llvm::any_of(params, [&](Param &p) {
      return p.group.empty() && p.first < firstBlock;
    });
    bool hasL = llvm::any_of(params, [&](Param &p) {
      return p.group.empty() && p.first >= firstBlock;
    });
    if (hasE)
      unitKinds.push_back("E");
    std::map<std::string, int64_t> blockUnit;
    for (auto &[first, group] : blocks) {
      blockUnit[group] = unitKinds.size();
      unitKinds.push_back("t");
    }
    if (hasL)
      unitKinds.push_back("L");
    for (Param &p : params) {
      if (!p.group.empty())
        unitOf[p.arg] = blockUnit[p.group];
      else
        unitOf[p.arg] =
            p.first < firstBlock ? 0 : int64_t(unitKinds.size()) - 1;
    }
    if (int64_t(unitKinds.size()) < numStages)
      return emitError(loc) << "pp-partition: the step has " << unitKinds.size()
                            << " units (embedding, blocks, output) for "
                            << numStages << " stages";
  }

  // Units of the ops.
  DenseMap<Operation *, OpInfo> info;
  auto unitOfValue = [&](Value v) -> int64_t {
    if (auto it = unitOf.find(v); it != unitOf.end())
      return it->second;
    if (Operation *def = v.getDefiningOp())
      if (auto it = info.find(def); it != info.end())
        return it->second.unit;
    return kFree;
  };
  auto readValues = [&](Operation *op) {
    SetVector<Value> values;
    op->walk([&](Operation *inner) {
      for (Value v : inner->getOperands())
        if (v.getParentBlock() == &body)
          values.insert(v);
    });
    return values;
  };
  DenseMap<Location, int64_t> unitOfLoc;
  DenseSet<Location> ambiguous;
  DenseSet<Operation *> byLocation;
  {
    int64_t index = 0;
    for (Operation &op : body.without_terminator()) {
      OpInfo &i = info[&op];
      i.index = index++;
      i.forward = forward.contains(&op);
      if (!isMemoryEffectFree(&op))
        return op.emitOpError("pp-partition: cannot place an op with side "
                              "effects");
      int64_t latest = kFree, earliest = INT64_MAX, latestParam = kFree;
      for (Value v : readValues(&op)) {
        int64_t u = unitOfValue(v);
        if (u == kFree)
          continue;
        latest = std::max(latest, u);
        earliest = std::min(earliest, u);
        if (unitOf.count(v))
          latestParam = std::max(latestParam, u);
      }
      if (latest == kFree)
        continue; // free: constants, inputs and state only
      if (i.forward) {
        i.unit = latest;
        auto [it, inserted] = unitOfLoc.try_emplace(op.getLoc(), latest);
        if (!inserted && it->second != latest)
          ambiguous.insert(op.getLoc());
        continue;
      }
      auto it = unitOfLoc.find(op.getLoc());
      if (it != unitOfLoc.end() && !ambiguous.contains(op.getLoc())) {
        i.unit = it->second;
        byLocation.insert(&op);
        continue;
      }
      // Without its forward op's location: at least the latest unit of the
      // forward values it reads (its forward op's inputs, results and
      // parameters); an op reading only gradients, the earliest of theirs.
      int64_t latestForward = kFree;
      for (Value v : readValues(&op)) {
        Operation *def = v.getDefiningOp();
        bool isForward = unitOf.count(v) || (def && forward.contains(def));
        if (isForward)
          latestForward = std::max(latestForward, unitOfValue(v));
      }
      i.unit = latestForward != kFree ? latestForward : earliest;
      (void)latestParam;
    }
    // ... and at most what all its backward users need: a partial result of
    // an adjoint (an RMSNorm's sum of squares) belongs with the rest of it.
    for (Operation &op : llvm::reverse(body.without_terminator())) {
      OpInfo &i = info[&op];
      if (i.unit == kFree || i.forward || byLocation.contains(&op))
        continue;
      int64_t least = INT64_MAX;
      for (Operation *user : op.getUsers()) {
        Operation *top = body.findAncestorOpInBlock(*user);
        if (!top || !info.count(top) || info[top].unit == kFree ||
            info[top].forward)
          continue;
        least = std::min(least, info[top].unit);
      }
      if (least != INT64_MAX)
        i.unit = std::max(i.unit, least);
    }
  }

  // Stages of the units: the layout, or balanced on the cost model.
  SmallVector<int64_t> stageOfUnit(unitKinds.size(), 0);
  if (!layout.empty()) {
    FailureOr<SmallVector<std::string>> parsed = parseLayout(layout, loc);
    if (failed(parsed))
      return failure();
    if (int64_t(parsed->size()) != numStages)
      return emitError(loc) << "pp-partition: layout \"" << layout << "\" has "
                            << parsed->size() << " stages, "
                            << "expected " << numStages;
    std::string flat, expected;
    for (auto [s, units] : llvm::enumerate(*parsed)) {
      if (units.empty())
        return emitError(loc) << "pp-partition: stage " << s << " of layout \""
                              << layout << "\" is empty";
      for (char c : units) {
        if (flat.size() < stageOfUnit.size())
          stageOfUnit[flat.size()] = s;
        flat.push_back(c);
      }
    }
    for (const std::string &k : unitKinds)
      expected += k;
    if (flat != expected)
      return emitError(loc)
             << "pp-partition: layout \"" << layout << "\" lists units \""
             << flat << "\", the step has \"" << expected << "\"";
  } else {
    std::optional<CostModel> model =
        loadCostModel(getOperation(), "pp-partition", device);
    if (!model)
      return failure();
    SmallVector<double> cost(unitKinds.size(), 0);
    for (Operation &op : body.without_terminator())
      if (info[&op].unit != kFree)
        cost[info[&op].unit] += model->getComputeTime(&op);
    // best[s][u]: the least max-stage cost of units [0, u) on s stages.
    int64_t n = unitKinds.size();
    SmallVector<double> prefix(n + 1, 0);
    for (int64_t u = 0; u < n; ++u)
      prefix[u + 1] = prefix[u] + cost[u];
    std::vector<std::vector<double>> best(numStages + 1,
                                          std::vector<double>(n + 1, 1e300));
    std::vector<std::vector<int64_t>> cut(numStages + 1,
                                          std::vector<int64_t>(n + 1, 0));
    best[0][0] = 0;
    for (int64_t s = 1; s <= numStages; ++s)
      for (int64_t u = s; u <= n; ++u)
        for (int64_t c = s - 1; c < u; ++c) {
          double value = std::max(best[s - 1][c], prefix[u] - prefix[c]);
          if (value < best[s][u]) {
            best[s][u] = value;
            cut[s][u] = c;
          }
        }
    for (int64_t s = numStages, u = n; s > 0; --s) {
      int64_t c = cut[s][u];
      for (int64_t k = c; k < u; ++k)
        stageOfUnit[k] = s - 1;
      u = c;
    }
  }
  std::string layoutText;
  for (int64_t u = 0; u < int64_t(unitKinds.size()); ++u) {
    if (u > 0 && stageOfUnit[u] != stageOfUnit[u - 1])
      layoutText += "|";
    layoutText += unitKinds[u];
  }

  // Stages, microbatches and input gradients.
  SmallVector<Operation *> ops;
  for (Operation &op : body.without_terminator())
    ops.push_back(&op);
  for (Operation *op : ops) {
    OpInfo &i = info[op];
    if (i.unit == kFree)
      continue;
    i.stage = stageOfUnit[i.unit];
    if (microbatches == 1) {
      i.microbatch = 0;
      continue;
    }
    if (auto mb = op->getAttrOfType<IntegerAttr>(attrs::kMicrobatch)) {
      i.microbatch = mb.getInt();
      continue;
    }
    int64_t found = kNoMicrobatch;
    for (Value v : readValues(op)) {
      Operation *def = v.getDefiningOp();
      if (!def || !info.count(def) || info[def].stage == kFree)
        continue;
      int64_t m = info[def].microbatch;
      if (m == kNoMicrobatch)
        continue;
      found = (found == kNoMicrobatch || found == m) ? m : kManyMicrobatches;
    }
    i.microbatch = found;
  }
  // A value is used on other stages: the sets of (stage) users per op.
  auto usersStages = [&](Operation *op) {
    std::set<int64_t> result;
    for (Value r : op->getResults())
      for (Operation *user : r.getUsers()) {
        Operation *top = body.findAncestorOpInBlock(*user);
        if (!top || top == ret.getOperation() || !info.count(top))
          continue;
        if (info[top].stage != kFree && info[top].stage != info[op].stage)
          result.insert(info[top].stage);
      }
    return result;
  };
  bool split = *kind == ScheduleKind::ZeroBubbleH1;
  if (split) {
    // I = the backward ops (per stage and microbatch) another stage's ops
    // depend on, and their producers in the same backward.
    for (Operation *op : llvm::reverse(ops)) {
      OpInfo &i = info[op];
      if (i.stage == kFree || i.forward || i.microbatch < 0)
        continue;
      if (!usersStages(op).empty())
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

  // Positions in each stage's action list.
  std::vector<std::vector<Action>> actions =
      buildSchedule(*kind, numStages, microbatches);
  std::vector<std::map<std::pair<int, int64_t>, int64_t>> positionOf(numStages);
  for (int64_t s = 0; s < numStages; ++s)
    for (auto [p, action] : llvm::enumerate(actions[s]))
      positionOf[s][{int(action.kind), action.microbatch}] = p;
  // Whether stage s runs microbatch m's backward whole (else split in I, W).
  auto isWhole = [&](int64_t s, int64_t m) {
    return positionOf[s].count({int(ActionKind::Backward), m}) != 0;
  };
  auto naturalAction = [&](const OpInfo &i) -> std::optional<Action> {
    if (i.microbatch < 0)
      return std::nullopt;
    if (i.forward)
      return Action{ActionKind::Forward, i.microbatch};
    if (isWhole(i.stage, i.microbatch))
      return Action{ActionKind::Backward, i.microbatch};
    return Action{i.inputGrad ? ActionKind::InputGrad : ActionKind::WeightGrad,
                  i.microbatch};
  };
  // The first action of stage `s` that handles the same microbatch in the
  // same direction as `action`.
  auto matchingPosition = [&](int64_t s, Action action) -> int64_t {
    if (action.kind == ActionKind::Forward)
      return positionOf[s][{int(ActionKind::Forward), action.microbatch}];
    ActionKind first = isWhole(s, action.microbatch) ? ActionKind::Backward
                                                     : ActionKind::InputGrad;
    return positionOf[s][{int(first), action.microbatch}];
  };
  for (Operation *op : ops) {
    OpInfo &i = info[op];
    if (i.stage == kFree)
      continue;
    int64_t position = 0;
    if (std::optional<Action> natural = naturalAction(i))
      position = positionOf[i.stage][{int(natural->kind), natural->microbatch}];
    for (Value v : readValues(op)) {
      Operation *def = v.getDefiningOp();
      if (!def || !info.count(def) || info[def].stage == kFree)
        continue;
      const OpInfo &d = info[def];
      position = std::max(
          position,
          d.stage == i.stage
              ? d.position
              : matchingPosition(i.stage, actions[d.stage][d.position]));
    }
    i.position = position;
  }

  // Each stage's ops in program order.
  std::vector<SmallVector<Operation *>> order(numStages);
  for (Operation *op : ops)
    if (info[op].stage != kFree)
      order[info[op].stage].push_back(op);
  for (auto &stageOps : order)
    llvm::stable_sort(stageOps, [&](Operation *a, Operation *b) {
      return info[a].position < info[b].position;
    });
  // Messages between each pair of stages, in the sender's order.
  std::map<std::pair<int64_t, int64_t>, SmallVector<Value>> messages;
  for (int64_t s = 0; s < numStages; ++s)
    for (Operation *op : order[s])
      for (Value r : op->getResults()) {
        std::set<int64_t> to;
        for (Operation *user : r.getUsers()) {
          Operation *top = body.findAncestorOpInBlock(*user);
          if (top && top != ret.getOperation() && info[top].stage != kFree &&
              info[top].stage != s)
            to.insert(info[top].stage);
        }
        for (int64_t t : to)
          messages[{s, t}].push_back(r);
      }
  for (auto &[pair, values] : messages)
    if (values.size() > 32768)
      return emitError(loc)
             << "pp-partition: " << values.size() << " transfers from stage "
             << pair.first << " to stage " << pair.second
             << " (at most 32768, MPI's tags)";

  // Returned values: which stage returns each result.
  SmallVector<int64_t> resultStage(step.getNumResults(), kFree);
  for (auto [index, value] : llvm::enumerate(ret.getOperands())) {
    Operation *def = value.getDefiningOp();
    if (def && info.count(def) && info[def].stage != kFree)
      resultStage[index] = info[def].stage;
    else if (auto it = unitOf.find(value); it != unitOf.end())
      resultStage[index] = stageOfUnit[it->second];
  }

  // Every parameter is read on its own stage only.
  for (auto &[value, unit] : unitOf)
    for (Operation *user : value.getUsers()) {
      Operation *top = body.findAncestorOpInBlock(*user);
      if (!top || top == ret.getOperation() || !info.count(top))
        continue;
      if (info[top].stage != stageOfUnit[unit]) {
        auto arg = cast<BlockArgument>(value);
        return emitError(arg.getLoc())
               << "pp-partition: parameter '"
               << step.getArgAttrOfType<StringAttr>(
                          arg.getArgNumber(),
                          train::TrainDialect::kParamAttrName)
                      .getValue()
               << "' of stage " << stageOfUnit[unit] << " is also read on "
               << "stage " << info[top].stage
               << " (parameters shared across stages, such as tied "
                  "embeddings, are not supported)";
      }
    }

  // The arguments each stage reads: its ops' and their free producers'.
  auto argsReached = [&](Value root) {
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
      if (!def || def->getBlock() != &body || info[def].stage != kFree ||
          !seen.insert(def).second)
        continue;
      for (Value w : readValues(def))
        worklist.push_back(w);
    }
    return args;
  };
  std::vector<llvm::SetVector<unsigned>> stageArgs(numStages);
  for (int64_t s = 0; s < numStages; ++s)
    for (Operation *op : order[s])
      for (Value v : readValues(op))
        stageArgs[s].set_union(argsReached(v));
  // A result computed on a stage is returned by it. A free result (a shared
  // counter's update) is returned by every stage that reads what it is
  // computed from, else by the last.
  std::vector<SmallVector<unsigned>> stageResults(numStages);
  for (auto [index, value] : llvm::enumerate(ret.getOperands())) {
    if (resultStage[index] != kFree) {
      stageResults[resultStage[index]].push_back(index);
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

  // Emit the stage functions.
  OpBuilder moduleBuilder(step);
  MLIRContext *ctx = step.getContext();
  auto i64 = [&](int64_t v) {
    return IntegerAttr::get(IntegerType::get(ctx, 64), v);
  };
  for (int64_t s = 0; s < numStages; ++s) {
    llvm::SetVector<unsigned> args = stageArgs[s];
    SmallVector<unsigned> results = stageResults[s];
    llvm::sort(results);
    for (unsigned r : results)
      args.set_union(argsReached(ret.getOperand(r)));
    llvm::SmallVector<unsigned> argList(args.begin(), args.end());
    llvm::sort(argList);
    SmallVector<Type> argTypes, resultTypes;
    SmallVector<DictionaryAttr> argAttrs, resultAttrs;
    for (unsigned a : argList) {
      argTypes.push_back(step.getArgument(a).getType());
      argAttrs.push_back(step.getArgAttrDict(a));
    }
    for (unsigned r : results) {
      resultTypes.push_back(step.getResultTypes()[r]);
      resultAttrs.push_back(step.getResultAttrDict(r));
    }
    std::string name = (step.getSymName() + "_stage" + Twine(s)).str();
    auto func =
        func::FuncOp::create(moduleBuilder, loc, name,
                             FunctionType::get(ctx, argTypes, resultTypes));
    for (NamedAttribute attr : step->getDiscardableAttrs())
      func->setAttr(attr.getName(), attr.getValue());
    for (auto [k, attrsDict] : llvm::enumerate(argAttrs))
      if (attrsDict)
        func.setArgAttrs(k, attrsDict);
    for (auto [k, attrsDict] : llvm::enumerate(resultAttrs))
      if (attrsDict)
        func.setResultAttrs(k, attrsDict);
    func->setAttr(attrs::kPipelineStage, i64(s));
    func->setAttr(attrs::kPipeline,
                  DictionaryAttr::get(
                      ctx, {NamedAttribute(StringAttr::get(ctx, "stages"),
                                           i64(numStages)),
                            NamedAttribute(StringAttr::get(ctx, "microbatches"),
                                           i64(microbatches)),
                            NamedAttribute(StringAttr::get(ctx, "schedule"),
                                           StringAttr::get(ctx, schedule)),
                            NamedAttribute(StringAttr::get(ctx, "layout"),
                                           StringAttr::get(ctx, layoutText))}));
    Block *entry = func.addEntryBlock();
    OpBuilder b = OpBuilder::atBlockEnd(entry);
    IRMapping mapping;
    for (auto [k, a] : llvm::enumerate(argList))
      mapping.map(step.getArgument(a), entry->getArgument(k));
    Value comm;
    auto getComm = [&]() {
      if (!comm)
        comm = coll::CommWorldOp::create(b, loc,
                                         coll::CommType::get(ctx, numStages));
      return comm;
    };
    // Received values from each peer, in the peer's send order.
    std::map<int64_t, size_t> received;
    DenseMap<Value, Operation *> recvWaitOf;
    // Free ops, cloned on first use.
    std::function<void(Value)> materialize;
    auto receiveUpTo = [&](int64_t from, Value v) {
      SmallVector<Value> &queue = messages[{from, s}];
      size_t &next = received[from];
      while (next < queue.size() && !mapping.contains(v)) {
        Value value = queue[next];
        auto type = cast<RankedTensorType>(value.getType());
        auto start = coll::RecvStartOp::create(b, value.getLoc(),
                                               coll::FutureType::get(type),
                                               getComm(), from, int64_t(next));
        auto wait = coll::WaitOp::create(b, value.getLoc(), start.getFuture());
        mapping.map(value, wait.getResult());
        recvWaitOf[value] = wait;
        ++next;
      }
    };
    materialize = [&](Value v) {
      if (mapping.contains(v))
        return;
      Operation *def = v.getDefiningOp();
      if (!def || def->getBlock() != &body)
        return;
      if (info[def].stage == kFree) {
        for (Value w : readValues(def))
          materialize(w);
        b.clone(*def, mapping);
        return;
      }
      if (info[def].stage != s)
        receiveUpTo(info[def].stage, v);
    };
    // Sends waiting for their wait's place: (value sent, peer) -> start op.
    SmallVector<std::tuple<Value, int64_t, Operation *>> pendingSends;
    for (Operation *op : order[s]) {
      for (Value v : readValues(op)) {
        materialize(v);
        if (!mapping.contains(v))
          return op->emitOpError("pp-partition: internal error: an operand "
                                 "of stage ")
                 << s << " has no value there";
      }
      Operation *clone = b.clone(*op, mapping);
      const OpInfo &i = info[op];
      // The action it runs in (later than its own when an operand is).
      clone->setAttr(kActionAttr,
                     StringAttr::get(ctx, actions[s][i.position].str()));
      for (Value r : op->getResults())
        for (int64_t t = 0; t < numStages; ++t) {
          SmallVector<Value> &queue = messages[{s, t}];
          auto it = llvm::find(queue, r);
          if (t == s || it == queue.end())
            continue;
          auto send = coll::SendStartOp::create(
              b, op->getLoc(),
              coll::FutureType::get(RankedTensorType::get(
                  {0}, cast<RankedTensorType>(r.getType()).getElementType())),
              mapping.lookup(r), getComm(), t, int64_t(it - queue.begin()));
          pendingSends.push_back({r, t, send});
        }
    }
    for (unsigned r : results)
      materialize(ret.getOperand(r));
    SmallVector<Value> returned;
    for (unsigned r : results)
      returned.push_back(mapping.lookup(ret.getOperand(r)));
    auto newRet = func::ReturnOp::create(b, ret.getLoc(), returned);
    // Each send's wait: after the first received value that depends on what
    // it sent, else before the return.
    for (auto [value, peer, send] : pendingSends) {
      Operation *after = nullptr;
      // Ops of stage `peer` that depend on `value`.
      DenseSet<Operation *> reached;
      SmallVector<Operation *> worklist;
      for (Operation *user : value.getUsers())
        if (Operation *top = body.findAncestorOpInBlock(*user))
          worklist.push_back(top);
      while (!worklist.empty()) {
        Operation *op = worklist.pop_back_val();
        if (op == ret.getOperation() || !info.count(op) ||
            info[op].stage != peer || !reached.insert(op).second)
          continue;
        for (Value r : op->getResults())
          for (Operation *user : r.getUsers())
            if (Operation *top = body.findAncestorOpInBlock(*user))
              worklist.push_back(top);
      }
      for (Value back : messages[{peer, s}]) {
        Operation *wait = recvWaitOf.lookup(back);
        if (!wait || !reached.contains(back.getDefiningOp()))
          continue;
        if (!after || wait->isBeforeInBlock(after))
          after = wait;
      }
      if (after && !send->isBeforeInBlock(after))
        after = nullptr;
      b.setInsertionPoint(newRet);
      if (after)
        b.setInsertionPointAfter(after);
      coll::WaitOp::create(b, send->getLoc(),
                           cast<coll::SendStartOp>(send).getFuture());
    }
  }
  step.erase();
  return success();
}

} // namespace

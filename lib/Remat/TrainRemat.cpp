//===- TrainRemat.cpp - recompute activations under a memory budget -------===//

#include "Solvers.h"
#include "StepGraph.h"

#include "loom/Analysis/MemoryTimeline.h"
#include "loom/Dialect/Coll/CollDialect.h"
#include "loom/Dialect/Coll/Retime.h"
#include "loom/Dialect/Train/TrainDialect.h"
#include "loom/Remat/Passes.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/FormatVariadic.h"
#include <chrono>
#include <cmath>

namespace loom::remat {
#define GEN_PASS_DEF_TRAINREMATPASS
#include "loom/Remat/Passes.h.inc"
} // namespace loom::remat

using namespace mlir;
using namespace loom;
using namespace loom::remat;

namespace {

enum class Policy { Ilp, Chain, None, EveryLayer, Sqrt, Knapsack };

std::string formatMiB(int64_t bytes) {
  return llvm::formatv("{0:F2} MiB", double(bytes) / double(1 << 20));
}

/// `graph` for a clone of its function (`mapping` from the clone).
StepGraph remapGraph(const StepGraph &graph, func::FuncOp clone,
                     const IRMapping &mapping) {
  StepGraph copy = graph;
  copy.func = clone;
  copy.block = &clone.getBody().front();
  copy.forward.clear();
  for (Operation *op : graph.forward)
    copy.forward.insert(mapping.lookup(op));
  copy.nodeOf.clear();
  for (auto [index, node] : llvm::enumerate(copy.nodes)) {
    node.op = mapping.lookup(node.op);
    copy.nodeOf[node.op] = index;
  }
  copy.backwardGather.clear();
  for (auto [value, wait] : graph.backwardGather)
    copy.backwardGather[mapping.lookup(value)] = mapping.lookup(wait);
  return copy;
}

/// What a keep set does, counted on the memory timeline of the rewritten
/// step (the pass's own model plays no part).
struct Measured {
  int64_t peakBytes = 0;
  /// Activations live at the forward's last op.
  int64_t activationBytes = 0;
  unsigned clonedOps = 0;
  /// The solvers' layers the candidate was found with: runs of this many
  /// parameter groups.
  unsigned segment = 1;
};

/// `timeline` is `graph`'s block's.
Measured measure(const StepGraph &graph, const MemoryTimeline &timeline) {
  Block &block = *graph.block;
  Measured measured;
  measured.peakBytes = timeline.getPeakBytes();
  unsigned position = 0, boundary = 0;
  for (Operation &op : block) {
    if (graph.forward.contains(&op))
      boundary = position;
    ++position;
  }
  for (const BufferInterval &buffer : timeline.getBuffers())
    if (buffer.kind == BufferKind::Activation && buffer.begin <= boundary &&
        buffer.end > boundary)
      measured.activationBytes += buffer.bytes;
  return measured;
}

Measured measureRewritten(const StepGraph &graph, const KeepSet &keep) {
  IRMapping mapping;
  auto clone = cast<func::FuncOp>(graph.func->clone(mapping));
  StepGraph copy = remapGraph(graph, clone, mapping);
  unsigned cloned = rewrite(copy, keep);
  Measured measured = measure(
      copy, MemoryTimeline(*copy.block,
                           MemoryTimelineOptions::asPlanned(*copy.block)));
  measured.clonedOps = cloned;
  clone->erase();
  return measured;
}

double getRecomputeSeconds(const StepGraph &graph, const KeepSet &keep) {
  llvm::BitVector recomputed;
  if (!getRecomputed(graph, keep, recomputed))
    return std::numeric_limits<double>::infinity();
  double seconds = 0;
  for (unsigned index : recomputed.set_bits())
    seconds += graph.nodes[index].seconds;
  return seconds;
}

/// The step-level model: each layer's options, and from the keep-all
/// timeline what each class of positions needs (see ChainModel).
ChainModel buildChainModel(const StepGraph &graph,
                           ArrayRef<std::vector<LayerOption>> classOptions,
                           const MemoryTimeline &timeline) {
  unsigned numLayers = graph.layers.size();
  ChainModel chain;
  chain.numLayers = numLayers;
  chain.need.assign(numLayers + 1, {0, 0});
  for (unsigned layer = 0; layer < numLayers; ++layer) {
    chain.options.push_back(&classOptions[graph.layerClass[layer]]);
    chain.fullBytes.push_back(
        classOptions[graph.layerClass[layer]][0].keptBytes);
  }
  // A layer's node, for the backward's position.
  auto layerRead = [&](Operation &op) {
    int layer = kEpilogue;
    for (Value operand : op.getOperands()) {
      int node = graph.getNodeOf(operand);
      if (node >= 0 && graph.nodes[node].layer >= 0)
        layer = std::min(layer, graph.nodes[node].layer);
    }
    return layer;
  };
  Operation *lastForward = nullptr, *lastLayerRead = nullptr;
  for (Operation &op : *graph.block) {
    if (graph.forward.contains(&op))
      lastForward = &op;
    else if (layerRead(op) != kEpilogue)
      lastLayerRead = &op;
  }
  unsigned position = 0;
  // The forward's layer (of its last node) going up; the backward's (of the
  // last layer node it reads) going down; after the last such read (the
  // prologue's gradient, the optimizer) no phantom is alive.
  int forwardLayer = kPrologue, state = kEpilogue;
  bool inForward = true, inLayers = true;
  for (Operation &op : *graph.block) {
    unsigned c = 0, extra = 0;
    if (inForward) {
      if (auto it = graph.nodeOf.find(&op); it != graph.nodeOf.end())
        forwardLayer = graph.nodes[it->second].layer;
      c = forwardLayer == kEpilogue ? numLayers
          : forwardLayer < 0        ? 0
                                    : unsigned(forwardLayer);
      inForward = &op != lastForward;
    } else if (inLayers) {
      state = std::min(state, layerRead(op));
      if (state == kEpilogue) {
        c = numLayers;
      } else {
        c = state + 1;
        extra = 1;
      }
      inLayers = &op != lastLayerRead;
    }
    int64_t live =
        timeline.getLiveBytes(position) + timeline.getTransientBytes(position);
    chain.need[c][extra] = std::max(chain.need[c][extra], live);
    ++position;
  }
  return chain;
}

/// Keeps each layer's output only at the end of every `segment` layers
/// (every layer with 1, Chen's sqrt(n) with ceil(sqrt(n))); the rest is
/// recomputed.
KeepSet everyLayer(const StepGraph &graph, unsigned segment) {
  KeepSet keep = keepAll(graph);
  unsigned numLayers = graph.layers.size();
  for (auto [layer, members] : llvm::enumerate(graph.layers)) {
    // A segment's last layer keeps its output: the next segment's input.
    bool boundary = (layer + 1) % segment == 0 || layer + 1 == numLayers;
    for (unsigned index : members) {
      const Node &node = graph.nodes[index];
      if (node.recomputable && !(node.interface && boundary))
        keep.reset(index);
    }
  }
  return keep;
}

/// PyTorch's activation_memory_budget: matmuls and attention are never
/// recomputed; of the rest, the 0-1 knapsack keeps the set with the most
/// recompute time within the activation budget, which is the budget less
/// what the keep-all step holds besides activations. It does not check the
/// peak it reaches.
KeepSet knapsack(const StepGraph &graph, int64_t keepAllPeak, int64_t budget) {
  KeepSet keep = keepAll(graph);
  SmallVector<unsigned> items;
  int64_t activations = 0;
  for (const auto &members : graph.layers)
    for (unsigned index : members) {
      const Node &node = graph.nodes[index];
      if (!node.needed)
        continue;
      activations += node.bytes;
      if (!node.heavy && node.recomputable)
        items.push_back(index);
    }
  int64_t capacity = budget - (keepAllPeak - activations);
  // What the heavy nodes keep comes off first.
  int64_t fixed = activations;
  for (unsigned index : items)
    fixed -= graph.nodes[index].bytes;
  capacity = std::max<int64_t>(0, capacity - fixed);
  int64_t total = 0;
  for (unsigned index : items)
    total += graph.nodes[index].bytes;
  constexpr int64_t kStates = 1 << 14;
  int64_t unit = std::max<int64_t>(1, (total + kStates - 1) / kStates);
  int64_t states = std::min(capacity / unit, total / unit) + 1;
  std::vector<double> best(states, 0);
  std::vector<llvm::BitVector> taken(items.size(), llvm::BitVector(states));
  for (auto [i, index] : llvm::enumerate(items)) {
    const Node &node = graph.nodes[index];
    int64_t weight = (node.bytes + unit - 1) / unit;
    for (int64_t s = states - 1; s >= weight; --s)
      if (best[s - weight] + node.seconds > best[s]) {
        best[s] = best[s - weight] + node.seconds;
        taken[i].set(s);
      }
  }
  int64_t s = states - 1;
  for (unsigned i = items.size(); i-- > 0;) {
    if (taken[i][s]) {
      s -= (graph.nodes[items[i]].bytes + unit - 1) / unit;
      continue;
    }
    keep.reset(items[i]);
  }
  return keep;
}

/// The solutions of `policy` (ilp or chain) on `graph`'s layers at a fixed
/// ladder of modelled budgets, from keeping everything to the leanest, as
/// keep sets; the ladder depends on the step alone, so that a larger budget
/// sees every candidate a smaller one does. `seconds` bounds the CBC solves
/// (half for the layers' programs, the rest for the step-level ones).
std::vector<KeepSet> solveLadder(const StepGraph &graph,
                                 const MemoryTimeline &timeline,
                                 int64_t keptAllPeak, Policy policy,
                                 double seconds, double gap, int64_t maxNodes,
                                 SolveStats &stats, SolveStats &stepStats,
                                 unsigned &fallbacks) {
  auto began = std::chrono::steady_clock::now();
  auto remainingSeconds = [&] {
    return seconds - std::chrono::duration<double>(
                         std::chrono::steady_clock::now() - began)
                         .count();
  };
  unsigned numLayers = graph.layers.size();
  // Options per distinct layer, the layers' share of the time split among
  // their solves (18 per distinct layer).
  std::vector<std::vector<LayerOption>> classOptions(graph.numClasses);
  std::vector<bool> solved(graph.numClasses, false);
  unsigned classesLeft = graph.numClasses;
  double layerSeconds = remainingSeconds() / 2;
  auto layersBegan = std::chrono::steady_clock::now();
  auto layerLimit = [&] {
    double spent = std::chrono::duration<double>(
                       std::chrono::steady_clock::now() - layersBegan)
                       .count();
    return std::max(0.0, layerSeconds - spent) / (18.0 * classesLeft);
  };
  for (unsigned layer = 0; layer < numLayers; ++layer) {
    unsigned cls = graph.layerClass[layer];
    if (solved[cls])
      continue;
    solved[cls] = true;
    classOptions[cls] = computeLayerOptions(graph, graph.layers[layer],
                                            layerLimit, gap, maxNodes, stats);
    --classesLeft;
  }
  ChainModel chain = buildChainModel(graph, classOptions, timeline);
  // Each layer's options keep less and less: its leanest is the last.
  std::vector<unsigned> leanest(numLayers);
  for (unsigned layer = 0; layer < numLayers; ++layer)
    leanest[layer] = chain.options[layer]->size() - 1;
  int64_t top = keptAllPeak, bottom = chain.getPeak(leanest);
  constexpr unsigned kLadder = 48;
  std::vector<std::vector<unsigned>> choices;
  choices.push_back(std::vector<unsigned>(numLayers, 0));
  choices.push_back(leanest);
  for (unsigned step = 0; step <= kLadder; ++step) {
    unsigned solvesLeft = kLadder + 1 - step;
    int64_t modelBudget =
        bottom + int64_t(double(top - bottom) * step / kLadder);
    std::optional<std::vector<unsigned>> choice =
        solveChain(chain, modelBudget);
    if (!choice)
      continue;
    if (policy == Policy::Ilp) {
      // Each solve gets its share of the time left.
      double limit = remainingSeconds() / solvesLeft;
      SolveStats one;
      std::optional<std::vector<unsigned>> ilp;
      if (limit >= 0.01)
        ilp = solveChainIlp(chain, modelBudget, *choice, limit, gap, maxNodes,
                            one);
      stats.add(one);
      stepStats.add(one);
      // CBC's answer stands where it is within the budget and no slower
      // than the chain's (a solve stopped by time or gap may be).
      if (!ilp)
        ++fallbacks;
      else if (chain.getPeak(*ilp) <= modelBudget &&
               chain.getSeconds(*ilp) <= chain.getSeconds(*choice))
        choice = ilp;
    }
    if (!llvm::is_contained(choices, *choice))
      choices.push_back(*choice);
  }
  // And a ladder on the kept bytes alone, for activation-budget: the peak
  // ladder's solutions keep what does not raise the peak.
  int64_t keptLeast = 0, keptMost = 0;
  for (unsigned layer = 0; layer < numLayers; ++layer) {
    keptLeast += (*chain.options[layer])[leanest[layer]].keptBytes;
    keptMost += chain.fullBytes[layer];
  }
  constexpr unsigned kKeptLadder = 24;
  for (unsigned step = 0; step <= kKeptLadder; ++step) {
    int64_t kept =
        keptLeast + int64_t(double(keptMost - keptLeast) * step / kKeptLadder);
    if (std::optional<std::vector<unsigned>> choice = solveKept(chain, kept))
      if (!llvm::is_contained(choices, *choice))
        choices.push_back(*choice);
  }
  std::vector<KeepSet> keeps;
  for (ArrayRef<unsigned> choice : choices) {
    KeepSet keep = keepAll(graph);
    for (unsigned layer = 0; layer < numLayers; ++layer) {
      const LayerOption &option = (*chain.options[layer])[choice[layer]];
      for (unsigned i : option.recomputed.set_bits())
        keep.reset(graph.layers[layer][i]);
    }
    keeps.push_back(std::move(keep));
  }
  return keeps;
}

struct TrainRematPass
    : public loom::remat::impl::TrainRematPassBase<TrainRematPass> {
  using TrainRematPassBase::TrainRematPassBase;

  void runOnOperation() override {
    std::optional<Policy> policy =
        llvm::StringSwitch<std::optional<Policy>>(solver)
            .Case("ilp", Policy::Ilp)
            .Case("chain", Policy::Chain)
            .Case("none", Policy::None)
            .Case("every-layer", Policy::EveryLayer)
            .Case("sqrt", Policy::Sqrt)
            .Case("knapsack", Policy::Knapsack)
            .Default(std::nullopt);
    if (!policy) {
      emitError(getOperation().getLoc())
          << "train-remat: expected solver ilp, chain, none, every-layer, "
             "sqrt or knapsack, got '"
          << solver << "'";
      return signalPassFailure();
    }
    if (!(activationBudget >= 0 && activationBudget <= 1)) {
      emitError(getOperation().getLoc())
          << "train-remat: expected activation-budget in [0, 1], got "
          << double(activationBudget);
      return signalPassFailure();
    }
    if (!(budgetMb >= 0) || !std::isfinite(double(budgetMb)) ||
        !(timeLimitSeconds > 0) || !(gap >= 0)) {
      emitError(getOperation().getLoc())
          << "train-remat: expected budget-mb >= 0, time-limit-s > 0 and "
             "gap >= 0, got "
          << double(budgetMb) << ", " << double(timeLimitSeconds) << " and "
          << double(gap);
      return signalPassFailure();
    }
    if (*policy == Policy::Knapsack && budgetMb == 0) {
      emitError(getOperation().getLoc(),
                "train-remat: the knapsack policy needs "
                "budget-mb (its activation budget)");
      return signalPassFailure();
    }
    std::optional<CostModel> model =
        getCostModel(getOperation(), "train-remat");
    if (!model)
      return signalPassFailure();
    unsigned steps = 0;
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (func.isExternal() || !train::getLossResultIndex(func))
        continue;
      ++steps;
      if (failed(runOnStep(func, *policy, *model)))
        return signalPassFailure();
    }
    if (!steps) {
      emitError(getOperation().getLoc(),
                "train-remat: expected a training step (a "
                "function with a train.loss result)");
      return signalPassFailure();
    }
  }

  LogicalResult runOnStep(func::FuncOp func, Policy policy,
                          const CostModel &model);
};

LogicalResult TrainRematPass::runOnStep(func::FuncOp func, Policy policy,
                                        const CostModel &model) {
  auto began = std::chrono::steady_clock::now();
  // What is left of time-limit-s for CBC.
  auto remainingSeconds = [&] {
    return double(timeLimitSeconds) -
           std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                         began)
               .count();
  };
  // The order the budget is counted on: the scheduler's starting point.
  for (Block &block : func.getBody())
    coll::synchronize(block);
  FailureOr<StepGraph> built = StepGraph::build(func, model);
  if (failed(built))
    return failure();
  StepGraph &graph = *built;
  int64_t budget =
      int64_t(std::min(std::floor(double(budgetMb) * 1024.0 * 1024.0), 0x1p62));
  MemoryTimeline keptAllTimeline(
      *graph.block, MemoryTimelineOptions::asPlanned(*graph.block));
  Measured keptAll = measure(graph, keptAllTimeline);
  // activation-budget's bound on the activations at the loss.
  int64_t activationLimit = int64_t(
      std::floor(double(activationBudget) * double(keptAll.activationBytes)));
  unsigned numLayers = graph.layers.size();

  KeepSet chosen = keepAll(graph);
  // All CBC solves, and the step-level ones.
  SolveStats stats, stepStats;
  unsigned fallbacks = 0, candidates = 1;
  // The peaks of the Pareto candidates (ilp, chain), ascending.
  SmallVector<int64_t> candidatePeaks;
  std::optional<Measured> realised = keptAll;
  switch (policy) {
  case Policy::None:
    break;
  case Policy::EveryLayer:
    chosen = everyLayer(graph, 1);
    realised.reset();
    break;
  case Policy::Sqrt:
    chosen = everyLayer(
        graph, std::max(1u, unsigned(std::ceil(std::sqrt(double(numLayers))))));
    realised.reset();
    break;
  case Policy::Knapsack:
    chosen = knapsack(graph, keptAll.peakBytes, budget);
    realised.reset();
    break;
  case Policy::Ilp:
  case Policy::Chain: {
    if ((budget == 0 || budget >= keptAll.peakBytes) &&
        activationLimit >= keptAll.activationBytes)
      break; // nothing to do within the budgets
    // Which bound the step without layers cannot meet.
    std::string unmet =
        budget && budget < keptAll.peakBytes
            ? llvm::formatv("budget-mb={0:F2} is below the step's peak, {1}",
                            double(budgetMb), formatMiB(keptAll.peakBytes))
                  .str()
            : llvm::formatv("activation-budget={0:F3} is below the "
                            "activations the step keeps at the loss, {1}",
                            double(activationBudget),
                            formatMiB(keptAll.activationBytes))
                  .str();
    if (numLayers == 0 && leanestBelowFloor) {
      emitRemark(func.getLoc())
          << "train-remat: " << unmet
          << ", and the step has no layers to recompute; it keeps "
             "everything (leanest-below-floor)";
      candidatePeaks.push_back(keptAll.peakBytes);
      break;
    }
    if (numLayers == 0)
      return emitError(func.getLoc())
             << "train-remat: " << unmet
             << ", and the step has no layers (train.param groups such as "
                "layers.0.*) to recompute";
    // The solvers' layers: each parameter group, then runs of 2, 4, ...
    // groups up to max-segment (and the whole chain where it is within
    // it), each grouping solved on its own; every solution of every
    // grouping is a candidate. The time left is shared among the groupings.
    SmallVector<unsigned> segments{1};
    unsigned longest = std::min<unsigned>(maxSegment, numLayers);
    for (unsigned segment = 2; segment < longest; segment *= 2)
      segments.push_back(segment);
    if (longest > 1)
      segments.push_back(longest);
    std::vector<std::pair<KeepSet, unsigned>> solutions;
    for (auto [i, segment] : llvm::enumerate(segments)) {
      std::optional<StepGraph> runs;
      if (segment > 1) {
        FailureOr<StepGraph> built = StepGraph::build(func, model, segment);
        if (failed(built))
          return failure();
        runs = std::move(*built);
      }
      double share = remainingSeconds() / double(segments.size() - i);
      for (KeepSet &keep : solveLadder(runs ? *runs : graph, keptAllTimeline,
                                       keptAll.peakBytes, policy, share, gap,
                                       maxNodes, stats, stepStats, fallbacks))
        if (!llvm::any_of(solutions,
                          [&](const auto &seen) { return seen.first == keep; }))
          solutions.emplace_back(std::move(keep), segment);
    }
    candidates = solutions.size();
    // Each candidate's (recompute seconds, measured peak, what it keeps).
    std::vector<std::tuple<double, Measured, KeepSet>> measuredCandidates;
    for (const auto &[keep, segment] : solutions) {
      Measured measured = measureRewritten(graph, keep);
      measured.segment = segment;
      measuredCandidates.emplace_back(getRecomputeSeconds(graph, keep),
                                      measured, keep);
    }
    // The fastest within `limit`, the smaller peak on a tie.
    auto pick =
        [&](int64_t limit) -> const std::tuple<double, Measured, KeepSet> * {
      const std::tuple<double, Measured, KeepSet> *best = nullptr;
      for (const auto &candidate : measuredCandidates) {
        const auto &[seconds, measured, keep] = candidate;
        if (measured.peakBytes > limit ||
            measured.activationBytes > activationLimit)
          continue;
        if (!best || seconds < std::get<0>(*best) ||
            (seconds == std::get<0>(*best) &&
             measured.peakBytes < std::get<1>(*best).peakBytes))
          best = &candidate;
      }
      return best;
    };
    // The least activations any candidate keeps; the smallest peak among
    // those within activation-budget.
    int64_t leastActivations = keptAll.activationBytes;
    for (const auto &candidate : measuredCandidates)
      leastActivations =
          std::min(leastActivations, std::get<1>(candidate).activationBytes);
    if (leastActivations > activationLimit)
      return emitError(func.getLoc())
             << "train-remat: activation-budget="
             << llvm::formatv("{0:F3}", double(activationBudget))
             << " is below the least activations rematerialisation keeps, "
             << formatMiB(leastActivations) << " (" << leastActivations
             << " bytes, "
             << llvm::formatv("{0:F4}", double(leastActivations) /
                                            double(keptAll.activationBytes))
             << " of the " << formatMiB(keptAll.activationBytes)
             << " the step keeps at the loss)";
    int64_t smallest = std::numeric_limits<int64_t>::max();
    for (const auto &candidate : measuredCandidates)
      if (std::get<1>(candidate).activationBytes <= activationLimit)
        smallest = std::min(smallest, std::get<1>(candidate).peakBytes);
    // The Pareto front: the peaks at which a larger budget picks another
    // candidate, ascending.
    for (const auto &candidate : measuredCandidates) {
      int64_t peak = std::get<1>(candidate).peakBytes;
      if (pick(peak) == &candidate)
        candidatePeaks.push_back(peak);
    }
    llvm::sort(candidatePeaks);
    candidatePeaks.erase(llvm::unique(candidatePeaks), candidatePeaks.end());
    const std::tuple<double, Measured, KeepSet> *best =
        pick(budget ? budget : std::numeric_limits<int64_t>::max());
    if (!best && leanestBelowFloor) {
      best = pick(smallest);
      emitRemark(func.getLoc())
          << "train-remat: budget-mb="
          << llvm::formatv("{0:F2}", double(budgetMb))
          << " is below the smallest peak rematerialisation reaches; it "
             "takes that peak, "
          << formatMiB(smallest) << " (leanest-below-floor)";
    }
    if (!best)
      return emitError(func.getLoc())
             << "train-remat: budget-mb="
             << llvm::formatv("{0:F2}", double(budgetMb))
             << " is below the smallest peak rematerialisation reaches, "
             << formatMiB(smallest)
             << (activationLimit < keptAll.activationBytes
                     ? " within activation-budget"
                     : "")
             << " (keeping everything: " << formatMiB(keptAll.peakBytes) << ")";
    chosen = std::get<2>(*best);
    realised = std::get<1>(*best);
    break;
  }
  }

  llvm::BitVector recomputed;
  if (!getRecomputed(graph, chosen, recomputed))
    return emitError(func.getLoc(),
                     "train-remat: the policy recomputes an op that "
                     "cannot be recomputed");
  double recomputeSeconds = getRecomputeSeconds(graph, chosen);
  unsigned cloned = rewrite(graph, chosen);
  Measured after = measure(
      graph, MemoryTimeline(*graph.block,
                            MemoryTimelineOptions::asPlanned(*graph.block)));
  after.clonedOps = cloned;
  if (realised && realised->peakBytes != after.peakBytes)
    return emitError(func.getLoc())
           << "train-remat: internal error: the rewrite's peak "
           << formatMiB(after.peakBytes) << " differs from the candidate's "
           << formatMiB(realised->peakBytes);
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - began)
          .count();

  Builder b(func.getContext());
  SmallVector<NamedAttribute> fields{
      b.getNamedAttr("policy", b.getStringAttr(solver)),
      b.getNamedAttr("budget_bytes", b.getI64IntegerAttr(budget)),
      b.getNamedAttr("peak_bytes", b.getI64IntegerAttr(after.peakBytes)),
      b.getNamedAttr("keep_all_peak_bytes",
                     b.getI64IntegerAttr(keptAll.peakBytes)),
      b.getNamedAttr("activation_bytes",
                     b.getI64IntegerAttr(after.activationBytes)),
      b.getNamedAttr("keep_all_activation_bytes",
                     b.getI64IntegerAttr(keptAll.activationBytes)),
      b.getNamedAttr("recomputed_ops", b.getI64IntegerAttr(recomputed.count())),
      b.getNamedAttr("cloned_ops", b.getI64IntegerAttr(cloned)),
      b.getNamedAttr("recompute_us", b.getF64FloatAttr(recomputeSeconds * 1e6)),
      b.getNamedAttr("layers", b.getI64IntegerAttr(numLayers)),
      b.getNamedAttr("layer_classes", b.getI64IntegerAttr(graph.numClasses)),
      b.getNamedAttr("segment_layers",
                     b.getI64IntegerAttr(realised ? realised->segment : 1)),
      b.getNamedAttr("candidates", b.getI64IntegerAttr(candidates)),
      b.getNamedAttr("candidate_peak_bytes",
                     b.getDenseI64ArrayAttr(candidatePeaks)),
      b.getNamedAttr("cbc_solves", b.getI64IntegerAttr(stats.solves)),
      b.getNamedAttr("cbc_reused", b.getI64IntegerAttr(stats.reused)),
      b.getNamedAttr("cbc_starts_kept", b.getI64IntegerAttr(stats.startsKept)),
      b.getNamedAttr("cbc_timeouts", b.getI64IntegerAttr(stats.timeouts)),
      b.getNamedAttr("cbc_worst_gap", b.getF64FloatAttr(stats.worstGap)),
      b.getNamedAttr("fallbacks", b.getI64IntegerAttr(fallbacks)),
      b.getNamedAttr("layer_fallbacks",
                     b.getI64IntegerAttr(stats.layerFallbacks))};
  func->setAttr("loom.remat", b.getDictionaryAttr(fields));

  if (stats.timeouts) {
    InFlightDiagnostic remark = emitRemark(func.getLoc());
    remark << "train-remat: CBC stopped at a limit (its share of time-limit-s="
           << llvm::formatv("{0:F1}", double(timeLimitSeconds));
    if (maxNodes >= 0)
      remark << ", max-nodes=" << int64_t(maxNodes);
    remark << ") on " << stats.timeouts << " of " << stats.solves
           << " solves before proving their best solutions optimal; those "
              "stand, up to "
           << llvm::formatv("{0:P}", stats.worstGap)
           << " worse than CBC's bound";
  }
  if (fallbacks)
    emitRemark(func.getLoc())
        << "train-remat: the step-level ILP has no solution on " << fallbacks
        << " of its solves (" << stepStats.infeasible << " proven infeasible, "
        << fallbacks - std::min(fallbacks, stepStats.infeasible)
        << " out of time); the chain's solution (its warm start) stands "
           "there";
  if (stats.layerFallbacks)
    emitRemark(func.getLoc())
        << "train-remat: CBC found no option in time for "
        << stats.layerFallbacks << " distinct layers; they keep everything";
  if (budget && policy != Policy::Ilp && policy != Policy::Chain &&
      after.peakBytes > budget)
    emitRemark(func.getLoc())
        << "train-remat: the " << solver << " baseline's peak "
        << formatMiB(after.peakBytes)
        << " is above budget-mb=" << llvm::formatv("{0:F2}", double(budgetMb))
        << " (baselines do not meet a budget)";
  InFlightDiagnostic summary = emitRemark(func.getLoc());
  summary << "train-remat: " << solver << " recomputes " << recomputed.count()
          << " ops (" << llvm::formatv("{0:F3}", recomputeSeconds * 1e3)
          << " ms); peak " << formatMiB(after.peakBytes)
          << " (keeping everything: " << formatMiB(keptAll.peakBytes)
          << "), activations " << formatMiB(after.activationBytes) << " (from "
          << formatMiB(keptAll.activationBytes) << "); "
          << llvm::formatv("{0:F2}", seconds) << " s, CBC "
          << llvm::formatv("{0:F2}", stats.seconds) << " s";
  if (stats.reused)
    summary << " (" << stats.reused << " of " << stats.solves
            << " solves reused from earlier in this process)";
  return success();
}

} // namespace

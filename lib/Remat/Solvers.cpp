//===- Solvers.cpp - options per layer, and the chain over layers ---------===//

#include "Solvers.h"
#include "Milp.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace loom;
using namespace loom::remat;

void SolveStats::add(const SolveStats &other) {
  solves += other.solves;
  timeouts += other.timeouts;
  infeasible += other.infeasible;
  unsolved += other.unsolved;
  startsKept += other.startsKept;
  layerFallbacks += other.layerFallbacks;
  reused += other.reused;
  seconds += other.seconds;
  worstGap = std::max(worstGap, other.worstGap);
}

static void record(SolveStats &stats, const Milp::Result &result) {
  ++stats.solves;
  stats.seconds += result.seconds;
  if (result.status == Milp::Result::TimeLimitFeasible ||
      result.status == Milp::Result::TimeLimitNoSolution)
    ++stats.timeouts;
  if (result.status == Milp::Result::Infeasible)
    ++stats.infeasible;
  if (!result.hasSolution())
    ++stats.unsolved;
  if (result.startKept)
    ++stats.startsKept;
  if (result.cached)
    ++stats.reused;
  stats.worstGap = std::max(stats.worstGap, result.gap);
}

//===----------------------------------------------------------------------===//
// One layer
//===----------------------------------------------------------------------===//

namespace {

/// The layer's 0-1 program; rows for the budgets are added per solve.
struct LayerProgram {
  const StepGraph &graph;
  ArrayRef<unsigned> members;
  /// Column of s_i and r_i per member, -1 when fixed at 0.
  std::vector<int> save, recompute;
  /// Kept bytes no option changes (interfaces).
  int64_t fixedBytes = 0;
  int64_t unit = 1;
  Milp base;

  LayerProgram(const StepGraph &graph, ArrayRef<unsigned> members)
      : graph(graph), members(members) {}

  const Node &node(unsigned i) const { return graph.nodes[members[i]]; }
  double units(unsigned i) const {
    return std::ceil(double(node(i).bytes) / double(unit));
  }

  /// Objective weights: time first, then recomputed bytes, then kept bytes.
  void build() {
    double totalSeconds = 1e-30, totalBytes = 0;
    for (unsigned i = 0; i < members.size(); ++i) {
      totalSeconds += node(i).seconds;
      totalBytes += double(node(i).bytes);
    }
    unit = std::max<int64_t>(1, int64_t(std::ceil(totalBytes / 1e6)));
    double byteScale = totalBytes > 0 ? 1.0 / totalBytes : 0;
    DenseMap<unsigned, unsigned> local;
    for (auto [i, member] : llvm::enumerate(members))
      local[member] = i;
    save.assign(members.size(), -1);
    recompute.assign(members.size(), -1);
    for (unsigned i = 0; i < members.size(); ++i) {
      const Node &n = node(i);
      if (n.interface) {
        if (n.needed)
          fixedBytes += n.bytes;
        continue;
      }
      save[i] = base.addBinary(1e-6 * double(n.bytes) * byteScale);
      if (n.recomputable)
        recompute[i] = base.addBinary(n.seconds / totalSeconds +
                                      1e-3 * double(n.bytes) * byteScale);
    }
    for (unsigned i = 0; i < members.size(); ++i) {
      if (save[i] < 0)
        continue;
      if (node(i).needed) {
        SmallVector<std::pair<int, double>> row{{save[i], 1.0}};
        if (recompute[i] >= 0)
          row.push_back({recompute[i], 1.0});
        base.addRow(row, 1, 1e30);
      }
      if (recompute[i] < 0)
        continue;
      for (unsigned operand : node(i).operands) {
        auto it = local.find(operand);
        if (it == local.end() || save[it->second] < 0)
          continue; // outside the layer, or an interface: kept
        SmallVector<std::pair<int, double>> row{{save[it->second], 1.0},
                                                {recompute[i], -1.0}};
        if (recompute[it->second] >= 0)
          row.push_back({recompute[it->second], 1.0});
        base.addRow(row, 0, 1e30);
      }
    }
  }

  /// Kept bytes (with `andRecomputed`, kept + recomputed) <= limit units.
  Milp withBudget(double limitUnits, bool andRecomputed) const {
    Milp milp = base;
    SmallVector<std::pair<int, double>> row;
    for (unsigned i = 0; i < members.size(); ++i) {
      if (save[i] >= 0)
        row.push_back({save[i], units(i)});
      if (andRecomputed && recompute[i] >= 0)
        row.push_back({recompute[i], units(i)});
    }
    milp.addRow(row, -1e30, limitUnits);
    return milp;
  }

  LayerOption toOption(ArrayRef<double> values) const {
    LayerOption option;
    option.recomputed.resize(members.size());
    option.keptBytes = fixedBytes;
    for (unsigned i = 0; i < members.size(); ++i) {
      if (save[i] >= 0 && values[save[i]] > 0.5)
        option.keptBytes += node(i).bytes;
      if (recompute[i] >= 0 && values[recompute[i]] > 0.5) {
        option.recomputed.set(i);
        option.recomputedBytes += node(i).bytes;
        option.seconds += node(i).seconds;
      }
    }
    return option;
  }

  /// The least kept without a solve: each needed node recomputed where it
  /// can be, with what it reads in the layer, transitively; what cannot be
  /// recomputed is kept. The least-kept program's optimum up to ties, found
  /// the same way on every machine (CBC may not close a run's program in
  /// its share of the time).
  LayerOption recomputeEverything() const {
    std::vector<double> values(base.getNumColumns(), 0.0);
    DenseMap<unsigned, unsigned> local;
    for (auto [i, member] : llvm::enumerate(members))
      local[member] = i;
    SmallVector<unsigned> worklist;
    auto take = [&](unsigned i) {
      if (recompute[i] >= 0) {
        if (values[recompute[i]] == 0.0) {
          values[recompute[i]] = 1.0;
          worklist.push_back(i);
        }
      } else if (save[i] >= 0) {
        values[save[i]] = 1.0;
      }
    };
    for (unsigned i = 0; i < members.size(); ++i)
      if (node(i).needed)
        take(i);
    while (!worklist.empty())
      for (unsigned operand : node(worklist.pop_back_val()).operands)
        if (auto it = local.find(operand); it != local.end())
          take(it->second);
    return toOption(values);
  }

  LayerOption keepEverything() const {
    LayerOption option;
    option.recomputed.resize(members.size());
    option.keptBytes = fixedBytes;
    for (unsigned i = 0; i < members.size(); ++i)
      if (save[i] >= 0 && node(i).needed)
        option.keptBytes += node(i).bytes;
    return option;
  }
};

bool dominates(const LayerOption &a, const LayerOption &b) {
  return a.keptBytes <= b.keptBytes && a.recomputedBytes <= b.recomputedBytes &&
         a.seconds <= b.seconds * (1 + 1e-12) &&
         (a.keptBytes < b.keptBytes || a.recomputedBytes < b.recomputedBytes ||
          a.seconds < b.seconds * (1 - 1e-12));
}

} // namespace

std::vector<LayerOption> loom::remat::computeLayerOptions(
    const StepGraph &graph, ArrayRef<unsigned> members,
    function_ref<double()> limit, double gap, int64_t maxNodes,
    SolveStats &stats) {
  LayerProgram program(graph, members);
  program.build();
  std::vector<LayerOption> found{program.keepEverything()};
  // Nothing to choose (a group of views and free ops only): no program.
  if (program.base.getNumColumns() == 0)
    return found;
  found.push_back(program.recomputeEverything());
  // Keeping everything, in the budget rows' (rounded-up) units.
  double keptAll = 0;
  for (unsigned i = 0; i < members.size(); ++i)
    if (program.save[i] >= 0 && program.node(i).needed)
      keptAll += program.units(i);
  // The extremes: least kept, then least kept + recomputed; then a grid of
  // budgets between each and keeping everything.
  for (bool andRecomputed : {false, true}) {
    // The least budget: the budgeted bytes minimised, time only breaking
    // ties.
    double lowest;
    {
      Milp least = program.withBudget(keptAll, andRecomputed);
      for (unsigned i = 0; i < members.size(); ++i) {
        double tie = 1e-6 * program.node(i).seconds;
        if (program.save[i] >= 0)
          least.setCost(program.save[i], program.units(i));
        if (program.recompute[i] >= 0)
          least.setCost(program.recompute[i],
                        (andRecomputed ? program.units(i) : 0) + tie);
      }
      Milp::Result result = least.solve(limit(), 0, {}, maxNodes);
      record(stats, result);
      if (!result.hasSolution()) {
        ++stats.layerFallbacks;
        return {program.keepEverything()};
      }
      lowest = 0;
      for (unsigned i = 0; i < members.size(); ++i) {
        if (program.save[i] >= 0 && result.values[program.save[i]] > 0.5)
          lowest += program.units(i);
        if (andRecomputed && program.recompute[i] >= 0 &&
            result.values[program.recompute[i]] > 0.5)
          lowest += program.units(i);
      }
    }
    // The fastest option within it.
    Milp::Result best =
        program.withBudget(lowest, andRecomputed)
            .solve(limit(), gap, {}, maxNodes);
    record(stats, best);
    if (!best.hasSolution()) {
      ++stats.layerFallbacks;
      return {program.keepEverything()};
    }
    double hi = lowest;
    found.push_back(program.toOption(best.values));
    constexpr unsigned kGrid = 8;
    for (unsigned k = 1; k < kGrid; ++k) {
      double bytes = std::floor(hi + (keptAll - hi) * k / kGrid);
      Milp milp = program.withBudget(bytes, andRecomputed);
      Milp::Result result = milp.solve(limit(), gap, {}, maxNodes);
      record(stats, result);
      if (result.hasSolution())
        found.push_back(program.toOption(result.values));
    }
  }
  // The Pareto front, keep-all first, then by kept bytes.
  std::vector<LayerOption> front;
  for (const LayerOption &option : found) {
    bool dominated = llvm::any_of(found, [&](const LayerOption &other) {
      return dominates(other, option);
    });
    bool duplicate = llvm::any_of(front, [&](const LayerOption &other) {
      return other.recomputed == option.recomputed;
    });
    if (!dominated && !duplicate)
      front.push_back(option);
  }
  std::sort(front.begin() + 1, front.end(),
            [](const LayerOption &a, const LayerOption &b) {
              return a.keptBytes > b.keptBytes ||
                     (a.keptBytes == b.keptBytes && a.seconds < b.seconds);
            });
  return front;
}

//===----------------------------------------------------------------------===//
// The step
//===----------------------------------------------------------------------===//

int64_t ChainModel::getPeak(ArrayRef<unsigned> choice) const {
  int64_t peak = std::max(need[0][0], need[0][1]), reduced = 0;
  for (unsigned c = 1; c <= numLayers; ++c) {
    const LayerOption &option = (*options[c - 1])[choice[c - 1]];
    reduced += fullBytes[c - 1] - option.keptBytes;
    peak = std::max({peak, need[c][0] - reduced,
                     need[c][1] - reduced + option.recomputedBytes});
  }
  return peak;
}

double ChainModel::getSeconds(ArrayRef<unsigned> choice) const {
  double seconds = 0;
  for (unsigned j = 0; j < numLayers; ++j)
    seconds += (*options[j])[choice[j]].seconds;
  return seconds;
}

/// The fastest choice of one option per layer by dynamic programming over
/// integer states `[0, states)`, from state 0: `after(j, state, option)` is
/// the state layer j's option leads to, or -1 (or anything out of range)
/// where it is not allowed; nullopt when no choice gets through every layer.
template <typename After>
static std::optional<std::vector<unsigned>>
solveOverStates(const ChainModel &model, int64_t states, After after) {
  unsigned n = model.numLayers;
  constexpr double kInf = std::numeric_limits<double>::infinity();
  std::vector<double> time(states, kInf), next(states);
  time[0] = 0;
  // from[j][state after j] = (option, state before j).
  std::vector<std::vector<std::pair<uint16_t, int32_t>>> from(
      n, std::vector<std::pair<uint16_t, int32_t>>(states, {0, -1}));
  for (unsigned j = 0; j < n; ++j) {
    std::fill(next.begin(), next.end(), kInf);
    for (int64_t state = 0; state < states; ++state) {
      if (time[state] == kInf)
        continue;
      for (auto [o, option] : llvm::enumerate(*model.options[j])) {
        int64_t to = after(j, state, option);
        if (to < 0 || to >= states)
          continue;
        double t = time[state] + option.seconds;
        if (t < next[to]) {
          next[to] = t;
          from[j][to] = {uint16_t(o), int32_t(state)};
        }
      }
    }
    std::swap(time, next);
  }
  int64_t bestState = -1;
  for (int64_t state = 0; state < states; ++state)
    if (time[state] < kInf && (bestState < 0 || time[state] < time[bestState]))
      bestState = state;
  if (bestState < 0)
    return std::nullopt;
  std::vector<unsigned> choice(n);
  for (unsigned j = n; j-- > 0;) {
    auto [option, before] = from[j][bestState];
    choice[j] = option;
    bestState = before;
  }
  return choice;
}

std::optional<std::vector<unsigned>>
loom::remat::solveKept(const ChainModel &model, int64_t kept) {
  int64_t total = 0;
  for (unsigned j = 0; j < model.numLayers; ++j)
    total += model.fullBytes[j];
  // Kept bytes in units rounded up, so that a choice within the units is
  // within `kept`. The state is the kept units so far.
  constexpr int64_t kStates = 1 << 14;
  int64_t unit = std::max<int64_t>(1, (total + kStates - 1) / kStates);
  auto units = [&](int64_t bytes) { return (bytes + unit - 1) / unit; };
  int64_t states = std::min(kept / unit, units(total) + model.numLayers) + 1;
  if (states <= 0)
    return std::nullopt;
  return solveOverStates(
      model, states, [&](unsigned, int64_t state, const LayerOption &option) {
        return state + units(option.keptBytes);
      });
}

std::optional<std::vector<unsigned>>
loom::remat::solveChain(const ChainModel &model, int64_t budget) {
  if (std::max(model.need[0][0], model.need[0][1]) > budget)
    return std::nullopt;
  int64_t totalReduction = 0;
  for (unsigned j = 0; j < model.numLayers; ++j) {
    int64_t most = 0;
    for (const LayerOption &option : *model.options[j])
      most = std::max(most, model.fullBytes[j] - option.keptBytes);
    totalReduction += most;
  }
  // The state is the reduction so far, in units rounded down.
  constexpr int64_t kStates = 1 << 16;
  int64_t unit = std::max<int64_t>(1, (totalReduction + kStates - 1) / kStates);
  return solveOverStates(
      model, totalReduction / unit + 1,
      [&](unsigned j, int64_t state, const LayerOption &option) -> int64_t {
        int64_t after = state + (model.fullBytes[j] - option.keptBytes) / unit;
        int64_t reduced = after * unit;
        if (model.need[j + 1][0] - reduced > budget ||
            model.need[j + 1][1] - reduced + option.recomputedBytes > budget)
          return -1;
        return after;
      });
}

std::optional<std::vector<unsigned>>
loom::remat::solveChainIlp(const ChainModel &model, int64_t budget,
                           ArrayRef<unsigned> start, double timeLimitSeconds,
                           double gap, int64_t maxNodes, SolveStats &stats) {
  if (std::max(model.need[0][0], model.need[0][1]) > budget)
    return std::nullopt;
  unsigned n = model.numLayers;
  // Memory in MiB (finer for small steps), so that the coefficients stay
  // within a few orders of magnitude; not rounded, so the chain's choice
  // (whose reductions it rounds down) is feasible here too.
  double unit =
      std::max(1.0, std::min(double(1 << 20),
                             double(std::max<int64_t>(1, budget)) / 1e5));
  Milp milp;
  std::vector<std::vector<int>> column(n);
  std::vector<double> initial;
  for (unsigned j = 0; j < n; ++j) {
    SmallVector<std::pair<int, double>> one;
    for (auto [o, option] : llvm::enumerate(*model.options[j])) {
      column[j].push_back(milp.addBinary(option.seconds * 1e6));
      one.push_back({column[j].back(), 1.0});
      if (!start.empty())
        initial.push_back(double(start[j] == o));
    }
    milp.addRow(one, 1, 1);
  }
  // Peak rows: the reductions of layers [0, c) cover what the keep-all
  // timeline needs above the budget there (and layer c-1's recomputation
  // in its backward).
  for (unsigned c = 1; c <= n; ++c) {
    for (unsigned withExtra : {0u, 1u}) {
      SmallVector<std::pair<int, double>> row;
      for (unsigned j = 0; j < c; ++j)
        for (auto [o, option] : llvm::enumerate(*model.options[j])) {
          double coefficient =
              double(model.fullBytes[j] - option.keptBytes) / unit;
          if (withExtra && j == c - 1)
            coefficient -= double(option.recomputedBytes) / unit;
          if (coefficient != 0)
            row.push_back({column[j][o], coefficient});
        }
      double rhs = double(model.need[c][withExtra] - budget) / unit;
      if (rhs <= 0 && llvm::all_of(row, [](auto t) { return t.second >= 0; }))
        continue;
      milp.addRow(row, rhs, 1e30);
    }
  }
  Milp::Result result = milp.solve(timeLimitSeconds, gap, initial, maxNodes);
  record(stats, result);
  if (!result.hasSolution())
    return std::nullopt;
  std::vector<unsigned> choice(n);
  for (unsigned j = 0; j < n; ++j)
    for (auto [o, col] : llvm::enumerate(column[j]))
      if (result.values[col] > 0.5)
        choice[j] = o;
  return choice;
}

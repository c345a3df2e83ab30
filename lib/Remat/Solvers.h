//===- Solvers.h - options per layer, and the chain over layers -*- C++ -*-===//
//
// Two levels, as in H-Rockmate:
//
//  * one layer: a 0-1 program over its nodes (Checkmate's, restricted to
//    one recomputation in the backward): s_v (kept from the forward to the
//    backward) and r_v (recomputed there), with s_v + r_v >= 1 for each node
//    the backward reads and r_v <= s_u + r_u for each operand u in the
//    layer. Solved by CBC over a grid of budgets on the kept bytes (the
//    phantom) and on kept + recomputed bytes (the layer's backward peak),
//    reduced to the Pareto front of (kept, recomputed, time): the layer's
//    options. Identical layers share one solve.
//
//  * the step: one option per layer under a budget on the whole step's
//    memory timeline. Each position of the keep-all timeline sees the
//    reductions (kept bytes saved) of the layers whose phantoms are alive
//    there: the layers before it in the forward, every layer at the loss,
//    the layers up to its own in the backward, where its recomputed bytes
//    are added (H-Rockmate's correction term). `chain` solves it exactly by
//    dynamic programming over the reduction in integer units (Rotor's
//    method on a chain); `ilp` by CBC, the chain's answer as its start.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_LIB_REMAT_SOLVERS_H
#define LOOM_LIB_REMAT_SOLVERS_H

#include "StepGraph.h"
#include "llvm/ADT/STLFunctionalExtras.h"

namespace loom::remat {

struct LayerOption {
  /// Over the layer's nodes (StepGraph::layers order): recomputed.
  llvm::BitVector recomputed;
  /// Bytes kept for the backward, recomputed in it, and the recompute time.
  int64_t keptBytes = 0, recomputedBytes = 0;
  double seconds = 0;
};

struct SolveStats {
  unsigned solves = 0, timeouts = 0, infeasible = 0, unsolved = 0,
           startsKept = 0, layerFallbacks = 0;
  /// Solves answered by an earlier solve of the same program (Milp::solve).
  unsigned reused = 0;
  double seconds = 0, worstGap = 0;
  void add(const SolveStats &other);
};

/// The Pareto options of the layer whose nodes are `members`, the first
/// keeping everything. `limit` gives each CBC solve its wall-clock seconds.
/// A least-budget solve CBC cannot answer in time leaves keeping everything
/// as the only option (counted in `stats.layerFallbacks`).
/// `maxNodes` >= 0 bounds each solve's branch-and-bound nodes.
std::vector<LayerOption> computeLayerOptions(const StepGraph &graph,
                                             llvm::ArrayRef<unsigned> members,
                                             llvm::function_ref<double()> limit,
                                             double gap, int64_t maxNodes,
                                             SolveStats &stats);

/// What the step-level problem needs from the keep-all timeline.
struct ChainModel {
  unsigned numLayers = 0;
  /// need[c][0]: the largest live bytes at positions where layers [0, c)
  /// hold phantoms; need[c][1]: the same in layer c-1's backward.
  std::vector<std::array<int64_t, 2>> need;
  /// Bytes the keep-all step keeps for each layer's backward.
  std::vector<int64_t> fullBytes;
  /// Each layer's options.
  std::vector<const std::vector<LayerOption> *> options;

  /// The modelled peak of a choice of options.
  int64_t getPeak(llvm::ArrayRef<unsigned> choice) const;
  double getSeconds(llvm::ArrayRef<unsigned> choice) const;
};

/// The fastest choice whose modelled peak is at most `budget`, by dynamic
/// programming; nullopt when none is.
std::optional<std::vector<unsigned>> solveChain(const ChainModel &model,
                                                int64_t budget);
/// The fastest choice whose layers keep at most `kept` bytes for the
/// backward together (the activations at the loss, PyTorch's
/// activation_memory_budget's measure), by dynamic programming; nullopt
/// when none does.
std::optional<std::vector<unsigned>> solveKept(const ChainModel &model,
                                               int64_t kept);
/// The same by CBC from `start` (a feasible choice).
std::optional<std::vector<unsigned>>
solveChainIlp(const ChainModel &model, int64_t budget,
              llvm::ArrayRef<unsigned> start, double timeLimitSeconds,
              double gap, int64_t maxNodes, SolveStats &stats);

} // namespace loom::remat

#endif // LOOM_LIB_REMAT_SOLVERS_H

//===- ArenaPacker.h - offsets for buffers with known lifetimes -*- C++ -*-===//
//
// Dynamic storage allocation for a static plan: each buffer has a size and a
// lifetime [begin, end] in program positions; two buffers may share bytes
// only if their lifetimes do not overlap. The arena can never be smaller
// than the most bytes live at once (the lower bound); the packer searches
// for a placement that reaches it:
//
//   1. constructive orders, each placed by first fit and by best fit: the
//      buffers live at the peak first (earliest begun first, so they sit
//      side by side), greedy by breadth (the positions with the most live
//      bytes first), and largest, earliest, longest, largest-area first;
//   2. while above the bound, an exact branch-and-bound search for a
//      placement at the bound (packAtCapacity, within a node budget;
//      skipped when the budget cannot place every buffer once);
//   3. if it gave up, a local search from the best order: a buffer
//      that sticks out above the bound moves earlier, kept when neither the
//      arena nor the bytes above the bound grow (a fixed seed, a budget of
//      tries scaled to the problem). A try places again only the buffers
//      its move can change: those that moved, and those overlapping one
//      placed before them that moved or landed elsewhere.
//
//   4. if the exact search proved the bound unreachable, a bisection with
//      it between the bound and the best arena found, which ends with a
//      proven optimum unless the budget (shared by the probes) runs out.
//
// The smallest arena found wins; ties keep the earlier candidate, so the
// plan is deterministic.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_ANALYSIS_ARENAPACKER_H
#define LOOM_ANALYSIS_ARENAPACKER_H

#include "llvm/ADT/ArrayRef.h"
#include <cstdint>
#include <vector>

namespace loom {

/// The alignment of every buffer in a memory plan's arena (codegen-memory-plan,
/// codegen-pack-buffers), and so of what the plan's timeline charges.
constexpr int64_t kArenaAlignment = 64;

/// The local search's budget of work (Packing::localSearchWork): about
/// 0.6 s on a 2-core VM, whatever the step's size.
constexpr uint64_t kLocalSearchWork = 150'000'000;

struct PackItem {
  int64_t bytes = 0;
  unsigned begin = 0, end = 0;
};

struct Packing {
  /// One offset per item, each a multiple of the alignment.
  std::vector<int64_t> offsets;
  int64_t arenaBytes = 0;
  /// The most (aligned) bytes live at once: no packing is smaller.
  int64_t lowerBound = 0;
  /// Placements tried by the constructive orders and the local search.
  unsigned tries = 0;
  /// Nodes the exact search visited.
  uint64_t searchNodes = 0;
  /// The local search's work: for each item it placed, the items placed
  /// among, times the log of their count. At most kLocalSearchWork, plus
  /// each start's last try.
  uint64_t localSearchWork = 0;
  /// True when no smaller arena exists: it is the bound, or the exact
  /// search proved one alignment unit less infeasible.
  bool optimal = false;
};

/// Bytes live at each position (through the last item's end), sizes
/// rounded up to `alignment`; its maximum is the packing's lower bound.
std::vector<int64_t> liveBytes(llvm::ArrayRef<PackItem> items,
                               int64_t alignment);

/// Packs `items` into one arena; sizes are rounded up to `alignment`.
Packing packIntervals(llvm::ArrayRef<PackItem> items, int64_t alignment = 64);

/// What the exact search found at one capacity.
struct CapacityFit {
  enum Status { Fits, Infeasible, GaveUp } status = GaveUp;
  /// One offset per item, and the arena they take (at most the capacity),
  /// when the status is Fits.
  std::vector<int64_t> offsets;
  int64_t arenaBytes = 0;
  /// Nodes visited.
  uint64_t nodes = 0;
};

/// Offsets that fit `items` in `capacity` bytes (sizes rounded up to
/// `alignment`), by an exact branch-and-bound search after MiniMalloc
/// (ArenaSearch.cpp): Fits with offsets, Infeasible when it has proven that
/// no placement fits, or GaveUp after `nodeBudget` nodes (each candidate
/// tried counts as one). Deterministic.
CapacityFit packAtCapacity(llvm::ArrayRef<PackItem> items, int64_t alignment,
                           int64_t capacity, uint64_t nodeBudget);

} // namespace loom

#endif // LOOM_ANALYSIS_ARENAPACKER_H

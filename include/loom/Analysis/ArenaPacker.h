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
//   2. while above the bound, a local search from the best order: a buffer
//      that sticks out above the bound moves earlier, kept when neither the
//      arena nor the bytes above the bound grow (a fixed seed, a budget of
//      tries scaled to the problem).
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
  /// Placements tried.
  unsigned tries = 0;
};

/// Packs `items` into one arena; sizes are rounded up to `alignment`.
Packing packIntervals(llvm::ArrayRef<PackItem> items, int64_t alignment = 64);

} // namespace loom

#endif // LOOM_ANALYSIS_ARENAPACKER_H

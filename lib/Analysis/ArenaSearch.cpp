//===- ArenaSearch.cpp - exact placement at a given arena size -----------===//
//
// A branch-and-bound search for offsets that fit a given capacity, after
// MiniMalloc (Moffitt, ASPLOS 2023). Only canonical placements are tried:
// buffers go in non-decreasing (offset, preorder index), each at its minimum
// offset (the top of the highest placed buffer it overlaps in time), so the
// search never fills holes. Prunes:
//
//   * a section (the buffers live at one buffer's last position; every
//     position's live set is a subset of one) whose floor plus its unplaced
//     bytes exceeds the capacity fails the node; the floor is the top of
//     its placed buffers, at least the current offset (later placements
//     only go higher) and at least the lowest minimum offset of its
//     unplaced buffers;
//   * a candidate at or above some unplaced buffer's minimum offset plus
//     its size is dominated (that buffer fits below it);
//   * a buffer that overlaps no unplaced buffer raises no one's minimum
//     offset, so if placing it fails, no other candidate at this node can
//     succeed.
//
// Restarts round-robin over three static preorders with a node limit that
// doubles, as MiniMalloc does, within a total node budget; deterministic.
//
//===----------------------------------------------------------------------===//

#include "loom/Analysis/ArenaPacker.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include <algorithm>
#include <numeric>

using namespace loom;

namespace {

enum class Outcome { Found, NotFound, Aborted };

struct Search {
  // The problem, in units of the alignment.
  std::vector<int64_t> sizes;
  std::vector<unsigned> begins, ends;
  int64_t capacity;
  std::vector<llvm::SmallVector<unsigned>> overlaps;
  /// Sections: the live set at each distinct last position.
  std::vector<std::vector<unsigned>> members;
  /// Each buffer's sections, [lo, hi).
  std::vector<std::pair<unsigned, unsigned>> spans;

  // Search state.
  std::vector<int64_t> offsets, minOffsets, floors, totals, solution;
  /// Per section, the candidate that last listed it as affected.
  std::vector<uint64_t> listedBy;
  uint64_t candidate = 0;
  std::vector<unsigned> preorder; // buffer -> preorder index
  std::vector<unsigned> byPreorder;
  int64_t nodesLeft = 0;
  uint64_t nodes = 0;

  Search(llvm::ArrayRef<PackItem> items, int64_t alignment, int64_t capacity)
      : capacity(capacity / alignment) {
    size_t n = items.size();
    for (const PackItem &item : items) {
      sizes.push_back((item.bytes + alignment - 1) / alignment);
      begins.push_back(item.begin);
      ends.push_back(item.end);
    }
    std::vector<unsigned> lasts(ends);
    std::sort(lasts.begin(), lasts.end());
    lasts.erase(std::unique(lasts.begin(), lasts.end()), lasts.end());
    members.resize(lasts.size());
    listedBy.assign(lasts.size(), 0);
    spans.resize(n);
    overlaps.resize(n);
    for (unsigned i = 0; i < n; ++i) {
      unsigned lo = llvm::lower_bound(lasts, begins[i]) - lasts.begin();
      unsigned hi = llvm::upper_bound(lasts, ends[i]) - lasts.begin();
      spans[i] = {lo, hi};
      for (unsigned s = lo; s < hi; ++s)
        members[s].push_back(i);
    }
    for (unsigned i = 0; i < n; ++i)
      for (unsigned j = i + 1; j < n; ++j)
        if (begins[i] <= ends[j] && begins[j] <= ends[i]) {
          overlaps[i].push_back(j);
          overlaps[j].push_back(i);
        }
  }

  void reset() {
    size_t n = sizes.size();
    offsets.assign(n, -1);
    minOffsets.assign(n, 0);
    floors.assign(members.size(), 0);
    totals.assign(members.size(), 0);
    for (unsigned s = 0; s < members.size(); ++s)
      for (unsigned i : members[s])
        totals[s] += sizes[i];
  }

  bool check(int64_t offset) const {
    for (unsigned s = 0; s < members.size(); ++s)
      if (std::max(offset, floors[s]) + totals[s] > capacity)
        return false;
    return true;
  }

  Outcome search(int64_t parentOffset, unsigned parentIndex) {
    if (nodesLeft-- <= 0)
      return Outcome::Aborted;
    ++nodes;
    // Candidates: unplaced buffers by (minimum offset, preorder index).
    llvm::SmallVector<std::pair<int64_t, unsigned>> candidates;
    for (unsigned i : byPreorder)
      if (offsets[i] < 0)
        candidates.push_back({minOffsets[i], preorder[i]});
    if (candidates.empty()) {
      solution = offsets;
      return Outcome::Found;
    }
    llvm::sort(candidates);
    int64_t minHeight = INT64_MAX;
    for (auto [offset, index] : candidates)
      minHeight = std::min(minHeight, offset + sizes[byPreorder[index]]);

    llvm::SmallVector<std::pair<unsigned, int64_t>> offsetUndo;
    llvm::SmallVector<std::pair<unsigned, int64_t>> floorUndo;
    llvm::SmallVector<unsigned> affected;
    for (auto [offset, index] : candidates) {
      if (std::make_pair(offset, index) <
          std::make_pair(parentOffset, parentIndex))
        continue;
      // Candidates come by offset: the rest are dominated too.
      if (offset >= minHeight)
        break;
      // Each candidate tried costs a pass over the sections: count it.
      if (nodesLeft-- <= 0)
        return Outcome::Aborted;
      ++nodes;
      unsigned b = byPreorder[index];
      int64_t top = offset + sizes[b];
      offsets[b] = offset;
      offsetUndo.clear();
      floorUndo.clear();
      affected.clear();
      ++candidate;
      bool hatless = true;
      for (unsigned o : overlaps[b]) {
        if (offsets[o] >= 0)
          continue;
        hatless = false;
        if (minOffsets[o] >= top)
          continue;
        offsetUndo.push_back({o, minOffsets[o]});
        minOffsets[o] = top;
        for (unsigned s = spans[o].first; s < spans[o].second; ++s)
          if (listedBy[s] != candidate) {
            listedBy[s] = candidate;
            affected.push_back(s);
          }
      }
      for (unsigned s = spans[b].first; s < spans[b].second; ++s) {
        floorUndo.push_back({s, floors[s]});
        floors[s] = std::max(floors[s], top);
        totals[s] -= sizes[b];
      }
      for (unsigned s : affected) {
        int64_t lowest = INT64_MAX;
        for (unsigned i : members[s])
          if (offsets[i] < 0)
            lowest = std::min(lowest, minOffsets[i]);
        if (lowest != INT64_MAX && floors[s] < lowest) {
          floorUndo.push_back({s, floors[s]});
          floors[s] = lowest;
        }
      }
      Outcome outcome = Outcome::NotFound;
      if (top <= capacity && check(offset))
        outcome = search(offset, index);
      for (auto [s, floor] : llvm::reverse(floorUndo))
        floors[s] = floor;
      for (unsigned s = spans[b].first; s < spans[b].second; ++s)
        totals[s] += sizes[b];
      for (auto [o, old] : llvm::reverse(offsetUndo))
        minOffsets[o] = old;
      offsets[b] = -1;
      if (outcome != Outcome::NotFound)
        return outcome;
      if (hatless)
        break;
    }
    return Outcome::NotFound;
  }

  /// Static preorders (MiniMalloc's "WAT", "TAW", "TWA"): by lifetime
  /// length (W), area (A) and the most bytes live in the buffer's sections
  /// (T), each descending, then by index.
  std::vector<unsigned> preorderFor(llvm::StringRef keys) const {
    size_t n = sizes.size();
    std::vector<int64_t> sectionTotal(n, 0);
    std::vector<int64_t> live(members.size(), 0);
    for (unsigned s = 0; s < members.size(); ++s)
      for (unsigned i : members[s])
        live[s] += sizes[i];
    for (unsigned i = 0; i < n; ++i)
      for (unsigned s = spans[i].first; s < spans[i].second; ++s)
        sectionTotal[i] = std::max(sectionTotal[i], live[s]);
    auto key = [&](char k, unsigned i) -> int64_t {
      int64_t width = int64_t(ends[i]) - begins[i] + 1;
      switch (k) {
      case 'W':
        return width;
      case 'A':
        return width * sizes[i];
      default:
        return sectionTotal[i];
      }
    };
    std::vector<unsigned> order(n);
    std::iota(order.begin(), order.end(), 0);
    llvm::stable_sort(order, [&](unsigned a, unsigned b) {
      for (char k : keys)
        if (key(k, a) != key(k, b))
          return key(k, a) > key(k, b);
      return a < b;
    });
    return order;
  }
};

} // namespace

CapacityFit loom::packAtCapacity(llvm::ArrayRef<PackItem> items,
                                 int64_t alignment, int64_t capacity,
                                 uint64_t nodeBudget) {
  CapacityFit fit;
  capacity -= capacity % alignment;
  // Empty buffers sit at offset 0 and take no part (dominance would never
  // place them).
  std::vector<PackItem> sized;
  std::vector<unsigned> original;
  for (auto [index, item] : llvm::enumerate(items))
    if (item.bytes > 0) {
      sized.push_back(item);
      original.push_back(index);
    }
  Search search(sized, alignment, capacity);
  fit.status = CapacityFit::Infeasible;
  for (int64_t size : search.sizes)
    if (size > search.capacity)
      return fit;
  static constexpr llvm::StringLiteral kPreorders[] = {"WAT", "TAW", "TWA"};
  std::vector<std::vector<unsigned>> preorders;
  for (llvm::StringRef keys : kPreorders)
    preorders.push_back(search.preorderFor(keys));
  for (uint64_t limit = std::max<uint64_t>(2 * sized.size(), 64);; limit *= 2) {
    for (const std::vector<unsigned> &order : preorders) {
      uint64_t nodes = std::min<uint64_t>(limit, nodeBudget - fit.nodes);
      if (nodes == 0) {
        fit.status = CapacityFit::GaveUp;
        return fit;
      }
      search.reset();
      search.byPreorder = order;
      search.preorder.assign(order.size(), 0);
      for (auto [index, buffer] : llvm::enumerate(order))
        search.preorder[buffer] = index;
      search.nodesLeft = int64_t(nodes);
      search.nodes = 0;
      Outcome outcome = search.search(0, 0);
      fit.nodes += search.nodes;
      if (outcome == Outcome::NotFound)
        return fit; // proven: nothing fits
      if (outcome == Outcome::Found) {
        fit.status = CapacityFit::Fits;
        fit.offsets.assign(items.size(), 0);
        for (auto [index, offset] : llvm::enumerate(search.solution)) {
          fit.offsets[original[index]] = offset * alignment;
          fit.arenaBytes = std::max(fit.arenaBytes,
                                    (offset + search.sizes[index]) * alignment);
        }
        return fit;
      }
    }
  }
}

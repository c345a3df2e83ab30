//===- ArenaPacker.cpp - offsets for buffers with known lifetimes ---------===//

#include "loom/Analysis/ArenaPacker.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include <algorithm>
#include <limits>
#include <numeric>
#include <optional>
#include <random>
#include <tuple>

using namespace loom;

namespace {

/// The buffers live at a position, each handed out once: a segment tree
/// over positions whose nodes list the buffers that cover them whole. Taking
/// a position empties the nodes on its path, so every entry is visited once
/// and a whole breadth order costs O((n + positions) log positions).
class CoverIndex {
public:
  CoverIndex(llvm::ArrayRef<PackItem> items, unsigned positions) {
    while (leaves < positions)
      leaves *= 2;
    nodes.resize(2 * leaves);
    for (auto [index, item] : llvm::enumerate(items))
      for (unsigned lo = item.begin + leaves, hi = item.end + 1 + leaves;
           lo < hi; lo /= 2, hi /= 2) {
        if (lo & 1)
          nodes[lo++].push_back(index);
        if (hi & 1)
          nodes[--hi].push_back(index);
      }
  }

  /// Appends the buffers live at `position` not taken before to `out`, and
  /// marks them in `seen`.
  void take(unsigned position, std::vector<bool> &seen,
            llvm::SmallVectorImpl<unsigned> &out) {
    for (unsigned node = position + leaves; node >= 1; node /= 2) {
      for (unsigned index : nodes[node])
        if (!seen[index]) {
          seen[index] = true;
          out.push_back(index);
        }
      nodes[node].clear();
    }
  }

private:
  unsigned leaves = 1;
  std::vector<llvm::SmallVector<unsigned, 0>> nodes;
};

/// Bytes live at each position under range updates, with the first
/// position holding the most: a segment tree whose node holds its own
/// pending addition plus the most of its children.
class LiveTree {
public:
  explicit LiveTree(const std::vector<int64_t> &live) {
    while (leaves < live.size())
      leaves *= 2;
    most.assign(2 * leaves, std::numeric_limits<int64_t>::min() / 4);
    pending.assign(2 * leaves, 0);
    std::copy(live.begin(), live.end(), most.begin() + leaves);
    for (unsigned node = leaves - 1; node >= 1; --node)
      most[node] = std::max(most[2 * node], most[2 * node + 1]);
  }

  /// Adds `delta` at positions [lo, hi).
  void add(unsigned lo, unsigned hi, int64_t delta) {
    add(1, 0, leaves, lo, hi, delta);
  }

  /// Sets the bytes at `position` to `value`.
  void set(unsigned position, int64_t value) {
    unsigned leaf = position + leaves;
    int64_t above = 0;
    for (unsigned node = leaf / 2; node >= 1; node /= 2)
      above += pending[node];
    most[leaf] = value - above;
    for (unsigned node = leaf / 2; node >= 1; node /= 2)
      most[node] = pending[node] + std::max(most[2 * node], most[2 * node + 1]);
  }

  /// The first position with the most bytes.
  unsigned getFirstMax() const {
    unsigned node = 1;
    while (node < leaves)
      node = most[2 * node] >= most[2 * node + 1] ? 2 * node : 2 * node + 1;
    return node - leaves;
  }

private:
  void add(unsigned node, unsigned from, unsigned to, unsigned lo, unsigned hi,
           int64_t delta) {
    if (hi <= from || to <= lo)
      return;
    if (lo <= from && to <= hi) {
      most[node] += delta;
      pending[node] += delta;
      return;
    }
    unsigned middle = (from + to) / 2;
    add(2 * node, from, middle, lo, hi, delta);
    add(2 * node + 1, middle, to, lo, hi, delta);
    most[node] = pending[node] + std::max(most[2 * node], most[2 * node + 1]);
  }

  unsigned leaves = 1;
  std::vector<int64_t> most, pending;
};

struct Packer {
  llvm::ArrayRef<PackItem> items;
  std::vector<int64_t> sizes;
  /// For each item, the items whose lifetimes overlap it.
  std::vector<llvm::SmallVector<unsigned>> overlaps;
  /// Aligned bytes live at each position.
  std::vector<int64_t> live;
  /// Scratch of an incremental placement (place with `kept`).
  std::vector<bool> stale;
  /// The work of the placements so far: for each item placed, the items
  /// it is placed among, times the log of their count (sorting them is
  /// most of a placement's time).
  uint64_t work = 0;

  Packer(llvm::ArrayRef<PackItem> items, int64_t alignment) : items(items) {
    for (const PackItem &item : items)
      sizes.push_back((item.bytes + alignment - 1) / alignment * alignment);
    overlaps.resize(items.size());
    // Sweep by begin: each item overlaps the earlier-begun items still live.
    std::vector<unsigned> byBegin(items.size());
    std::iota(byBegin.begin(), byBegin.end(), 0);
    llvm::sort(byBegin, [&](unsigned a, unsigned b) {
      return std::make_pair(items[a].begin, a) <
             std::make_pair(items[b].begin, b);
    });
    std::vector<unsigned> active;
    for (unsigned i : byBegin) {
      llvm::erase_if(active,
                     [&](unsigned a) { return items[a].end < items[i].begin; });
      for (unsigned a : active) {
        overlaps[a].push_back(i);
        overlaps[i].push_back(a);
      }
      active.push_back(i);
    }
    live = liveBytes(items, alignment);
  }

  int64_t lowerBound() const {
    return live.empty() ? 0 : *std::max_element(live.begin(), live.end());
  }

  /// Places items in `order`, each at the first (or the tightest) gap among
  /// the placed items it overlaps. Returns the arena size.
  ///
  /// With `kept`, the offsets of a placement of an order that `order` makes
  /// by moving the items `moved` earlier, no earlier than `start`: placing
  /// is greedy, so an item lands where it did unless it moved or one of the
  /// items it overlaps that are placed before it moved or landed elsewhere.
  /// Only those are placed again (the others keep their offsets), which
  /// gives the offsets a full placement gives, at the cost of what changed.
  int64_t place(llvm::ArrayRef<unsigned> order, bool bestFit,
                std::vector<int64_t> &offsets, size_t start = 0,
                llvm::ArrayRef<int64_t> kept = {},
                llvm::ArrayRef<unsigned> moved = {}) {
    offsets.assign(items.size(), -1);
    int64_t arena = 0;
    for (unsigned i : order.take_front(start)) {
      offsets[i] = kept[i];
      arena = std::max(arena, kept[i] + sizes[i]);
    }
    // `stale`: an item to place again: it moved, or an item it overlaps
    // was placed before it and moved or landed elsewhere.
    if (!kept.empty()) {
      stale.assign(items.size(), false);
      for (unsigned i : moved)
        stale[i] = true;
    }
    llvm::SmallVector<std::pair<int64_t, int64_t>> taken;
    for (unsigned i : order.drop_front(start)) {
      if (!kept.empty() && !stale[i]) {
        offsets[i] = kept[i];
        arena = std::max(arena, kept[i] + sizes[i]);
        continue;
      }
      taken.clear();
      for (unsigned o : overlaps[i])
        if (offsets[o] >= 0)
          taken.push_back({offsets[o], offsets[o] + sizes[o]});
      work += (taken.size() + 1) * llvm::bit_width(taken.size() + 1);
      llvm::sort(taken);
      int64_t size = sizes[i], cursor = 0, chosen = -1, chosenGap = 0;
      for (auto [lo, hi] : taken) {
        if (lo - cursor >= size &&
            (chosen < 0 || (bestFit && lo - cursor < chosenGap))) {
          chosen = cursor;
          chosenGap = lo - cursor;
          if (!bestFit)
            break;
        }
        cursor = std::max(cursor, hi);
      }
      if (chosen < 0)
        chosen = cursor;
      offsets[i] = chosen;
      arena = std::max(arena, chosen + size);
      if (!kept.empty() && (chosen != kept[i] || llvm::is_contained(moved, i)))
        for (unsigned o : overlaps[i])
          stale[o] = true;
    }
    return arena;
  }

  /// Greedy by breadth: the positions with the most live bytes first, and
  /// at each the unplaced buffers live there in `key` order. `dynamic`
  /// recounts the live bytes of the unplaced buffers after each position.
  template <typename Key>
  std::vector<unsigned> breadthOrder(Key key, bool dynamic) const {
    unsigned positions = live.size();
    CoverIndex covers(items, positions);
    std::optional<LiveTree> remaining;
    std::vector<unsigned> byLive;
    if (dynamic) {
      remaining.emplace(live);
    } else {
      byLive.resize(positions);
      std::iota(byLive.begin(), byLive.end(), 0);
      llvm::stable_sort(
          byLive, [&](unsigned a, unsigned b) { return live[a] > live[b]; });
    }
    std::vector<unsigned> order;
    std::vector<bool> seen(items.size(), false);
    llvm::SmallVector<unsigned> here;
    for (size_t next = 0; order.size() < items.size();) {
      unsigned p = dynamic ? remaining->getFirstMax() : byLive[next++];
      here.clear();
      covers.take(p, seen, here);
      // In index order, then by key: ties keep the index order.
      std::sort(here.begin(), here.end());
      llvm::stable_sort(
          here, [&](unsigned a, unsigned b) { return key(a) < key(b); });
      for (unsigned i : here) {
        order.push_back(i);
        if (dynamic)
          remaining->add(items[i].begin, items[i].end + 1, -sizes[i]);
      }
      if (dynamic && here.empty())
        remaining->set(p, -1);
    }
    return order;
  }

  /// The buffers live at the peak first (earliest begun first, so they sit
  /// contiguously), then the rest, largest first.
  std::vector<unsigned> peakFirstOrder() const {
    unsigned peak =
        unsigned(std::max_element(live.begin(), live.end()) - live.begin());
    auto atPeak = [&](unsigned i) {
      return items[i].begin <= peak && peak <= items[i].end;
    };
    return orderBy([&](unsigned i) {
      return std::make_tuple(
          !atPeak(i), atPeak(i) ? int64_t(items[i].begin) : 0, -sizes[i], i);
    });
  }

  template <typename Key> std::vector<unsigned> orderBy(Key key) const {
    std::vector<unsigned> order(items.size());
    std::iota(order.begin(), order.end(), 0);
    llvm::stable_sort(order,
                      [&](unsigned a, unsigned b) { return key(a) < key(b); });
    return order;
  }
};

/// The bound is proven out of reach: bisects with the exact search between
/// the largest capacity known infeasible and the best arena found, within
/// one node budget for all probes. Ends with a proven optimum unless the
/// budget runs out.
Packing bisect(llvm::ArrayRef<PackItem> items, int64_t alignment,
               uint64_t budget, Packing result) {
  int64_t infeasible = result.lowerBound;
  while (infeasible + alignment < result.arenaBytes) {
    int64_t units = (result.arenaBytes - infeasible) / alignment;
    int64_t capacity = infeasible + units / 2 * alignment;
    CapacityFit fit = packAtCapacity(items, alignment, capacity, budget);
    result.searchNodes += fit.nodes;
    budget -= std::min(budget, fit.nodes);
    if (fit.status == CapacityFit::GaveUp)
      return result;
    if (fit.status == CapacityFit::Infeasible) {
      infeasible = capacity;
      continue;
    }
    result.offsets = std::move(fit.offsets);
    result.arenaBytes = fit.arenaBytes;
  }
  result.optimal = true;
  return result;
}

} // namespace

std::vector<int64_t> loom::liveBytes(llvm::ArrayRef<PackItem> items,
                                     int64_t alignment) {
  unsigned last = 0;
  for (const PackItem &item : items)
    last = std::max(last, item.end);
  std::vector<int64_t> delta(last + 2, 0);
  for (const PackItem &item : items) {
    int64_t size = (item.bytes + alignment - 1) / alignment * alignment;
    delta[item.begin] += size;
    delta[item.end + 1] -= size;
  }
  std::vector<int64_t> live(last + 1);
  int64_t bytes = 0;
  for (unsigned p = 0; p <= last; ++p)
    live[p] = bytes += delta[p];
  return live;
}

Packing loom::packIntervals(llvm::ArrayRef<PackItem> items, int64_t alignment) {
  Packing result;
  result.optimal = true;
  if (items.empty())
    return result;
  result.optimal = false;
  Packer packer(items, alignment);
  result.lowerBound = packer.lowerBound();

  std::vector<int64_t> offsets;
  // Every constructive candidate: (arena, index into orders, best fit).
  std::vector<std::tuple<int64_t, unsigned, bool>> candidates;
  auto tryOrder = [&](const std::vector<unsigned> &order, bool bestFit) {
    int64_t arena = packer.place(order, bestFit, offsets);
    ++result.tries;
    candidates.push_back({arena, unsigned(candidates.size() / 2), bestFit});
    if (result.offsets.empty() || arena < result.arenaBytes) {
      result.arenaBytes = arena;
      result.offsets = offsets;
    }
    result.optimal = arena == result.lowerBound;
    return result.optimal;
  };

  auto size = [&](unsigned i) { return -packer.sizes[i]; };
  auto begin = [&](unsigned i) { return int64_t(items[i].begin); };
  auto length = [&](unsigned i) {
    return int64_t(items[i].begin) - int64_t(items[i].end);
  };
  auto area = [&](unsigned i) {
    return -packer.sizes[i] * (int64_t(items[i].end - items[i].begin) + 1);
  };
  std::vector<std::vector<unsigned>> orders = {
      packer.peakFirstOrder(),
      packer.breadthOrder(
          [&](unsigned i) { return std::make_pair(size(i), i); }, false),
      packer.breadthOrder(
          [&](unsigned i) { return std::make_pair(size(i), i); }, true),
      packer.breadthOrder(
          [&](unsigned i) { return std::make_pair(begin(i), size(i)); }, false),
      packer.breadthOrder(
          [&](unsigned i) {
            return std::make_pair(-int64_t(items[i].end), size(i));
          },
          false),
      packer.breadthOrder(
          [&](unsigned i) {
            return std::make_pair(-int64_t(items[i].end), size(i));
          },
          true),
      packer.breadthOrder(
          [&](unsigned i) { return std::make_pair(length(i), size(i)); },
          false),
      packer.breadthOrder(
          [&](unsigned i) { return std::make_pair(length(i), size(i)); }, true),
      packer.orderBy(
          [&](unsigned i) { return std::make_pair(size(i), begin(i)); }),
      packer.orderBy(
          [&](unsigned i) { return std::make_pair(begin(i), size(i)); }),
      packer.orderBy(
          [&](unsigned i) { return std::make_pair(length(i), size(i)); }),
      packer.orderBy(
          [&](unsigned i) { return std::make_pair(area(i), begin(i)); })};
  for (const std::vector<unsigned> &order : orders)
    for (bool bestFit : {false, true})
      if (tryOrder(order, bestFit))
        return result;

  // An exact search for a placement at the bound, with a budget of about
  // 2e8 steps (a node costs a pass over the buffers and the sections). A
  // placement costs two nodes a buffer (the node and its candidate) and the
  // search's restarts first try three orders at a limit of that size, so
  // below 8 nodes a buffer it cannot place them all. Skipped there: it
  // could then only give up, or prove the bound unreachable by exhausting
  // every placement of the first buffers within that budget, which at the
  // bound (where the first levels prune nothing) it does not (a pipeline
  // stage of 12,310 buffers: 2,367 nodes, given up after 1.3 s).
  uint64_t nodeBudget = std::max<uint64_t>(
      1000, 200'000'000 / (4 * items.size() + packer.live.size() + 1));
  size_t sized = llvm::count_if(items, [](const PackItem &item) {
    return item.bytes > 0;
  });
  CapacityFit atBound;
  if (nodeBudget > 8 * sized)
    atBound = packAtCapacity(items, alignment, result.lowerBound, nodeBudget);
  result.searchNodes += atBound.nodes;
  if (atBound.status == CapacityFit::Fits) {
    result.offsets = std::move(atBound.offsets);
    result.arenaBytes = result.lowerBound;
    result.optimal = true;
    return result;
  }
  if (atBound.status == CapacityFit::Infeasible)
    return bisect(items, alignment,
                  nodeBudget - std::min(nodeBudget, atBound.nodes), result);

  // Local search from the best order: move a buffer that sticks out above
  // the bound (or, now and then, any buffer) earlier. A move is kept when
  // the arena, then the bytes sticking out above the bound, do not grow, so
  // the search walks plateaus. Deterministic: a fixed seed, a budget of
  // work (kLocalSearchWork: placing an item among k others counts k log k)
  // and of at most 40,000 tries, ending early after 2000 tries without
  // progress; from the four best constructive orders in turn, each with a
  // quarter of the budget.
  auto overflow = [&](const std::vector<int64_t> &placed) {
    int64_t bytes = 0;
    for (auto [offset, size] : llvm::zip(placed, packer.sizes))
      bytes += std::max<int64_t>(0, offset + size - result.lowerBound);
    return bytes;
  };
  constexpr unsigned kLocalSearchTries = 40000;
  uint64_t workBefore = packer.work;
  std::mt19937_64 rng(0x4c6f6f6d); // "Loom"
  std::vector<unsigned> sticking, order, moved;
  // Local search from one start; the global best lives in `result`.
  auto search = [&](std::vector<unsigned> current, bool bestFit,
                    unsigned tries, uint64_t work) {
    uint64_t until = packer.work + work;
    int64_t currentArena = packer.place(current, bestFit, offsets);
    std::vector<int64_t> currentOffsets = offsets;
    int64_t currentOverflow = overflow(offsets);
    for (unsigned attempt = 0, stale = 0;
         attempt < tries && stale < 2000 && packer.work < until;
         ++attempt, ++stale) {
      sticking.clear();
      for (unsigned i = 0; i < items.size(); ++i)
        if (currentOffsets[i] + packer.sizes[i] > result.lowerBound)
          sticking.push_back(i);
      order = current;
      // The first position a move changes: the order before it, and so its
      // placement, is the current one's.
      size_t first = order.size();
      moved.clear();
      for (unsigned m = 0, moves = 1 + rng() % 3; m < moves; ++m) {
        unsigned item = !sticking.empty() && rng() % 10 < 7
                            ? sticking[rng() % sticking.size()]
                            : order[rng() % order.size()];
        size_t from = llvm::find(order, item) - order.begin();
        size_t to = rng() % (from + 1);
        std::rotate(order.begin() + to, order.begin() + from,
                    order.begin() + from + 1);
        first = std::min(first, to);
        moved.push_back(item);
      }
      int64_t arena =
          packer.place(order, bestFit, offsets, first, currentOffsets, moved);
      ++result.tries;
      int64_t over = overflow(offsets);
      if (std::make_pair(arena, over) >
          std::make_pair(currentArena, currentOverflow))
        continue;
      if (arena < currentArena || over < currentOverflow)
        stale = 0;
      current = order;
      currentArena = arena;
      currentOffsets = offsets;
      currentOverflow = over;
      if (arena < result.arenaBytes) {
        result.arenaBytes = arena;
        result.offsets = offsets;
      }
      if (arena == result.lowerBound)
        return true;
    }
    return false;
  };
  // From the four best starts, each with a quarter of the budget.
  llvm::stable_sort(candidates, [](const auto &a, const auto &b) {
    return std::get<0>(a) < std::get<0>(b);
  });
  for (unsigned k = 0; k < std::min<size_t>(4, candidates.size()); ++k) {
    auto [arena, index, bestFit] = candidates[k];
    if (search(orders[index], bestFit, kLocalSearchTries / 4,
               kLocalSearchWork / 4))
      break;
  }
  result.localSearchWork = packer.work - workBefore;
  result.optimal = result.arenaBytes == result.lowerBound;
  return result;
}

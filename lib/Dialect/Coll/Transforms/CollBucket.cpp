//===- CollBucket.cpp - merge collectives into buckets --------------------===//

#include "Merge.h"
#include "loom/Analysis/Simulator.h"
#include "loom/Dialect/Coll/CollOps.h"
#include "loom/Dialect/Coll/CollPasses.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

namespace loom::coll {
#define GEN_PASS_DEF_COLLBUCKETPASS
#include "loom/Dialect/Coll/CollPasses.h.inc"
} // namespace loom::coll

using namespace mlir;
using namespace loom;
using namespace loom::coll;

namespace {

/// A collective that may join a bucket.
struct Member {
  Operation *start;
  WaitOp wait;
  /// Elements of this rank's block (the shard for reduce-scatter and
  /// all-gather alike).
  int64_t blockElements;
  int64_t blockBytes;
};

/// Returns true if only all-gather starts lie strictly between `first` and
/// `last` in their block.
bool onlyStartsBetween(Operation *first, Operation *last) {
  for (Operation *op = first->getNextNode(); op && op != last;
       op = op->getNextNode())
    if (!isa<AllGatherStartOp>(op))
      return false;
  return true;
}

struct CollBucketPass
    : public loom::coll::impl::CollBucketPassBase<CollBucketPass> {
  using CollBucketPassBase::CollBucketPassBase;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal() || !func.getBody().hasOneBlock())
      return;
    if (!(bucketMb > 0) || !(firstBucketMb > 0)) {
      func.emitError() << "coll-bucket: expected positive bucket-mb and "
                          "first-bucket-mb";
      return signalPassFailure();
    }
    std::optional<CostModel> loaded = getCostModel(func, "coll-bucket");
    if (!loaded)
      return signalPassFailure();
    CostModel &model = *loaded;
    bucketReduceScatters(func, model);
    bucketAllGathers(func);
  }

  /// Reduce-scatters in ready order, merged while the overlap survives.
  void bucketReduceScatters(func::FuncOp func, const CostModel &model) {
    Block &block = func.getBody().front();
    SimulationResult sim =
        simulate(block, model, {/*events=*/false, /*memory=*/false});
    SmallVector<Member> candidates;
    for (auto start : block.getOps<ReduceScatterStartOp>()) {
      auto collective = cast<CollectiveOpInterface>(start.getOperation());
      auto wait = dyn_cast_or_null<WaitOp>(collective.getWait());
      if (!wait || !isFlatCollective(collective))
        continue;
      int64_t elements = collective.getResultType().getNumElements();
      candidates.push_back(
          {start, wait, elements, collective.getResultBytes().value_or(0)});
    }
    // Block order is ready order: each start follows its gradient.
    SmallVector<SmallVector<Member>> buckets;
    double cap = firstBucketMb * 1024 * 1024;
    for (Member &candidate : candidates) {
      SmallVector<Member> *open = buckets.empty() ? nullptr : &buckets.back();
      if (open && fits(*open, candidate, cap, sim, model)) {
        open->push_back(candidate);
        continue;
      }
      // The first bucket is closing: later ones may be larger.
      if (buckets.size() == 1)
        cap = bucketMb * 1024 * 1024;
      buckets.push_back({candidate});
    }
    for (SmallVector<Member> &bucket : buckets)
      if (SmallVector<MergeMember> members = getMergeMembers(bucket);
          canMergeReduceScatters(members))
        mergeReduceScatters(members);
  }

  /// Whether `candidate` may join `bucket` (see the pass description).
  bool fits(ArrayRef<Member> bucket, const Member &candidate, double cap,
            const SimulationResult &sim, const CostModel &model) {
    if (!areMergeable(bucket.front().start, candidate.start))
      return false;
    double bytes = candidate.blockBytes;
    int64_t elements = candidate.blockElements;
    for (const Member &m : bucket) {
      bytes += m.blockBytes;
      elements += m.blockElements;
    }
    int64_t ranks = *cast<CollectiveOpInterface>(candidate.start).getNumRanks();
    if (bytes * ranks > cap)
      return false;
    // The merged start goes where the candidate's is; every member's wait
    // must still follow it.
    Operation *firstWait = candidate.wait;
    bool anyHidden = false;
    for (const Member &m :
         llvm::concat<const Member>(bucket, ArrayRef(candidate))) {
      if (m.wait->isBeforeInBlock(firstWait))
        firstWait = m.wait;
      anyHidden |=
          sim.times.lookup(m.start).second <= sim.reached.lookup(m.wait);
    }
    if (firstWait->isBeforeInBlock(candidate.start))
      return false;
    if (!anyHidden)
      return true;
    // Launched when the candidate's was, the merged collective must finish
    // before the earliest member's wait is reached.
    int64_t elementBytes = bytes / elements;
    CollectiveTraffic traffic{(ranks - 1) * elements * elementBytes,
                              (ranks - 1) * elements * elementBytes, ranks - 1};
    double launch = sim.times.lookup(candidate.start).first;
    return launch + model.getCollectiveTime(traffic, ranks) <=
           sim.reached.lookup(firstWait);
  }

  /// The members as Merge.h takes them.
  static SmallVector<MergeMember> getMergeMembers(ArrayRef<Member> members) {
    return llvm::map_to_vector(members, [](const Member &m) {
      return MergeMember{m.start, m.wait};
    });
  }

  /// All-gathers whose starts are adjacent and whose releases are adjacent.
  void bucketAllGathers(func::FuncOp func) {
    Block &block = func.getBody().front();
    SmallVector<SmallVector<Member>> groups;
    Operation *previous = nullptr;
    for (auto start :
         llvm::make_early_inc_range(block.getOps<AllGatherStartOp>())) {
      auto collective = cast<CollectiveOpInterface>(start.getOperation());
      auto wait = dyn_cast_or_null<WaitOp>(collective.getWait());
      if (!wait || !isFlatCollective(collective)) {
        previous = nullptr;
        continue;
      }
      Member member{start, wait,
                    collective.getInput().getType().getNumElements(),
                    collective.getInputBytes().value_or(0)};
      bool joins = previous && onlyStartsBetween(previous, start) &&
                   !groups.empty() &&
                   areMergeable(groups.back().front().start, start);
      if (joins)
        groups.back().push_back(member);
      else
        groups.push_back({member});
      previous = start;
    }
    // Within a run of adjacent starts, merge the longest sub-runs whose
    // releases are adjacent too.
    for (SmallVector<Member> &group : groups) {
      SmallVector<Member> run;
      for (Member &member : group) {
        run.push_back(member);
        if (run.size() > 1 && !releasesAdjacent(run)) {
          run.pop_back();
          mergeIfPossible(run);
          run = {member};
        }
      }
      if (releasesAdjacent(run))
        mergeIfPossible(run);
    }
  }

  static void mergeIfPossible(ArrayRef<Member> run) {
    if (SmallVector<MergeMember> members = getMergeMembers(run);
        canMergeAllGathers(members))
      mergeAllGathers(members, /*copyOut=*/false);
  }

  static ReleaseOp findRelease(WaitOp wait) {
    for (Operation *user : wait->getUsers())
      if (auto release = dyn_cast<ReleaseOp>(user))
        return release;
    return {};
  }

  static bool releasesAdjacent(ArrayRef<Member> group) {
    SmallVector<Operation *> releases;
    for (const Member &m : group) {
      ReleaseOp release = findRelease(m.wait);
      if (!release)
        return false;
      releases.push_back(release);
    }
    llvm::sort(releases, [](Operation *a, Operation *b) {
      return a->isBeforeInBlock(b);
    });
    for (unsigned i = 1; i < releases.size(); ++i)
      if (releases[i - 1]->getNextNode() != releases[i])
        return false;
    return true;
  }
};

} // namespace

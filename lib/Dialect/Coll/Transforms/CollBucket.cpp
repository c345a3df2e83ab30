//===- CollBucket.cpp - merge collectives into buckets --------------------===//

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

/// Returns true if two reduce-scatters may share a bucket.
bool compatible(const Member &a, const Member &b) {
  auto x = cast<ReduceScatterStartOp>(a.start);
  auto y = cast<ReduceScatterStartOp>(b.start);
  return x.getComm() == y.getComm() &&
         x.getInput().getType().getElementType() ==
             y.getInput().getType().getElementType() &&
         x.getReduction() == y.getReduction();
}

/// Returns true if `op` is the flat, axis-0 form zero-partition emits.
bool isFlat(CollectiveOpInterface op) {
  return op.getInput().getType().getRank() == 1 &&
         op.getInput().getType().hasStaticShape() &&
         op.getResultType().hasStaticShape() && op.getNumRanks().has_value();
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
    std::optional<CostModel> loaded =
        loadCostModel(func, "coll-bucket", device, profile);
    if (!loaded)
      return signalPassFailure();
    CostModel &model = *loaded;
    bucketReduceScatters(func, model);
    bucketAllGathers(func);
  }

  /// Reduce-scatters in ready order, merged while the overlap survives.
  void bucketReduceScatters(func::FuncOp func, const CostModel &model) {
    Block &block = func.getBody().front();
    SimulationResult sim = simulate(block, model, {/*events=*/false, /*memory=*/false});
    SmallVector<Member> candidates;
    for (auto start : block.getOps<ReduceScatterStartOp>()) {
      auto collective = cast<CollectiveOpInterface>(start.getOperation());
      auto wait = dyn_cast_or_null<WaitOp>(collective.getWait());
      if (!wait || !isFlat(collective))
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
      if (bucket.size() > 1)
        mergeReduceScatters(bucket);
  }

  /// Whether `candidate` may join `bucket` (see the pass description).
  bool fits(ArrayRef<Member> bucket, const Member &candidate, double cap,
            const SimulationResult &sim, const CostModel &model) {
    if (!compatible(bucket.front(), candidate))
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

  /// Lays the members' inputs out rank-major, reduce-scatters once, and
  /// slices each member's block out of the result.
  void mergeReduceScatters(ArrayRef<Member> bucket) {
    auto last = cast<ReduceScatterStartOp>(bucket.back().start);
    int64_t ranks =
        *cast<CollectiveOpInterface>(last.getOperation()).getNumRanks();
    Type elementType = last.getInput().getType().getElementType();
    Location loc = last.getLoc();
    OpBuilder builder(last);
    SmallVector<Value> rows;
    int64_t total = 0;
    for (const Member &m : bucket) {
      auto start = cast<ReduceScatterStartOp>(m.start);
      auto rowsType =
          RankedTensorType::get({ranks, m.blockElements}, elementType);
      rows.push_back(tensor::ExpandShapeOp::create(
          builder, loc, rowsType, start.getInput(),
          SmallVector<ReassociationIndices>{{0, 1}}));
      total += m.blockElements;
    }
    Value matrix = tensor::ConcatOp::create(builder, loc, /*dim=*/1, rows);
    Value flat = tensor::CollapseShapeOp::create(
        builder, loc, RankedTensorType::get({ranks * total}, elementType),
        matrix, SmallVector<ReassociationIndices>{{0, 1}});
    auto merged = ReduceScatterStartOp::create(
        builder, loc,
        FutureType::get(RankedTensorType::get({total}, elementType)), flat,
        last.getComm(), /*scatter_axis=*/0, last.getReduction());

    // Releases of member inputs become one release of the merged input.
    Operation *lastRelease = nullptr;
    for (const Member &m : bucket)
      for (Operation *user : llvm::make_early_inc_range(
               cast<ReduceScatterStartOp>(m.start).getInput().getUsers()))
        if (isa<ReleaseOp>(user)) {
          if (!lastRelease || lastRelease->isBeforeInBlock(user)) {
            if (lastRelease)
              lastRelease->erase();
            lastRelease = user;
          } else {
            user->erase();
          }
        }
    if (lastRelease) {
      // Where the last member's input was released, but not before the
      // merged collective reads the merged input.
      if (lastRelease->isBeforeInBlock(merged))
        builder.setInsertionPointAfter(merged);
      else
        builder.setInsertionPoint(lastRelease);
      ReleaseOp::create(builder, loc, flat);
      lastRelease->erase();
    }

    Operation *firstWait = bucket.front().wait;
    for (const Member &m : bucket)
      if (m.wait->isBeforeInBlock(firstWait))
        firstWait = m.wait;
    builder.setInsertionPoint(firstWait);
    Value result = WaitOp::create(builder, loc, merged.getFuture());
    int64_t offset = 0;
    for (const Member &m : bucket) {
      Value block = tensor::ExtractSliceOp::create(
          builder, loc, RankedTensorType::get({m.blockElements}, elementType),
          result, ArrayRef<OpFoldResult>{builder.getIndexAttr(offset)},
          ArrayRef<OpFoldResult>{builder.getIndexAttr(m.blockElements)},
          ArrayRef<OpFoldResult>{builder.getIndexAttr(1)});
      offset += m.blockElements;
      WaitOp(m.wait).getResult().replaceAllUsesWith(block);
    }
    for (const Member &m : bucket) {
      WaitOp(m.wait).erase();
      m.start->erase();
    }
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
      if (!wait || !isFlat(collective)) {
        previous = nullptr;
        continue;
      }
      Member member{start, wait,
                    collective.getInput().getType().getNumElements(),
                    collective.getInputBytes().value_or(0)};
      bool joins =
          previous && onlyStartsBetween(previous, start) && !groups.empty() &&
          cast<AllGatherStartOp>(groups.back().front().start).getComm() ==
              start.getComm() &&
          collective.getInput().getType().getElementType() ==
              cast<AllGatherStartOp>(groups.back().front().start)
                  .getInput()
                  .getType()
                  .getElementType();
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
          if (run.size() > 1)
            mergeAllGathers(run);
          run = {member};
        }
      }
      if (run.size() > 1 && releasesAdjacent(run))
        mergeAllGathers(run);
    }
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

  void mergeAllGathers(ArrayRef<Member> group) {
    auto first = cast<AllGatherStartOp>(group.front().start);
    int64_t ranks =
        *cast<CollectiveOpInterface>(first.getOperation()).getNumRanks();
    Type elementType = first.getInput().getType().getElementType();
    Location loc = first.getLoc();
    OpBuilder builder(first);
    SmallVector<Value> inputs;
    int64_t total = 0;
    for (const Member &m : group) {
      inputs.push_back(cast<AllGatherStartOp>(m.start).getInput());
      total += m.blockElements;
    }
    Value concat = tensor::ConcatOp::create(builder, loc, /*dim=*/0, inputs);
    auto merged = AllGatherStartOp::create(
        builder, loc,
        FutureType::get(RankedTensorType::get({ranks * total}, elementType)),
        concat, first.getComm(), /*gather_axis=*/0);
    Operation *firstWait = group.front().wait;
    Operation *lastRelease = nullptr;
    for (const Member &m : group) {
      if (m.wait->isBeforeInBlock(firstWait))
        firstWait = m.wait;
      Operation *release = findRelease(m.wait);
      if (!lastRelease || lastRelease->isBeforeInBlock(release))
        lastRelease = release;
    }
    builder.setInsertionPoint(firstWait);
    Value gathered = WaitOp::create(builder, loc, merged.getFuture());
    // Rank r's block of the merged buffer holds every member's block r.
    Value matrix = tensor::ExpandShapeOp::create(
        builder, loc, RankedTensorType::get({ranks, total}, elementType),
        gathered, SmallVector<ReassociationIndices>{{0, 1}});
    int64_t offset = 0;
    for (const Member &m : group) {
      Value columns = tensor::ExtractSliceOp::create(
          builder, loc,
          RankedTensorType::get({ranks, m.blockElements}, elementType), matrix,
          ArrayRef<OpFoldResult>{builder.getIndexAttr(0),
                                 builder.getIndexAttr(offset)},
          ArrayRef<OpFoldResult>{builder.getIndexAttr(ranks),
                                 builder.getIndexAttr(m.blockElements)},
          ArrayRef<OpFoldResult>{builder.getIndexAttr(1),
                                 builder.getIndexAttr(1)});
      offset += m.blockElements;
      Value flat = tensor::CollapseShapeOp::create(
          builder, loc,
          RankedTensorType::get({ranks * m.blockElements}, elementType),
          columns, SmallVector<ReassociationIndices>{{0, 1}});
      for (OpOperand &use : llvm::make_early_inc_range(m.wait->getUses()))
        if (!isa<ReleaseOp>(use.getOwner()))
          use.set(flat);
    }
    builder.setInsertionPointAfter(lastRelease);
    ReleaseOp::create(builder, loc, gathered);
    for (const Member &m : group) {
      findRelease(m.wait).erase();
      WaitOp(m.wait).erase();
      m.start->erase();
    }
  }
};

} // namespace

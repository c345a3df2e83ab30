//===- Merge.cpp - several flat collectives as one ------------------------===//

#include "Merge.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallPtrSet.h"

using namespace mlir;
using namespace loom::coll;

namespace {

/// Every member's location: the merged ops carry each member's op id, so a
/// profile's times for the members add up to the merged collective's.
Location getMergedLoc(ArrayRef<MergeMember> members) {
  SmallVector<Location> locations;
  for (const MergeMember &m : members)
    locations.push_back(m.start->getLoc());
  return FusedLoc::get(members.front().start->getContext(), locations);
}

Operation *getFirst(ArrayRef<MergeMember> members, bool waits) {
  Operation *first = nullptr;
  for (const MergeMember &m : members) {
    Operation *op = waits ? WaitOp(m.wait).getOperation() : m.start;
    if (!first || op->isBeforeInBlock(first))
      first = op;
  }
  return first;
}

Operation *getLastStart(ArrayRef<MergeMember> members) {
  Operation *last = nullptr;
  for (const MergeMember &m : members)
    if (!last || last->isBeforeInBlock(m.start))
      last = m.start;
  return last;
}

/// Elements of this rank's block: the shard, for both kinds.
int64_t getBlockElements(const MergeMember &m) {
  auto collective = cast<CollectiveOpInterface>(m.start);
  return isa<ReduceScatterStartOp>(m.start)
             ? collective.getResultType().getNumElements()
             : collective.getInput().getType().getNumElements();
}

/// The releases of `value` (a gathered result or a reduce-scatter's input).
SmallVector<Operation *> getReleases(Value value) {
  SmallVector<Operation *> releases;
  for (Operation *user : value.getUsers())
    if (isa<ReleaseOp>(user))
      releases.push_back(user);
  return releases;
}

/// Checks what both kinds need: at least two distinct, mergeable members,
/// each waited in the block of the first.
bool haveMergeableMembers(ArrayRef<MergeMember> members) {
  if (members.size() < 2)
    return false;
  Block *block = members.front().start->getBlock();
  llvm::SmallPtrSet<Operation *, 8> seen;
  for (const MergeMember &m : members) {
    WaitOp wait = m.wait;
    if (!seen.insert(m.start).second || m.start->getBlock() != block || !wait ||
        wait->getBlock() != block ||
        wait.getFuture() != cast<CollectiveOpInterface>(m.start).getFuture() ||
        !areMergeable(members.front().start, m.start))
      return false;
  }
  return true;
}

} // namespace

bool loom::coll::isFlatCollective(CollectiveOpInterface op) {
  TypedValue<RankedTensorType> input = op.getInput();
  RankedTensorType result = op.getResultType();
  return input && input.getType().getRank() == 1 &&
         input.getType().hasStaticShape() && result && result.getRank() == 1 &&
         result.hasStaticShape() && op.getNumRanks().has_value();
}

bool loom::coll::areMergeable(Operation *a, Operation *b) {
  bool reduceScatters =
      isa<ReduceScatterStartOp>(a) && isa<ReduceScatterStartOp>(b);
  bool allGathers = isa<AllGatherStartOp>(a) && isa<AllGatherStartOp>(b);
  if (!reduceScatters && !allGathers)
    return false;
  auto x = cast<CollectiveOpInterface>(a);
  auto y = cast<CollectiveOpInterface>(b);
  return isFlatCollective(x) && isFlatCollective(y) &&
         x.getComm() == y.getComm() &&
         x.getInput().getType().getElementType() ==
             y.getInput().getType().getElementType() &&
         x.getReductionKind() == y.getReductionKind();
}

bool loom::coll::canMergeReduceScatters(ArrayRef<MergeMember> members) {
  if (!haveMergeableMembers(members) ||
      !isa<ReduceScatterStartOp>(members.front().start))
    return false;
  Block *block = members.front().start->getBlock();
  for (const MergeMember &m : members)
    for (Operation *release :
         getReleases(cast<CollectiveOpInterface>(m.start).getInput()))
      if (release->getBlock() != block)
        return false;
  return getLastStart(members)->isBeforeInBlock(
      getFirst(members, /*waits=*/true));
}

ReduceScatterStartOp
loom::coll::mergeReduceScatters(ArrayRef<MergeMember> members) {
  assert(canMergeReduceScatters(members) && "reduce-scatters cannot merge");
  auto last = cast<ReduceScatterStartOp>(getLastStart(members));
  int64_t ranks =
      *cast<CollectiveOpInterface>(last.getOperation()).getNumRanks();
  Type elementType = last.getInput().getType().getElementType();
  Location loc = getMergedLoc(members);
  OpBuilder builder(last);
  SmallVector<Value> rows;
  int64_t total = 0;
  for (const MergeMember &m : members) {
    int64_t elements = getBlockElements(m);
    auto rowsType = RankedTensorType::get({ranks, elements}, elementType);
    rows.push_back(tensor::ExpandShapeOp::create(
        builder, loc, rowsType, cast<ReduceScatterStartOp>(m.start).getInput(),
        SmallVector<ReassociationIndices>{{0, 1}}));
    total += elements;
  }
  Value matrix = tensor::ConcatOp::create(builder, loc, /*dim=*/1, rows);
  Value flat = tensor::CollapseShapeOp::create(
      builder, loc, RankedTensorType::get({ranks * total}, elementType), matrix,
      SmallVector<ReassociationIndices>{{0, 1}});
  auto merged = ReduceScatterStartOp::create(
      builder, loc,
      FutureType::get(RankedTensorType::get({total}, elementType)), flat,
      last.getComm(), /*scatter_axis=*/0, last.getReduction());

  // Releases of member inputs become one release of the merged input, where
  // the last one was, but not before the merged collective reads it.
  llvm::SetVector<Operation *> releases;
  for (const MergeMember &m : members)
    for (Operation *release :
         getReleases(cast<ReduceScatterStartOp>(m.start).getInput()))
      releases.insert(release);
  if (!releases.empty()) {
    Operation *lastRelease = releases.front();
    for (Operation *release : releases)
      if (lastRelease->isBeforeInBlock(release))
        lastRelease = release;
    if (lastRelease->isBeforeInBlock(merged))
      builder.setInsertionPointAfter(merged);
    else
      builder.setInsertionPoint(lastRelease);
    ReleaseOp::create(builder, loc, flat);
    for (Operation *release : releases)
      release->erase();
  }

  builder.setInsertionPoint(getFirst(members, /*waits=*/true));
  Value result = WaitOp::create(builder, loc, merged.getFuture());
  int64_t offset = 0;
  for (const MergeMember &m : members) {
    int64_t elements = getBlockElements(m);
    Value block = tensor::ExtractSliceOp::create(
        builder, loc, RankedTensorType::get({elements}, elementType), result,
        ArrayRef<OpFoldResult>{builder.getIndexAttr(offset)},
        ArrayRef<OpFoldResult>{builder.getIndexAttr(elements)},
        ArrayRef<OpFoldResult>{builder.getIndexAttr(1)});
    offset += elements;
    WaitOp(m.wait).getResult().replaceAllUsesWith(block);
  }
  for (const MergeMember &m : members) {
    m.wait->erase();
    m.start->erase();
  }
  return merged;
}

bool loom::coll::canMergeAllGathers(ArrayRef<MergeMember> members) {
  if (!haveMergeableMembers(members) ||
      !isa<AllGatherStartOp>(members.front().start))
    return false;
  Block *block = members.front().start->getBlock();
  Operation *first = getFirst(members, /*waits=*/false);
  unsigned released = 0;
  for (const MergeMember &m : members) {
    // The shards are concatenated where the first member starts.
    Value input = cast<AllGatherStartOp>(m.start).getInput();
    if (Operation *def = input.getDefiningOp())
      if (Operation *top = block->findAncestorOpInBlock(*def);
          top && !top->isBeforeInBlock(first))
        return false;
    SmallVector<Operation *> releases = getReleases(WaitOp(m.wait).getResult());
    if (releases.size() > 1 ||
        (releases.size() == 1 && releases.front()->getBlock() != block))
      return false;
    released += releases.size();
  }
  return released == 0 || released == members.size();
}

AllGatherStartOp loom::coll::mergeAllGathers(ArrayRef<MergeMember> members,
                                             bool copyOut) {
  assert(canMergeAllGathers(members) && "all-gathers cannot merge");
  auto first = cast<AllGatherStartOp>(getFirst(members, /*waits=*/false));
  int64_t ranks =
      *cast<CollectiveOpInterface>(first.getOperation()).getNumRanks();
  Type elementType = first.getInput().getType().getElementType();
  Location loc = getMergedLoc(members);
  OpBuilder builder(first);
  SmallVector<Value> inputs;
  int64_t total = 0;
  for (const MergeMember &m : members) {
    inputs.push_back(cast<AllGatherStartOp>(m.start).getInput());
    total += getBlockElements(m);
  }
  Value concat = tensor::ConcatOp::create(builder, loc, /*dim=*/0, inputs);
  auto merged = AllGatherStartOp::create(
      builder, loc,
      FutureType::get(RankedTensorType::get({ranks * total}, elementType)),
      concat, first.getComm(), /*gather_axis=*/0);
  SmallVector<Operation *> releases;
  for (const MergeMember &m : members)
    llvm::append_range(releases, getReleases(WaitOp(m.wait).getResult()));

  builder.setInsertionPoint(getFirst(members, /*waits=*/true));
  Value gathered = WaitOp::create(builder, loc, merged.getFuture());
  // Rank r's block of the merged buffer holds every member's block r.
  Value matrix = tensor::ExpandShapeOp::create(
      builder, loc, RankedTensorType::get({ranks, total}, elementType),
      gathered, SmallVector<ReassociationIndices>{{0, 1}});
  int64_t offset = 0;
  for (const MergeMember &m : members) {
    int64_t elements = getBlockElements(m);
    auto columnsType = RankedTensorType::get({ranks, elements}, elementType);
    Value columns = tensor::ExtractSliceOp::create(
        builder, loc, columnsType, matrix,
        ArrayRef<OpFoldResult>{builder.getIndexAttr(0),
                               builder.getIndexAttr(offset)},
        ArrayRef<OpFoldResult>{builder.getIndexAttr(ranks),
                               builder.getIndexAttr(elements)},
        ArrayRef<OpFoldResult>{builder.getIndexAttr(1),
                               builder.getIndexAttr(1)});
    offset += elements;
    if (copyOut) {
      Value init = tensor::EmptyOp::create(builder, loc, columnsType.getShape(),
                                           elementType);
      columns =
          linalg::CopyOp::create(builder, loc, columns, init).getResult(0);
    }
    Value flat = tensor::CollapseShapeOp::create(
        builder, loc, RankedTensorType::get({ranks * elements}, elementType),
        columns, SmallVector<ReassociationIndices>{{0, 1}});
    for (OpOperand &use : llvm::make_early_inc_range(m.wait->getUses()))
      if (!isa<ReleaseOp>(use.getOwner()))
        use.set(flat);
  }
  if (copyOut) {
    // Copied out: nothing reads the merged buffer any more.
    ReleaseOp::create(builder, loc, gathered);
  } else if (!releases.empty()) {
    Operation *lastRelease = releases.front();
    for (Operation *release : releases)
      if (lastRelease->isBeforeInBlock(release))
        lastRelease = release;
    builder.setInsertionPointAfter(lastRelease);
    ReleaseOp::create(builder, loc, gathered);
  }
  for (Operation *release : releases)
    release->erase();
  for (const MergeMember &m : members) {
    m.wait->erase();
    m.start->erase();
  }
  return merged;
}

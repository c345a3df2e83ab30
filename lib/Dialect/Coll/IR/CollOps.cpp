//===- CollOps.cpp - coll operations and their verifiers ------------------===//

#include "loom/Dialect/Coll/CollOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

using namespace mlir;
using namespace loom::coll;

#define GET_OP_CLASSES
#include "loom/Dialect/Coll/CollOps.cpp.inc"

//===----------------------------------------------------------------------===//
// Shape rules shared by the start ops
//===----------------------------------------------------------------------===//

/// Checks that the future's value has the input's element type and rank.
static LogicalResult verifyElementTypeAndRank(CollectiveOpInterface op) {
  RankedTensorType input = op.getInput().getType();
  RankedTensorType result = op.getResultType();
  if (input.getElementType() != result.getElementType())
    return op->emitOpError()
           << "expected result element type " << input.getElementType()
           << ", got " << result.getElementType();
  if (input.getRank() != result.getRank())
    return op->emitOpError() << "expected result rank " << input.getRank()
                             << ", got " << result.getRank();
  return success();
}

/// Checks a collective that changes one dimension by the number of ranks:
/// along `axis`, `large` must be `small` times the number of ranks, and every
/// other dimension must agree. For an all-gather the result is the large side,
/// for a reduce-scatter the input is.
static LogicalResult verifyAxisScaling(CollectiveOpInterface op, int64_t axis,
                                       StringRef axisName, bool resultIsLarge) {
  if (failed(verifyElementTypeAndRank(op)))
    return failure();
  RankedTensorType input = op.getInput().getType();
  RankedTensorType result = op.getResultType();
  if (axis >= input.getRank())
    return op->emitOpError()
           << "expected " << axisName << " to be less than the rank "
           << input.getRank() << ", got " << axis;
  std::optional<int64_t> ranks = op.getNumRanks();
  for (int64_t dim = 0, e = input.getRank(); dim < e; ++dim) {
    int64_t in = input.getDimSize(dim), out = result.getDimSize(dim);
    if (ShapedType::isDynamic(in) || ShapedType::isDynamic(out))
      continue;
    if (dim != axis) {
      if (in != out)
        return op->emitOpError()
               << "expected result dimension " << dim << " to be " << in
               << " (the input's), got " << out;
      continue;
    }
    int64_t small = resultIsLarge ? in : out;
    int64_t large = resultIsLarge ? out : in;
    StringRef largeName = resultIsLarge ? "result" : "input";
    StringRef smallName = resultIsLarge ? "input's" : "result's";
    if (ranks && large != small * *ranks)
      return op->emitOpError()
             << "expected " << largeName << " dimension " << dim << " ("
             << axisName << ") to be " << small * *ranks << " (the "
             << smallName << " " << small << " times " << *ranks
             << " ranks), got " << large;
    if (!ranks && (small == 0 ? large != 0 : large % small != 0))
      return op->emitOpError()
             << "expected " << largeName << " dimension " << dim << " ("
             << axisName << ") to be a multiple of " << small << ", got "
             << large;
  }
  return success();
}

/// Checks a collective whose result has exactly the input's type.
static LogicalResult verifySameType(CollectiveOpInterface op) {
  if (op.getInput().getType() != op.getResultType())
    return op->emitOpError()
           << "expected future value type " << op.getInput().getType()
           << " (the input type), got " << op.getResultType();
  return success();
}

//===----------------------------------------------------------------------===//
// CommGroupOp
//===----------------------------------------------------------------------===//

LogicalResult CommGroupOp::verify() {
  std::optional<int64_t> parent = getParent().getType().getStaticSize();
  if (!parent)
    return emitOpError("expected a parent communicator of static size");
  int64_t size = getSize(), stride = getStride();
  if (size > *parent || stride > *parent || *parent % (size * stride) != 0)
    return emitOpError() << "expected the parent's " << *parent
                         << " ranks to be a multiple of size * stride = "
                         << size << " * " << stride;
  if (getComm().getType().getStaticSize() != size)
    return emitOpError() << "expected a result of size " << size << ", got "
                         << getComm().getType();
  return success();
}

OpFoldResult CommGroupOp::fold(FoldAdaptor) {
  // size = W (so stride = 1): the whole parent.
  if (getParent().getType() == getComm().getType())
    return getParent();
  return {};
}

Value loom::coll::getRootComm(Value comm) {
  while (auto group = comm.getDefiningOp<CommGroupOp>())
    comm = group.getParent();
  return comm;
}

SmallVector<GroupStep> loom::coll::getGroupSteps(Value comm) {
  SmallVector<GroupStep> steps;
  while (auto group = comm.getDefiningOp<CommGroupOp>()) {
    steps.push_back({int64_t(group.getSize()), int64_t(group.getStride())});
    comm = group.getParent();
  }
  std::reverse(steps.begin(), steps.end());
  return steps;
}

//===----------------------------------------------------------------------===//
// CommRankOp
//===----------------------------------------------------------------------===//

OpFoldResult CommRankOp::fold(FoldAdaptor) {
  if (getComm().getType().getStaticSize() == 1)
    return IntegerAttr::get(IndexType::get(getContext()), 0);
  return {};
}

//===----------------------------------------------------------------------===//
// AllGatherStartOp
//===----------------------------------------------------------------------===//

CollectiveKind AllGatherStartOp::getKind() { return CollectiveKind::AllGather; }

LogicalResult AllGatherStartOp::verify() {
  return verifyAxisScaling(*this, getGatherAxis(), "gather_axis",
                           /*resultIsLarge=*/true);
}

//===----------------------------------------------------------------------===//
// ReduceScatterStartOp
//===----------------------------------------------------------------------===//

CollectiveKind ReduceScatterStartOp::getKind() {
  return CollectiveKind::ReduceScatter;
}

std::optional<ReductionKind> ReduceScatterStartOp::getReductionKind() {
  return getReduction();
}

LogicalResult ReduceScatterStartOp::verify() {
  return verifyAxisScaling(*this, getScatterAxis(), "scatter_axis",
                           /*resultIsLarge=*/false);
}

//===----------------------------------------------------------------------===//
// AllReduceStartOp
//===----------------------------------------------------------------------===//

CollectiveKind AllReduceStartOp::getKind() { return CollectiveKind::AllReduce; }

std::optional<ReductionKind> AllReduceStartOp::getReductionKind() {
  return getReduction();
}

LogicalResult AllReduceStartOp::verify() { return verifySameType(*this); }

//===----------------------------------------------------------------------===//
// BroadcastStartOp
//===----------------------------------------------------------------------===//

CollectiveKind BroadcastStartOp::getKind() { return CollectiveKind::Broadcast; }

LogicalResult BroadcastStartOp::verify() {
  if (failed(verifySameType(*this)))
    return failure();
  std::optional<int64_t> ranks = getComm().getType().getStaticSize();
  if (ranks && static_cast<int64_t>(getRoot()) >= *ranks)
    return emitOpError() << "expected root to be less than the " << *ranks
                         << " ranks of the communicator, got " << getRoot();
  return success();
}

//===----------------------------------------------------------------------===//
// SendStartOp and RecvStartOp
//===----------------------------------------------------------------------===//

/// Checks that `peer` names a rank of a static communicator.
static LogicalResult verifyPeer(CollectiveOpInterface op, uint64_t peer) {
  std::optional<int64_t> ranks = op.getNumRanks();
  if (ranks && static_cast<int64_t>(peer) >= *ranks)
    return op->emitOpError() << "expected peer to be less than the " << *ranks
                             << " ranks of the communicator, got " << peer;
  return success();
}

CollectiveKind SendStartOp::getKind() { return CollectiveKind::Send; }

LogicalResult SendStartOp::verify() {
  RankedTensorType input = getInput().getType();
  RankedTensorType result = getFuture().getType().getValueType();
  if (result != RankedTensorType::get({0}, input.getElementType()))
    return emitOpError() << "expected future value type "
                         << RankedTensorType::get({0}, input.getElementType())
                         << " (a send returns nothing), got " << result;
  return verifyPeer(*this, getPeer());
}

CollectiveKind RecvStartOp::getKind() { return CollectiveKind::Recv; }

TypedValue<RankedTensorType> RecvStartOp::getInput() { return {}; }

LogicalResult RecvStartOp::verify() { return verifyPeer(*this, getPeer()); }

std::pair<int64_t, int64_t>
loom::coll::getPeerAndTag(CollectiveOpInterface op) {
  if (auto send = dyn_cast<SendStartOp>(op.getOperation()))
    return {send.getPeer(), send.getTag()};
  auto recv = cast<RecvStartOp>(op.getOperation());
  return {recv.getPeer(), recv.getTag()};
}

//===----------------------------------------------------------------------===//
// WaitOp
//===----------------------------------------------------------------------===//

CollectiveOpInterface WaitOp::getStart() {
  return getFuture().getDefiningOp<CollectiveOpInterface>();
}

LogicalResult WaitOp::verify() {
  if (getStart())
    return success();
  InFlightDiagnostic diag = emitOpError()
                            << "expected a future produced by a collective "
                               "start op in this block, found ";
  if (Operation *def = getFuture().getDefiningOp())
    return diag << "'" << def->getName() << "'";
  return diag << "a block argument";
}

//===----------------------------------------------------------------------===//
// ReleaseOp
//===----------------------------------------------------------------------===//

/// Returns the start op in `block`, before `before`, whose input is `value`.
static Operation *findStartReading(Value value, Operation *before) {
  for (Operation *user : value.getUsers()) {
    auto start = dyn_cast<CollectiveOpInterface>(user);
    if (start && start.getInput() == value &&
        user->getBlock() == before->getBlock() && user->isBeforeInBlock(before))
      return user;
  }
  return nullptr;
}

LogicalResult ReleaseOp::verify() {
  Value buffer = getBuffer();
  bool isStartInput = findStartReading(buffer, getOperation());
  if (!buffer.getDefiningOp<WaitOp>() && !isStartInput) {
    InFlightDiagnostic diag = emitOpError()
                              << "expected the result of a 'coll.wait' or "
                                 "the input of an earlier collective start, "
                                 "found ";
    if (Operation *def = buffer.getDefiningOp())
      return diag << "the result of '" << def->getName() << "'";
    return diag << "a block argument";
  }
  Block *block = (*this)->getBlock();
  for (Operation *user : buffer.getUsers()) {
    if (user == getOperation())
      continue;
    Operation *ancestor = block->findAncestorOpInBlock(*user);
    if (!ancestor)
      return emitOpError() << "expected every use of the released value in "
                              "the block of its release, found '"
                           << user->getName() << "' in another block";
    if (getOperation()->isBeforeInBlock(ancestor)) {
      if (isa<ReleaseOp>(user))
        return emitOpError() << "value is released more than once";
      return emitOpError() << "value is used after its release by '"
                           << user->getName() << "'";
    }
  }
  return success();
}

//===- CollInterfaces.cpp - CollectiveOpInterface -------------------------===//

#include "loom/Dialect/Coll/CollInterfaces.h"
#include "loom/Dialect/Coll/CollOps.h"
#include "loom/Utils/ShapeChecks.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace loom::coll;

#include "loom/Dialect/Coll/CollInterfaces.cpp.inc"

std::optional<int64_t> loom::coll::getStaticSizeInBytes(RankedTensorType type) {
  return loom::getStaticSizeInBytes(type);
}

std::optional<int64_t> CollectiveOpInterface::getNumRanks() {
  return getComm().getType().getStaticSize();
}

RankedTensorType CollectiveOpInterface::getResultType() {
  return getFuture().getType().getValueType();
}

Operation *CollectiveOpInterface::getWait() {
  for (Operation *user : getFuture().getUsers())
    if (isa<WaitOp>(user))
      return user;
  return nullptr;
}

bool CollectiveOpInterface::isPointToPoint() {
  return getKind() == CollectiveKind::Send || getKind() == CollectiveKind::Recv;
}

std::optional<int64_t> CollectiveOpInterface::getInputBytes() {
  if (!getInput())
    return 0;
  return getStaticSizeInBytes(getInput().getType());
}

std::optional<int64_t> CollectiveOpInterface::getResultBytes() {
  return getStaticSizeInBytes(getResultType());
}

std::optional<CollectiveTraffic> CollectiveOpInterface::getTraffic() {
  std::optional<int64_t> ranks = getNumRanks();
  std::optional<int64_t> inputBytes = getInputBytes();
  std::optional<int64_t> resultBytes = getResultBytes();
  if (!ranks || !inputBytes || !resultBytes)
    return std::nullopt;
  int64_t n = *ranks;
  if (n == 1)
    return CollectiveTraffic{};
  switch (getKind()) {
  case CollectiveKind::AllGather:
    // Each of the n-1 steps forwards one rank's shard to the next rank.
    return CollectiveTraffic{(n - 1) * *inputBytes, (n - 1) * *inputBytes,
                             n - 1};
  case CollectiveKind::ReduceScatter:
    // Each of the n-1 steps passes one partially reduced block along.
    return CollectiveTraffic{(n - 1) * *resultBytes, (n - 1) * *resultBytes,
                             n - 1};
  case CollectiveKind::AllReduce: {
    // A reduce-scatter followed by an all-gather of n blocks of B/n bytes.
    int64_t bytes = llvm::divideCeil(2 * (n - 1) * *inputBytes, n);
    return CollectiveTraffic{bytes, bytes, 2 * (n - 1)};
  }
  case CollectiveKind::Broadcast:
    // A pipelined chain from the root: a middle rank receives and forwards
    // everything once.
    return CollectiveTraffic{*inputBytes, *inputBytes, n - 1};
  case CollectiveKind::Send:
    return CollectiveTraffic{*inputBytes, 0, 1};
  case CollectiveKind::Recv:
    return CollectiveTraffic{0, *resultBytes, 1};
  }
  llvm_unreachable("unknown collective kind");
}

/// Names what uses a future in the diagnostics below.
static std::string describeUser(Operation *user) {
  return ("'" + user->getName().getStringRef() + "'").str();
}

LogicalResult loom::coll::detail::verifyCollectiveOp(Operation *op) {
  auto collective = cast<CollectiveOpInterface>(op);
  Block *block = op->getBlock();
  unsigned numWaits = 0;
  for (Operation *user : collective.getFuture().getUsers()) {
    if (user->hasTrait<OpTrait::IsTerminator>())
      return op->emitOpError() << "future escapes its block through terminator "
                               << describeUser(user);
    if (!isa<WaitOp>(user))
      return op->emitOpError()
             << "expected the future to be used only by 'coll.wait', found "
             << describeUser(user);
    if (user->getBlock() != block) {
      Operation *ancestor =
          block ? block->findAncestorOpInBlock(*user) : nullptr;
      if (ancestor)
        return op->emitOpError()
               << "future escapes through a region boundary: waited inside "
               << describeUser(ancestor);
      return op->emitOpError()
             << "expected the future to be waited in the block of its start, "
                "found its 'coll.wait' in another block";
    }
    ++numWaits;
  }
  if (numWaits == 0)
    return op->emitOpError()
           << "expected the future to be waited in its block, found no "
              "'coll.wait'";
  if (numWaits > 1)
    return op->emitOpError()
           << "expected the future to be waited exactly once, found "
           << numWaits << " waits";
  return success();
}

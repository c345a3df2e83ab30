//===- SimulatedWorld.cpp - N ranks as threads, for loom-run --------------===//

#include "SimulatedWorld.h"
#include "loom/Conversion/CollToLoomrt.h"
#include "loom/Dialect/Coll/CollOps.h"
#include "loom/Runtime/CommGroups.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/ExecutionEngine/CRunnerUtils.h"
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <vector>

using namespace mlir;
using namespace loom::coll;

namespace {

//===----------------------------------------------------------------------===//
// Runtime
//===----------------------------------------------------------------------===//

/// A generation barrier (C++17 has no std::barrier).
class Barrier {
public:
  void reset(int64_t count) {
    total = count;
    waiting = 0;
  }
  void arrive() {
    std::unique_lock<std::mutex> lock(mutex);
    int64_t gen = generation;
    if (++waiting == total) {
      waiting = 0;
      ++generation;
      cv.notify_all();
      return;
    }
    cv.wait(lock, [&] { return gen != generation; });
  }

private:
  std::mutex mutex;
  std::condition_variable cv;
  int64_t total = 1, waiting = 0, generation = 0;
};

/// The ranks of one communicator a collective runs among.
struct Group {
  Barrier barrier;
  /// Each rank's contribution to the collective in progress, contiguous.
  std::vector<std::vector<char>> posted;
};

struct World {
  int64_t ranks = 1;
  /// The `coll.comm_group` steps from the world to each communicator the
  /// lowered program uses, by the index its calls pass (0: the world).
  std::vector<llvm::SmallVector<GroupStep>> communicators{{}};
  /// Each group, made on first use, by communicator and world rank of its
  /// rank 0.
  std::map<std::pair<int64_t, int64_t>, std::unique_ptr<Group>> groups;
  std::mutex groupsMutex;
  /// Point-to-point messages in flight, per (sender, receiver), in the
  /// order they were sent: a send never blocks, a receive blocks until its
  /// message is there.
  struct Message {
    int64_t tag;
    std::vector<char> bytes;
  };
  std::map<std::pair<int64_t, int64_t>, std::deque<Message>> mailboxes;
  std::mutex mailboxMutex;
  std::condition_variable delivered;
};

World world;
thread_local int64_t currentRank = 0;

[[noreturn]] void fail(const std::string &message) {
  std::fprintf(stderr, "loom-run: rank %ld: error: %s\n", long(currentRank),
               message.c_str());
  std::fflush(stderr);
  std::_Exit(1);
}

/// The calling rank's group of communicator `index`: the world ranks of its
/// members (by their rank in it) and the calling rank's rank in it.
std::pair<std::vector<int64_t>, int64_t> membersOf(int64_t index) {
  std::vector<int64_t> members(world.ranks);
  for (int64_t r = 0; r < world.ranks; ++r)
    members[r] = r;
  int64_t mine = currentRank;
  for (GroupStep step : world.communicators.at(index)) {
    auto group = loom::runtime::StridedGroup::of(mine, step.size, step.stride);
    std::vector<int64_t> next;
    for (int64_t i = 0; i < step.size; ++i)
      next.push_back(members[group.member(i)]);
    members = std::move(next);
    mine = loom::runtime::StridedGroup::rankOf(mine, step.size, step.stride);
  }
  return {members, mine};
}

Group &groupOf(int64_t index, const std::vector<int64_t> &members) {
  std::lock_guard<std::mutex> lock(world.groupsMutex);
  std::unique_ptr<Group> &group = world.groups[{index, members.front()}];
  if (!group) {
    group = std::make_unique<Group>();
    group->barrier.reset(int64_t(members.size()));
    group->posted.assign(members.size(), {});
  }
  return *group;
}

/// Calls `fn(linear, offset)` for each of the first `count` elements of a
/// strided memref in row-major order: its index in a contiguous copy and
/// its element offset in `m`.
void forEachElement(const DynamicMemRefType<char> &m, int64_t count,
                    llvm::function_ref<void(int64_t, int64_t)> fn) {
  std::vector<int64_t> index(m.rank, 0);
  for (int64_t linear = 0; linear < count; ++linear) {
    int64_t offset = m.offset;
    for (int64_t d = 0; d < m.rank; ++d)
      offset += index[d] * m.strides[d];
    fn(linear, offset);
    for (int64_t d = m.rank - 1; d >= 0; --d) {
      if (++index[d] < m.sizes[d])
        break;
      index[d] = 0;
    }
  }
}

/// Copies a strided memref into a contiguous byte buffer.
std::vector<char> contiguous(const DynamicMemRefType<char> &m,
                             int64_t elementBytes) {
  int64_t count = 1;
  for (int64_t i = 0; i < m.rank; ++i)
    count *= m.sizes[i];
  std::vector<char> out(count * elementBytes);
  forEachElement(m, count, [&](int64_t linear, int64_t offset) {
    std::memcpy(&out[linear * elementBytes], m.data + offset * elementBytes,
                elementBytes);
  });
  return out;
}

/// The product of the sizes before and after `axis`.
std::pair<int64_t, int64_t> splitAt(const DynamicMemRefType<char> &m,
                                    int64_t axis) {
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < m.rank; ++d)
    (d < axis ? outer : inner) *= (d == axis ? 1 : m.sizes[d]);
  return {outer, inner};
}

/// Writes contiguous `bytes` through `out`'s strides.
void scatterInto(const DynamicMemRefType<char> &out,
                 const std::vector<char> &bytes, int64_t elementBytes) {
  forEachElement(out, bytes.size() / elementBytes,
                 [&](int64_t linear, int64_t offset) {
                   std::memcpy(out.data + offset * elementBytes,
                               &bytes[linear * elementBytes], elementBytes);
                 });
}

template <typename T>
void collective(::UnrankedMemRefType<T> *inArg, ::UnrankedMemRefType<T> *outArg,
                int64_t kind, int64_t reduction, int64_t axisOrRoot,
                int64_t communicator) {
  // Views as bytes: the descriptors' layout does not depend on T.
  DynamicMemRefType<char> in(
      *reinterpret_cast<::UnrankedMemRefType<char> *>(inArg));
  DynamicMemRefType<char> out(
      *reinterpret_cast<::UnrankedMemRefType<char> *>(outArg));
  auto [members, r] = membersOf(communicator);
  int64_t n = int64_t(members.size());
  Group &group = groupOf(communicator, members);
  group.posted[r] = contiguous(in, sizeof(T));
  group.barrier.arrive();
  std::vector<char> result;
  const auto &mine = group.posted[r];
  auto element = [&](int64_t rank, int64_t i) {
    return reinterpret_cast<const T *>(group.posted[rank].data())[i];
  };
  switch (CollectiveKind(kind)) {
  case CollectiveKind::AllGather: {
    auto [outer, inner] = splitAt(in, axisOrRoot);
    int64_t block = in.sizes[axisOrRoot] * inner * sizeof(T);
    result.resize(mine.size() * n);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t p = 0; p < n; ++p)
        std::memcpy(&result[(o * n + p) * block], &group.posted[p][o * block],
                    block);
    break;
  }
  case CollectiveKind::ReduceScatter:
  case CollectiveKind::AllReduce: {
    int64_t count = mine.size() / sizeof(T);
    std::vector<T> reduced(count);
    for (int64_t i = 0; i < count; ++i) {
      T acc = element(0, i);
      for (int64_t p = 1; p < n; ++p) {
        T v = element(p, i);
        switch (ReductionKind(reduction)) {
        case ReductionKind::Sum:
        case ReductionKind::Avg:
          acc += v;
          break;
        case ReductionKind::Max:
          acc = std::max(acc, v);
          break;
        case ReductionKind::Min:
          acc = std::min(acc, v);
          break;
        }
      }
      reduced[i] =
          ReductionKind(reduction) == ReductionKind::Avg ? acc / T(n) : acc;
    }
    if (CollectiveKind(kind) == CollectiveKind::AllReduce) {
      result.assign(reinterpret_cast<char *>(reduced.data()),
                    reinterpret_cast<char *>(reduced.data()) + mine.size());
      break;
    }
    // This rank's block along the axis.
    auto [outer, inner] = splitAt(in, axisOrRoot);
    int64_t blockRows = in.sizes[axisOrRoot] / n;
    int64_t block = blockRows * inner;
    result.resize(outer * block * sizeof(T));
    for (int64_t o = 0; o < outer; ++o)
      std::memcpy(&result[o * block * sizeof(T)], &reduced[(o * n + r) * block],
                  block * sizeof(T));
    break;
  }
  case CollectiveKind::Broadcast:
    result = group.posted[axisOrRoot];
    break;
  case CollectiveKind::Send:
  case CollectiveKind::Recv:
    fail("a send or receive reached loom_sim_collective");
  }
  group.barrier.arrive();
  scatterInto(out, result, sizeof(T));
}

/// A transfer's peer, a rank of communicator `communicator` other than the
/// calling one, as a world rank.
int64_t worldPeer(int64_t communicator, int64_t peer, const char *what) {
  auto [members, mine] = membersOf(communicator);
  if (peer < 0 || peer >= int64_t(members.size()) || peer == mine)
    fail(std::string(what) + " rank " + std::to_string(peer) + " of " +
         std::to_string(members.size()));
  return members[peer];
}

template <typename T>
void send(::UnrankedMemRefType<T> *inArg, int64_t peer, int64_t tag,
          int64_t communicator) {
  DynamicMemRefType<char> in(
      *reinterpret_cast<::UnrankedMemRefType<char> *>(inArg));
  peer = worldPeer(communicator, peer, "send to");
  std::lock_guard<std::mutex> lock(world.mailboxMutex);
  world.mailboxes[{currentRank, peer}].push_back(
      {tag, contiguous(in, sizeof(T))});
  world.delivered.notify_all();
}

template <typename T>
void recv(::UnrankedMemRefType<T> *outArg, int64_t peer, int64_t tag,
          int64_t communicator) {
  DynamicMemRefType<char> out(
      *reinterpret_cast<::UnrankedMemRefType<char> *>(outArg));
  peer = worldPeer(communicator, peer, "receive from");
  std::unique_lock<std::mutex> lock(world.mailboxMutex);
  auto &box = world.mailboxes[{peer, currentRank}];
  // A hang guard, not a speed check: generous, and said to be a time-out.
  constexpr int kTimeoutSeconds = 1200;
  if (!world.delivered.wait_for(lock, std::chrono::seconds(kTimeoutSeconds),
                                [&] { return !box.empty(); }))
    fail("timed out after " + std::to_string(kTimeoutSeconds) +
         " s waiting for a message from rank " + std::to_string(peer) +
         " with tag " + std::to_string(tag) +
         ": the ranks deadlock (their programs send and receive in "
         "different orders), or the machine is far too loaded");
  World::Message message = std::move(box.front());
  box.pop_front();
  lock.unlock();
  int64_t count = 1;
  for (int64_t d = 0; d < out.rank; ++d)
    count *= out.sizes[d];
  if (message.tag != tag || int64_t(message.bytes.size()) != count * int64_t(sizeof(T)))
    fail("receive from rank " + std::to_string(peer) + " expected tag " +
         std::to_string(tag) + " and " + std::to_string(count * sizeof(T)) +
         " bytes, got tag " + std::to_string(message.tag) + " and " +
         std::to_string(message.bytes.size()) +
         ": the programs send and receive in different orders");
  scatterInto(out, message.bytes, sizeof(T));
}

extern "C" void loomSimSendF32(::UnrankedMemRefType<float> *in, int64_t peer,
                               int64_t tag, int64_t communicator) {
  send(in, peer, tag, communicator);
}
extern "C" void loomSimSendF64(::UnrankedMemRefType<double> *in, int64_t peer,
                               int64_t tag, int64_t communicator) {
  send(in, peer, tag, communicator);
}
extern "C" void loomSimRecvF32(::UnrankedMemRefType<float> *out, int64_t peer,
                               int64_t tag, int64_t communicator) {
  recv(out, peer, tag, communicator);
}
extern "C" void loomSimRecvF64(::UnrankedMemRefType<double> *out, int64_t peer,
                               int64_t tag, int64_t communicator) {
  recv(out, peer, tag, communicator);
}

extern "C" void loomSimCollectiveF32(::UnrankedMemRefType<float> *in,
                                     ::UnrankedMemRefType<float> *out,
                                     int64_t kind, int64_t reduction,
                                     int64_t axis, int64_t communicator) {
  collective(in, out, kind, reduction, axis, communicator);
}
extern "C" void loomSimCollectiveF64(::UnrankedMemRefType<double> *in,
                                     ::UnrankedMemRefType<double> *out,
                                     int64_t kind, int64_t reduction,
                                     int64_t axis, int64_t communicator) {
  collective(in, out, kind, reduction, axis, communicator);
}
extern "C" int64_t loomSimRank() { return currentRank; }

} // namespace

void loom::run::initSimulatedWorld(int64_t ranks) {
  world.ranks = ranks;
  world.groups.clear();
  world.mailboxes.clear();
}

void loom::run::setSimulatedRank(int64_t rank) { currentRank = rank; }

llvm::orc::SymbolMap
loom::run::getSimulatedWorldSymbols(llvm::orc::MangleAndInterner interner) {
  llvm::orc::SymbolMap map;
  auto add = [&](llvm::StringRef name, void *address) {
    map[interner(name)] = {llvm::orc::ExecutorAddr::fromPtr(address),
                           llvm::JITSymbolFlags::Exported};
  };
  add("_mlir_ciface_loom_sim_collective_f32",
      reinterpret_cast<void *>(&loomSimCollectiveF32));
  add("_mlir_ciface_loom_sim_collective_f64",
      reinterpret_cast<void *>(&loomSimCollectiveF64));
  add("_mlir_ciface_loom_sim_send_f32",
      reinterpret_cast<void *>(&loomSimSendF32));
  add("_mlir_ciface_loom_sim_send_f64",
      reinterpret_cast<void *>(&loomSimSendF64));
  add("_mlir_ciface_loom_sim_recv_f32",
      reinterpret_cast<void *>(&loomSimRecvF32));
  add("_mlir_ciface_loom_sim_recv_f64",
      reinterpret_cast<void *>(&loomSimRecvF64));
  add("loom_sim_rank", reinterpret_cast<void *>(&loomSimRank));
  return map;
}

//===----------------------------------------------------------------------===//
// Lowering
//===----------------------------------------------------------------------===//

/// Declares (once) `name` with `type` and the C interface.
static func::FuncOp declare(ModuleOp module, StringRef name,
                            FunctionType type) {
  func::FuncOp func = declarePrivateFunction(module, name, type);
  func->setAttr("llvm.emit_c_interface", UnitAttr::get(module.getContext()));
  return func;
}

/// The index the calls pass for `comm`: its `coll.comm_group` steps from
/// the root (the world, or a communicator argument, which loom-run runs as
/// the world).
static int64_t getCommunicatorIndex(Value comm) {
  llvm::SmallVector<GroupStep> steps = getGroupSteps(comm);
  for (auto [index, known] : llvm::enumerate(world.communicators))
    if (known.size() == steps.size() &&
        llvm::all_of(llvm::zip(known, steps), [](auto pair) {
          return std::get<0>(pair).size == std::get<1>(pair).size &&
                 std::get<0>(pair).stride == std::get<1>(pair).stride;
        }))
      return int64_t(index);
  world.communicators.push_back(steps);
  return int64_t(world.communicators.size() - 1);
}

/// A send becomes a call at its start (it never blocks), a receive a call
/// at its wait (where it blocks until the message is there): a receive
/// started early must not block before the sender can get to its send.
static void lowerPointToPoint(ModuleOp module, CollectiveOpInterface start,
                              WaitOp wait, StringRef suffix) {
  OpBuilder builder(module.getContext());
  Type i64 = builder.getI64Type();
  RankedTensorType outType = start.getResultType();
  Type element = outType.getElementType();
  auto unranked = mlir::UnrankedMemRefType::get(element, 0);
  bool isSend = start.getKind() == CollectiveKind::Send;
  func::FuncOp callee = declare(
      module,
      (Twine(isSend ? "loom_sim_send" : "loom_sim_recv") + suffix).str(),
      builder.getFunctionType({unranked, i64, i64, i64}, {}));
  auto [peer, tag] = getPeerAndTag(start);
  int64_t communicator = getCommunicatorIndex(start.getComm());
  Operation *at = isSend ? start.getOperation() : wait.getOperation();
  builder.setInsertionPoint(at);
  Location loc = at->getLoc();
  auto constant = [&](int64_t v) -> Value {
    return arith::ConstantIntOp::create(builder, loc, i64, v);
  };
  Value buffer;
  if (isSend) {
    RankedTensorType inType = start.getInput().getType();
    auto toBuffer = bufferization::ToBufferOp::create(
        builder, loc, MemRefType::get(inType.getShape(), element),
        start.getInput());
    toBuffer.setReadOnly(true);
    buffer = toBuffer.getResult();
  } else {
    buffer = memref::AllocOp::create(
        builder, loc, MemRefType::get(outType.getShape(), element));
  }
  func::CallOp::create(
      builder, loc, callee,
      ValueRange{memref::CastOp::create(builder, loc, unranked, buffer),
                 constant(peer), constant(tag), constant(communicator)});
  builder.setInsertionPoint(wait);
  Value result;
  if (isSend) {
    result = memref::AllocOp::create(
        builder, wait.getLoc(), MemRefType::get(outType.getShape(), element));
    buffer = result;
  }
  auto toTensor =
      bufferization::ToTensorOp::create(builder, wait.getLoc(), outType, buffer);
  toTensor.setRestrict(true);
  toTensor.setWritable(true);
  wait.getResult().replaceAllUsesWith(toTensor.getResult());
  wait.erase();
  start->erase();
}

LogicalResult loom::run::lowerCollectivesToSimulation(ModuleOp module) {
  module.getContext()
      ->loadDialect<arith::ArithDialect, bufferization::BufferizationDialect,
                    func::FuncDialect, memref::MemRefDialect>();
  CollOpsToLower ops = collectCollOps(module);
  for (Operation *op : ops.releases)
    op->erase();
  OpBuilder builder(module.getContext());
  Type i64 = builder.getI64Type();
  for (Operation *op : ops.starts) {
    auto start = cast<CollectiveOpInterface>(op);
    auto wait = dyn_cast_or_null<WaitOp>(start.getWait());
    if (!wait)
      return op->emitOpError("has no wait to lower");
    RankedTensorType outType = start.getResultType();
    Type element = outType.getElementType();
    if (!element.isF32() && !element.isF64())
      return op->emitOpError("loom-run simulates collectives of f32 and f64 "
                             "only, got ")
             << element;
    StringRef suffix = element.isF32() ? "_f32" : "_f64";
    if (start.isPointToPoint()) {
      lowerPointToPoint(module, start, wait, suffix);
      continue;
    }
    RankedTensorType inType = start.getInput().getType();
    std::string name = ("loom_sim_collective" + suffix).str();
    auto unranked = mlir::UnrankedMemRefType::get(element, 0);
    func::FuncOp callee = declare(
        module, name,
        builder.getFunctionType({unranked, unranked, i64, i64, i64, i64}, {}));
    builder.setInsertionPoint(op);
    Location loc = op->getLoc();
    auto inMemType = MemRefType::get(inType.getShape(), element);
    auto outMemType = MemRefType::get(outType.getShape(), element);
    auto toBuffer = bufferization::ToBufferOp::create(builder, loc, inMemType,
                                                      start.getInput());
    toBuffer.setReadOnly(true);
    Value in = toBuffer.getResult();
    Value out = memref::AllocOp::create(builder, loc, outMemType);
    int64_t reduction = 0, axis = 0;
    if (std::optional<ReductionKind> kind = start.getReductionKind())
      reduction = int64_t(*kind);
    if (auto gather = dyn_cast<AllGatherStartOp>(op))
      axis = gather.getGatherAxis();
    else if (auto scatter = dyn_cast<ReduceScatterStartOp>(op))
      axis = scatter.getScatterAxis();
    else if (auto broadcast = dyn_cast<BroadcastStartOp>(op))
      axis = broadcast.getRoot();
    auto constant = [&](int64_t v) -> Value {
      return arith::ConstantIntOp::create(builder, loc, i64, v);
    };
    func::CallOp::create(
        builder, loc, callee,
        ValueRange{memref::CastOp::create(builder, loc, unranked, in),
                   memref::CastOp::create(builder, loc, unranked, out),
                   constant(int64_t(start.getKind())), constant(reduction),
                   constant(axis),
                   constant(getCommunicatorIndex(start.getComm()))});
    auto toTensor =
        bufferization::ToTensorOp::create(builder, loc, outType, out);
    toTensor.setRestrict(true);
    toTensor.setWritable(true);
    Value result = toTensor.getResult();
    wait.getResult().replaceAllUsesWith(result);
    wait.erase();
    op->erase();
  }
  return lowerRanksAndWorlds(module, ops, "loom_sim_rank");
}

//===- MemoryTimelineTest.cpp - live bytes on hand-built graphs -----------===//
//
// Each test builds a small function whose live bytes at every op are worked
// out by hand in the comments, and checks the timeline against them.
//
//===----------------------------------------------------------------------===//

#include "loom/Analysis/MemoryTimeline.h"
#include "loom/Dialect/Coll/CollOps.h"
#include "loom/Dialect/Train/TrainDialect.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Parser/Parser.h"
#include "gtest/gtest.h"

using namespace mlir;
using namespace loom;

namespace {

/// Graphs shared by the timeline tests and the tracker test.
constexpr const char *kChain = R"mlir(
    func.func @f(%a: tensor<100xf32> {train.param = "a"}) -> tensor<100xf32> {
      %e = tensor.empty() : tensor<100xf32>
      %x = linalg.exp ins(%a : tensor<100xf32>) outs(%e : tensor<100xf32>) -> tensor<100xf32>
      %y = linalg.exp ins(%x : tensor<100xf32>) outs(%e : tensor<100xf32>) -> tensor<100xf32>
      %z = linalg.add ins(%y, %a : tensor<100xf32>, tensor<100xf32>) outs(%x : tensor<100xf32>) -> tensor<100xf32>
      return %z : tensor<100xf32>
    })mlir";
constexpr const char *kGatherUnderCompute = R"mlir(
    func.func @f(%s: tensor<100xf32> {train.param = "w"}, %c: !coll.comm<4>) -> tensor<400xf32> {
      %e = tensor.empty() : tensor<100xf32>
      %f = coll.all_gather_start %s on %c gather_axis = 0 : (tensor<100xf32>, !coll.comm<4>) -> !coll.future<tensor<400xf32>>
      %x = linalg.exp ins(%s : tensor<100xf32>) outs(%e : tensor<100xf32>) -> tensor<100xf32>
      %y = linalg.exp ins(%x : tensor<100xf32>) outs(%e : tensor<100xf32>) -> tensor<100xf32>
      %w = coll.wait %f : !coll.future<tensor<400xf32>>
      return %w : tensor<400xf32>
    })mlir";
constexpr const char *kGatherUseRelease = R"mlir(
    func.func @f(%s: tensor<100xf32> {train.param = "w"}, %c: !coll.comm<4>) -> tensor<100xf32> {
      %f = coll.all_gather_start %s on %c gather_axis = 0 : (tensor<100xf32>, !coll.comm<4>) -> !coll.future<tensor<400xf32>>
      %w = coll.wait %f : !coll.future<tensor<400xf32>>
      %v = tensor.extract_slice %w[0] [100] [1] : tensor<400xf32> to tensor<100xf32>
      %e = tensor.empty() : tensor<100xf32>
      %x = linalg.exp ins(%v : tensor<100xf32>) outs(%e : tensor<100xf32>) -> tensor<100xf32>
      coll.release %w : tensor<400xf32>
      %y = linalg.exp ins(%x : tensor<100xf32>) outs(%e : tensor<100xf32>) -> tensor<100xf32>
      return %y : tensor<100xf32>
    })mlir";
constexpr const char *kReleasedScatterInput = R"mlir(
    func.func @f(%a: tensor<400xf32>, %c: !coll.comm<4>) -> tensor<100xf32> {
      %e = tensor.empty() : tensor<400xf32>
      %g = linalg.exp ins(%a : tensor<400xf32>) outs(%e : tensor<400xf32>) -> tensor<400xf32>
      %f = coll.reduce_scatter_start %g on %c scatter_axis = 0 reduction = <avg> : (tensor<400xf32>, !coll.comm<4>) -> !coll.future<tensor<100xf32>>
      coll.release %g : tensor<400xf32>
      %w = coll.wait %f : !coll.future<tensor<100xf32>>
      %t = linalg.exp ins(%a : tensor<400xf32>) outs(%e : tensor<400xf32>) -> tensor<400xf32>
      return %w : tensor<100xf32>
    })mlir";

class MemoryTimelineTest : public ::testing::Test {
protected:
  MemoryTimelineTest() {
    context
        .loadDialect<coll::CollDialect, train::TrainDialect, func::FuncDialect,
                     linalg::LinalgDialect, tensor::TensorDialect,
                     arith::ArithDialect, math::MathDialect>();
  }

  Block &parse(StringRef source) {
    module = parseSourceString<ModuleOp>(source, &context);
    EXPECT_TRUE(module) << source.str();
    return cast<func::FuncOp>(module->front()).getBody().front();
  }

  MLIRContext context;
  OwningOpRef<ModuleOp> module;
};

TEST_F(MemoryTimelineTest, ChainWritesInPlaceAndFreesAfterLastUse) {
  // 100 floats = 400 bytes each.
  Block &block = parse(kChain);
  MemoryTimeline timeline(block);
  // op 0 empty: a(400). op 1 x: a+x. op 2 y: a+x+y. op 3 z writes into x
  // (x dies there): a+x+y. op 4 return: a+z(=x's buffer); y is dead.
  EXPECT_EQ(timeline.getLiveBytes(),
            (ArrayRef<int64_t>{400, 800, 1200, 1200, 800}));
  EXPECT_EQ(timeline.getPeakBytes(), 1200);
  EXPECT_EQ(timeline.getPeakPosition(), 2u);
  const auto &breakdown = timeline.getPeakBreakdown();
  EXPECT_EQ(breakdown[unsigned(BufferKind::Parameter)], 400);
  EXPECT_EQ(breakdown[unsigned(BufferKind::Activation)], 800);
}

TEST_F(MemoryTimelineTest, ViewsShareTheirSource) {
  Block &block = parse(R"mlir(
    func.func @f(%a: tensor<100xf32>) -> tensor<10x10xf32> {
      %e = tensor.empty() : tensor<100xf32>
      %x = linalg.exp ins(%a : tensor<100xf32>) outs(%e : tensor<100xf32>) -> tensor<100xf32>
      %v = tensor.expand_shape %x [[0, 1]] output_shape [10, 10] : tensor<100xf32> into tensor<10x10xf32>
      return %v : tensor<10x10xf32>
    })mlir");
  MemoryTimeline timeline(block);
  // The view adds nothing, and keeps x alive to the return.
  EXPECT_EQ(timeline.getLiveBytes(), (ArrayRef<int64_t>{400, 800, 800, 800}));
}

TEST_F(MemoryTimelineTest, GatherBufferIsLiveFromItsStart) {
  // A gathered 4 x 100 floats (1600 bytes) from a 400-byte shard, with two
  // exps in flight between start and wait. At op 3, y = exp(x) holds its
  // input and output. Counting the gather from its wait would give 800 and
  // 1200 at ops 2 and 3.
  Block &block = parse(kGatherUnderCompute);
  MemoryTimeline timeline(block);
  EXPECT_EQ(timeline.getLiveBytes(),
            (ArrayRef<int64_t>{400, 2000, 2400, 2800, 2000, 2000}));
  // The gathered copy of a parameter counts as a parameter.
  EXPECT_EQ(timeline.getPeakBreakdown()[unsigned(BufferKind::Parameter)],
            400 + 1600);
}

TEST_F(MemoryTimelineTest, ReduceScatterInputLivesUntilItsWait) {
  // The 1600-byte gradient's last use is the start, but the collective reads
  // it until the wait; the 400-byte shard lives from the start.
  Block &block = parse(R"mlir(
    func.func @f(%a: tensor<400xf32>, %c: !coll.comm<4>) -> tensor<100xf32> {
      %e = tensor.empty() : tensor<400xf32>
      %g = linalg.exp ins(%a : tensor<400xf32>) outs(%e : tensor<400xf32>) -> tensor<400xf32>
      %f = coll.reduce_scatter_start %g on %c scatter_axis = 0 reduction = <avg> : (tensor<400xf32>, !coll.comm<4>) -> !coll.future<tensor<100xf32>>
      %t = linalg.exp ins(%a : tensor<400xf32>) outs(%e : tensor<400xf32>) -> tensor<400xf32>
      %w = coll.wait %f : !coll.future<tensor<100xf32>>
      return %w : tensor<100xf32>
    })mlir");
  MemoryTimeline timeline(block);
  // a = 1600 throughout; g 1600 from op 1 to the wait (op 4); shard 400
  // from op 2; t 1600 at op 3 only.
  EXPECT_EQ(timeline.getLiveBytes(),
            (ArrayRef<int64_t>{1600, 3200, 3600, 5200, 3600, 2000}));
  EXPECT_EQ(timeline.getPeakBreakdown()[unsigned(BufferKind::Gradient)], 1600);
  EXPECT_EQ(timeline.getPeakBreakdown()[unsigned(BufferKind::Communication)],
            400);
}

TEST_F(MemoryTimelineTest, UnusedCollectiveResultLivesUntilItsWait) {
  // Nothing reads the gathered buffer, but the collective writes into it
  // from its start to its wait.
  Block &block = parse(R"mlir(
    func.func @f(%s: tensor<100xf32>, %c: !coll.comm<4>, %a: tensor<100xf32>) {
      %f = coll.all_gather_start %s on %c gather_axis = 0 : (tensor<100xf32>, !coll.comm<4>) -> !coll.future<tensor<400xf32>>
      %e = tensor.empty() : tensor<100xf32>
      %x = linalg.exp ins(%a : tensor<100xf32>) outs(%e : tensor<100xf32>) -> tensor<100xf32>
      %w = coll.wait %f : !coll.future<tensor<400xf32>>
      return
    })mlir");
  MemoryTimeline timeline(block);
  EXPECT_EQ(timeline.getLiveBytes(),
            (ArrayRef<int64_t>{2400, 2400, 2800, 2400, 800}));
  MemoryTracker tracker(block);
  unsigned index = 0;
  for (Operation &op : block)
    EXPECT_EQ(tracker.place(&op), timeline.getLiveBytes(index++));
}

TEST_F(MemoryTimelineTest, ReleaseEndsTheGatheredBuffer) {
  Block &block = parse(kGatherUseRelease);
  MemoryTimeline timeline(block);
  // The gathered 1600 bytes are live from the start (op 0) to the release
  // (op 5); x lives from op 4 to op 6.
  EXPECT_EQ(timeline.getLiveBytes(),
            (ArrayRef<int64_t>{2000, 2000, 2000, 2000, 2400, 2400, 1200, 800}));
}

TEST_F(MemoryTimelineTest, ReleasedCollectiveInputIsFreedAtTheWait) {
  Block &block = parse(kReleasedScatterInput);
  MemoryTimeline timeline(block);
  // g lives to the wait (op 4), not just to the release (op 3).
  EXPECT_EQ(timeline.getLiveBytes(),
            (ArrayRef<int64_t>{1600, 3200, 3600, 3600, 3600, 3600, 2000}));
}

TEST_F(MemoryTimelineTest, AnyOrderCanBeAnalysed) {
  Block &block = parse(R"mlir(
    func.func @f(%a: tensor<100xf32>) -> (tensor<100xf32>, tensor<100xf32>) {
      %e = tensor.empty() : tensor<100xf32>
      %x = linalg.exp ins(%a : tensor<100xf32>) outs(%e : tensor<100xf32>) -> tensor<100xf32>
      %y = linalg.exp ins(%a : tensor<100xf32>) outs(%e : tensor<100xf32>) -> tensor<100xf32>
      return %x, %y : tensor<100xf32>, tensor<100xf32>
    })mlir");
  SmallVector<Operation *> ops;
  for (Operation &op : block)
    ops.push_back(&op);
  std::swap(ops[1], ops[2]);
  MemoryTimeline timeline(block, ops);
  // Both results are returned: the peak (a + y + x) is first reached at the
  // second exp, which is x's in this order.
  EXPECT_EQ(timeline.getLiveBytes(), (ArrayRef<int64_t>{400, 800, 1200, 1200}));
  EXPECT_EQ(timeline.getPeakOp(), ops[2]);
  EXPECT_EQ(timeline.getPeakBytes(), 1200);
}

} // namespace

namespace {

/// Places every op of each graph in order and checks the tracker against
/// the timeline at every op, and each placement against its predicted effect.
TEST_F(MemoryTimelineTest, TrackerAgreesWithTimelineOpByOp) {
  // The same four graphs; the reduce-scatter one here releases its input.
  const char *graphs[] = {kChain, kGatherUnderCompute, kReleasedScatterInput,
                          kGatherUseRelease};
  for (const char *source : graphs) {
    Block &block = parse(source);
    MemoryTimeline timeline(block);
    MemoryTracker tracker(block);
    unsigned index = 0;
    for (Operation &op : block) {
      int64_t before = tracker.getLiveBytes();
      MemoryTracker::Effect effect = tracker.getEffect(&op);
      int64_t during = tracker.place(&op);
      EXPECT_EQ(during, timeline.getLiveBytes(index))
          << "at op " << index << " (" << op.getName().getStringRef().str()
          << ") of\n"
          << source;
      EXPECT_EQ(during, before + effect.allocated);
      if (!op.hasTrait<OpTrait::IsTerminator>())
        EXPECT_EQ(tracker.getLiveBytes(), during - effect.freed)
            << "at op " << index << " of\n"
            << source;
      ++index;
    }
    EXPECT_EQ(tracker.getPeakBytes(), timeline.getPeakBytes());
  }
}

} // namespace

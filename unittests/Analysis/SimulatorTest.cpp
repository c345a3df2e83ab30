//===- SimulatorTest.cpp - simulated streams on hand-built graphs ---------===//
//
// Every op's time is pinned by a profile (microseconds by op id), so each
// expected figure below is exact arithmetic on the listed times.
//
//===----------------------------------------------------------------------===//

#include "loom/Analysis/Simulator.h"
#include "loom/Analysis/OpIds.h"
#include "loom/Dialect/Train/TrainDialect.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"
#include "gtest/gtest.h"

using namespace mlir;
using namespace loom;

namespace {

class SimulatorTest : public ::testing::Test {
protected:
  SimulatorTest() {
    context.loadDialect<coll::CollDialect, train::TrainDialect,
                        func::FuncDialect, linalg::LinalgDialect,
                        tensor::TensorDialect, arith::ArithDialect>();
  }

  /// Parses `source` and simulates it with the given per-op microseconds:
  /// op i is numbered i and measured micros[i].
  SimulationResult run(StringRef source, ArrayRef<double> micros,
                       ArrayRef<std::pair<unsigned, double>> calls = {},
                       double slowdown = 0) {
    module = parseSourceString<ModuleOp>(source, &context);
    EXPECT_TRUE(module) << source.str();
    Block &block = cast<func::FuncOp>(module->front()).getBody().front();
    Profile profile;
    for (auto [index, op] : llvm::enumerate(block)) {
      op.setLoc(withOpId(op.getLoc(), index));
      if (index < micros.size()) {
        if (isa<coll::CollectiveOpInterface>(op))
          profile.collectiveSeconds[index] = micros[index] * 1e-6;
        else
          profile.runSeconds[index] = micros[index] * 1e-6;
      }
    }
    // What the calls that start and wait for collectives cost the host.
    for (auto [index, us] : calls)
      profile.runSeconds[index] = us * 1e-6;
    llvm::Expected<DeviceDescription> device = DeviceDescription::load("cpu");
    EXPECT_TRUE(bool(device));
    device->computeSlowdown = slowdown;
    CostModel model(std::move(*device));
    EXPECT_FALSE(model.bindProfile(std::move(profile), *module));
    return simulate(block, model);
  }

  MLIRContext context;
  OwningOpRef<ModuleOp> module;
};

constexpr const char *kGatherUnderCompute = R"mlir(
  func.func @f(%s: tensor<100xf32>, %c: !coll.comm<4>, %a: tensor<100xf32>) -> tensor<400xf32> {
    %f = coll.all_gather_start %s on %c gather_axis = 0 : (tensor<100xf32>, !coll.comm<4>) -> !coll.future<tensor<400xf32>>
    %x = math.exp %a : tensor<100xf32>
    %y = math.exp %x : tensor<100xf32>
    %w = coll.wait %f : !coll.future<tensor<400xf32>>
    return %w : tensor<400xf32>
  })mlir";

TEST_F(SimulatorTest, GatherHiddenUnderCompute) {
  // gather 100 us; two exps of 60 us: the wait is reached at 120 us.
  SimulationResult r = run(kGatherUnderCompute, {100, 60, 60, 0, 0});
  EXPECT_DOUBLE_EQ(r.makespan, 120e-6);
  EXPECT_DOUBLE_EQ(r.computeTime, 120e-6);
  EXPECT_DOUBLE_EQ(r.getExposedTime(), 0);
  EXPECT_DOUBLE_EQ(r.getCommTime(), 100e-6);
  EXPECT_EQ(r.collectiveCount[unsigned(coll::CollectiveKind::AllGather)], 1u);
  // Bound: compute 120 us; the critical path is the exp chain (120 us).
  EXPECT_DOUBLE_EQ(r.lowerBound, 120e-6);
}

TEST_F(SimulatorTest, CollectiveCallsTakeComputeTime) {
  // The start's call takes 5 us, so the gather runs from 5 to 105 us; the
  // exps end at 125 us, and the wait's call takes 7 us more.
  SimulationResult r =
      run(kGatherUnderCompute, {100, 60, 60, 0, 0}, {{0, 5}, {3, 7}});
  EXPECT_DOUBLE_EQ(r.makespan, 132e-6);
  EXPECT_DOUBLE_EQ(r.computeTime, 132e-6);
  EXPECT_DOUBLE_EQ(r.getExposedTime(), 0);
  EXPECT_DOUBLE_EQ(r.getCommTime(), 100e-6);
}

TEST_F(SimulatorTest, ComputeSlowsWhileACollectiveIsInFlight) {
  // Compute at half speed (s = 1) while the 100 us gather is in flight:
  // the first exp does 50 us of its work in the gather's 100 us and the
  // other 10 alone (110 us); the second runs alone (60 us).
  SimulationResult r = run(kGatherUnderCompute, {100, 60, 60, 0, 0}, {}, 1.0);
  EXPECT_DOUBLE_EQ(r.makespan, 170e-6);
  // A 40 us gather: 20 us of the first exp's work in it, 40 alone.
  SimulationResult shorter =
      run(kGatherUnderCompute, {40, 60, 60, 0, 0}, {}, 1.0);
  EXPECT_DOUBLE_EQ(shorter.makespan, 140e-6);
  // Compute time and the bound count the ops alone.
  EXPECT_DOUBLE_EQ(shorter.computeTime, 120e-6);
  EXPECT_DOUBLE_EQ(shorter.lowerBound, 120e-6);
}

TEST_F(SimulatorTest, GatherLongerThanComputeIsExposed) {
  // gather 200 us against 120 us of compute: 80 us exposed at the wait.
  SimulationResult r = run(kGatherUnderCompute, {200, 60, 60, 0, 0});
  EXPECT_DOUBLE_EQ(r.makespan, 200e-6);
  unsigned gather = unsigned(coll::CollectiveKind::AllGather);
  EXPECT_DOUBLE_EQ(r.exposedTime[gather], 80e-6);
  EXPECT_EQ(r.exposedCount[gather], 1u);
  // Communication-bound: the bound is the 200 us gather.
  EXPECT_DOUBLE_EQ(r.lowerBound, 200e-6);
}

TEST_F(SimulatorTest, CommunicatorStreamIsInOrder) {
  // Two 100 us gathers on one communicator run back to back: the second
  // ends at 200 us although it was issued at 0; compute waits from 50 us.
  SimulationResult r = run(R"mlir(
    func.func @f(%s: tensor<100xf32>, %t: tensor<100xf32>, %c: !coll.comm<4>) -> (tensor<400xf32>, tensor<400xf32>) {
      %f1 = coll.all_gather_start %s on %c gather_axis = 0 : (tensor<100xf32>, !coll.comm<4>) -> !coll.future<tensor<400xf32>>
      %f2 = coll.all_gather_start %t on %c gather_axis = 0 : (tensor<100xf32>, !coll.comm<4>) -> !coll.future<tensor<400xf32>>
      %x = math.exp %s : tensor<100xf32>
      %w1 = coll.wait %f1 : !coll.future<tensor<400xf32>>
      %w2 = coll.wait %f2 : !coll.future<tensor<400xf32>>
      return %w1, %w2 : tensor<400xf32>, tensor<400xf32>
    })mlir",
                           {100, 100, 50, 0, 0, 0});
  EXPECT_DOUBLE_EQ(r.makespan, 200e-6);
  EXPECT_DOUBLE_EQ(r.getExposedTime(), 150e-6);
  EXPECT_EQ(r.exposedCount[unsigned(coll::CollectiveKind::AllGather)], 2u);
  EXPECT_DOUBLE_EQ(r.commTimePerCommunicator[0], 200e-6);
  // Both gathers could start at 0 without contention: the critical path is
  // 100 us; the communicator's 200 us is the bound.
  EXPECT_DOUBLE_EQ(r.criticalPath, 100e-6);
  EXPECT_DOUBLE_EQ(r.lowerBound, 200e-6);
}

TEST_F(SimulatorTest, SeparateCommunicatorsRunConcurrently) {
  SimulationResult r = run(R"mlir(
    func.func @f(%s: tensor<100xf32>, %c: !coll.comm<4>, %d: !coll.comm<4>) -> (tensor<400xf32>, tensor<400xf32>) {
      %f1 = coll.all_gather_start %s on %c gather_axis = 0 : (tensor<100xf32>, !coll.comm<4>) -> !coll.future<tensor<400xf32>>
      %f2 = coll.all_gather_start %s on %d gather_axis = 0 : (tensor<100xf32>, !coll.comm<4>) -> !coll.future<tensor<400xf32>>
      %w1 = coll.wait %f1 : !coll.future<tensor<400xf32>>
      %w2 = coll.wait %f2 : !coll.future<tensor<400xf32>>
      return %w1, %w2 : tensor<400xf32>, tensor<400xf32>
    })mlir",
                           {100, 100, 0, 0, 0});
  EXPECT_DOUBLE_EQ(r.makespan, 100e-6);
  ASSERT_EQ(r.commTimePerCommunicator.size(), 2u);
}

TEST_F(SimulatorTest, DependentComputeFollowsTheWait) {
  // exp(w) must wait for the gather: makespan = 100 + 30.
  SimulationResult r = run(R"mlir(
    func.func @f(%s: tensor<100xf32>, %c: !coll.comm<4>) -> tensor<400xf32> {
      %f = coll.all_gather_start %s on %c gather_axis = 0 : (tensor<100xf32>, !coll.comm<4>) -> !coll.future<tensor<400xf32>>
      %w = coll.wait %f : !coll.future<tensor<400xf32>>
      %y = math.exp %w : tensor<400xf32>
      return %y : tensor<400xf32>
    })mlir",
                           {100, 0, 30, 0});
  EXPECT_DOUBLE_EQ(r.makespan, 130e-6);
  EXPECT_DOUBLE_EQ(r.criticalPath, 130e-6);
  EXPECT_DOUBLE_EQ(r.lowerBound, 130e-6);
  EXPECT_GT(r.peakBytes, 0);
}

} // namespace

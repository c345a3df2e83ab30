//===- CollectiveOpInterfaceTest.cpp - CollectiveOpInterface from C++ -----===//
//
// Builds each collective from C++ and checks what the interface reports:
// kind, communicator size, buffer bytes, ring traffic and the wait it ends in.
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/Coll/CollOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "gtest/gtest.h"

using namespace mlir;
using namespace loom::coll;

namespace {

class CollectiveOpInterfaceTest : public ::testing::Test {
protected:
  CollectiveOpInterfaceTest() : builder(&context) {
    context.loadDialect<CollDialect, func::FuncDialect>();
    module = ModuleOp::create(builder.getUnknownLoc());
    builder.setInsertionPointToEnd(module->getBody());
  }

  /// Creates a function with a communicator of `ranks` ranks (dynamic when
  /// negative) and one tensor argument of `inputType`, and leaves the builder
  /// in its body.
  void startFunction(int64_t ranks, RankedTensorType inputType) {
    CommType commType =
        CommType::get(&context, ranks < 0 ? ShapedType::kDynamic : ranks);
    auto funcType = builder.getFunctionType({commType, inputType}, {});
    auto func =
        func::FuncOp::create(builder, builder.getUnknownLoc(), "f", funcType);
    Block *body = func.addEntryBlock();
    builder.setInsertionPointToStart(body);
    comm = cast<TypedValue<CommType>>(body->getArgument(0));
    input = cast<TypedValue<RankedTensorType>>(body->getArgument(1));
  }

  /// Waits for `start`'s future, returns from the function and verifies.
  CollectiveOpInterface finish(CollectiveOpInterface start) {
    WaitOp::create(builder, builder.getUnknownLoc(), start.getFuture());
    func::ReturnOp::create(builder, builder.getUnknownLoc());
    EXPECT_TRUE(succeeded(verify(*module)));
    return start;
  }

  RankedTensorType tensor(ArrayRef<int64_t> shape, Type elementType) {
    return RankedTensorType::get(shape, elementType);
  }
  FutureType future(RankedTensorType type) { return FutureType::get(type); }

  MLIRContext context;
  OpBuilder builder;
  OwningOpRef<ModuleOp> module;
  TypedValue<CommType> comm;
  TypedValue<RankedTensorType> input;
};

TEST_F(CollectiveOpInterfaceTest, AllGatherMovesEveryOtherShard) {
  auto shard = tensor({256, 64}, builder.getF32Type());
  startFunction(4, shard);
  CollectiveOpInterface op = finish(AllGatherStartOp::create(
      builder, builder.getUnknownLoc(),
      future(tensor({1024, 64}, builder.getF32Type())), input, comm,
      /*gather_axis=*/0));
  EXPECT_EQ(op.getKind(), CollectiveKind::AllGather);
  EXPECT_EQ(op.getNumRanks(), 4);
  EXPECT_EQ(op.getInputBytes(), 256 * 64 * 4);
  EXPECT_EQ(op.getResultBytes(), 1024 * 64 * 4);
  EXPECT_EQ(op.getReductionKind(), std::nullopt);
  std::optional<CollectiveTraffic> traffic = op.getTraffic();
  ASSERT_TRUE(traffic.has_value());
  EXPECT_EQ(traffic->sentBytes, 3 * 256 * 64 * 4);
  EXPECT_EQ(traffic->receivedBytes, 3 * 256 * 64 * 4);
  EXPECT_EQ(traffic->steps, 3);
  ASSERT_NE(op.getWait(), nullptr);
  EXPECT_EQ(cast<WaitOp>(op.getWait()).getStart(), op);
}

TEST_F(CollectiveOpInterfaceTest, ReduceScatterMovesAllButOneBlock) {
  auto grad = tensor({4096}, builder.getBF16Type());
  startFunction(8, grad);
  CollectiveOpInterface op = finish(ReduceScatterStartOp::create(
      builder, builder.getUnknownLoc(),
      future(tensor({512}, builder.getBF16Type())), input, comm,
      /*scatter_axis=*/0, ReductionKind::Avg));
  EXPECT_EQ(op.getKind(), CollectiveKind::ReduceScatter);
  EXPECT_EQ(op.getReductionKind(), ReductionKind::Avg);
  EXPECT_EQ(op.getInputBytes(), 4096 * 2);
  EXPECT_EQ(op.getResultBytes(), 512 * 2);
  std::optional<CollectiveTraffic> traffic = op.getTraffic();
  ASSERT_TRUE(traffic.has_value());
  EXPECT_EQ(traffic->sentBytes, 7 * 512 * 2);
  EXPECT_EQ(traffic->receivedBytes, 7 * 512 * 2);
  EXPECT_EQ(traffic->steps, 7);
}

TEST_F(CollectiveOpInterfaceTest, AllReduceMovesTwiceTheRingVolume) {
  auto grad = tensor({1000}, builder.getF32Type());
  startFunction(4, grad);
  CollectiveOpInterface op = finish(
      AllReduceStartOp::create(builder, builder.getUnknownLoc(), future(grad),
                               input, comm, ReductionKind::Max));
  EXPECT_EQ(op.getKind(), CollectiveKind::AllReduce);
  EXPECT_EQ(op.getReductionKind(), ReductionKind::Max);
  std::optional<CollectiveTraffic> traffic = op.getTraffic();
  ASSERT_TRUE(traffic.has_value());
  // 2 (n-1)/n of 4000 bytes with n = 4.
  EXPECT_EQ(traffic->sentBytes, 6000);
  EXPECT_EQ(traffic->receivedBytes, 6000);
  EXPECT_EQ(traffic->steps, 6);
}

TEST_F(CollectiveOpInterfaceTest, BroadcastForwardsTheWholeBuffer) {
  auto params = tensor({3, 5}, builder.getF16Type());
  startFunction(16, params);
  CollectiveOpInterface op = finish(BroadcastStartOp::create(
      builder, builder.getUnknownLoc(), future(params), input, comm,
      /*root=*/3));
  EXPECT_EQ(op.getKind(), CollectiveKind::Broadcast);
  std::optional<CollectiveTraffic> traffic = op.getTraffic();
  ASSERT_TRUE(traffic.has_value());
  EXPECT_EQ(traffic->sentBytes, 30);
  EXPECT_EQ(traffic->receivedBytes, 30);
  EXPECT_EQ(traffic->steps, 15);
}

TEST_F(CollectiveOpInterfaceTest, OneRankMovesNothing) {
  auto grad = tensor({64}, builder.getF32Type());
  startFunction(1, grad);
  CollectiveOpInterface op = finish(
      AllReduceStartOp::create(builder, builder.getUnknownLoc(), future(grad),
                               input, comm, ReductionKind::Sum));
  std::optional<CollectiveTraffic> traffic = op.getTraffic();
  ASSERT_TRUE(traffic.has_value());
  EXPECT_EQ(traffic->sentBytes, 0);
  EXPECT_EQ(traffic->receivedBytes, 0);
  EXPECT_EQ(traffic->steps, 0);
}

TEST_F(CollectiveOpInterfaceTest, DynamicSizesHaveNoTraffic) {
  auto shard = tensor({ShapedType::kDynamic, 8}, builder.getF32Type());
  startFunction(4, shard);
  CollectiveOpInterface op = finish(AllGatherStartOp::create(
      builder, builder.getUnknownLoc(),
      future(tensor({ShapedType::kDynamic, 8}, builder.getF32Type())), input,
      comm, /*gather_axis=*/0));
  EXPECT_EQ(op.getInputBytes(), std::nullopt);
  EXPECT_EQ(op.getTraffic(), std::nullopt);
}

TEST_F(CollectiveOpInterfaceTest, DynamicCommunicatorHasNoRankCount) {
  auto grad = tensor({64}, builder.getF32Type());
  startFunction(-1, grad);
  CollectiveOpInterface op = finish(
      AllReduceStartOp::create(builder, builder.getUnknownLoc(), future(grad),
                               input, comm, ReductionKind::Sum));
  EXPECT_EQ(op.getNumRanks(), std::nullopt);
  EXPECT_EQ(op.getInputBytes(), 256);
  EXPECT_EQ(op.getTraffic(), std::nullopt);
}

TEST_F(CollectiveOpInterfaceTest, SubByteElementsRoundUp) {
  EXPECT_EQ(getStaticSizeInBytes(tensor({3}, builder.getI1Type())), 1);
  EXPECT_EQ(getStaticSizeInBytes(tensor({17}, builder.getIntegerType(4))), 9);
  EXPECT_EQ(getStaticSizeInBytes(tensor({0, 4}, builder.getF32Type())), 0);
  EXPECT_EQ(
      getStaticSizeInBytes(tensor({2}, ComplexType::get(builder.getF32Type()))),
      std::nullopt);
}

TEST_F(CollectiveOpInterfaceTest, VerifierRejectsAGatherOfTheWrongSize) {
  auto shard = tensor({256}, builder.getF32Type());
  startFunction(4, shard);
  AllGatherStartOp op = AllGatherStartOp::create(
      builder, builder.getUnknownLoc(),
      future(tensor({1000}, builder.getF32Type())), input, comm,
      /*gather_axis=*/0);
  WaitOp::create(builder, builder.getUnknownLoc(), op.getFuture());
  func::ReturnOp::create(builder, builder.getUnknownLoc());
  std::string message;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
    message = diag.str();
    return success();
  });
  EXPECT_TRUE(failed(verify(*module)));
  EXPECT_NE(message.find("to be 1024"), std::string::npos) << message;
}

/// Every op kind must appear in the interface: parse one of each and count.
TEST_F(CollectiveOpInterfaceTest, EveryStartOpImplementsTheInterface) {
  const char *source = R"mlir(
    func.func @all(%c: !coll.comm<2>, %x: tensor<4xf32>) {
      %f0 = coll.all_gather_start %x on %c gather_axis = 0 : (tensor<4xf32>, !coll.comm<2>) -> !coll.future<tensor<8xf32>>
      %f1 = coll.reduce_scatter_start %x on %c scatter_axis = 0 reduction = <sum> : (tensor<4xf32>, !coll.comm<2>) -> !coll.future<tensor<2xf32>>
      %f2 = coll.all_reduce_start %x on %c reduction = <avg> : (tensor<4xf32>, !coll.comm<2>) -> !coll.future<tensor<4xf32>>
      %f3 = coll.broadcast_start %x on %c root = 1 : (tensor<4xf32>, !coll.comm<2>) -> !coll.future<tensor<4xf32>>
      %0 = coll.wait %f0 : !coll.future<tensor<8xf32>>
      %1 = coll.wait %f1 : !coll.future<tensor<2xf32>>
      %2 = coll.wait %f2 : !coll.future<tensor<4xf32>>
      %3 = coll.wait %f3 : !coll.future<tensor<4xf32>>
      return
    })mlir";
  OwningOpRef<ModuleOp> parsed = parseSourceString<ModuleOp>(source, &context);
  ASSERT_TRUE(parsed);
  SmallVector<CollectiveKind> kinds;
  parsed->walk(
      [&](CollectiveOpInterface op) { kinds.push_back(op.getKind()); });
  EXPECT_EQ(kinds, (SmallVector<CollectiveKind>{
                       CollectiveKind::AllGather, CollectiveKind::ReduceScatter,
                       CollectiveKind::AllReduce, CollectiveKind::Broadcast}));
}

} // namespace

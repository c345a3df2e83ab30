//===- CostModelTest.cpp - device descriptions and time estimates ---------===//
//
// Each expected time below is worked out by hand from the device file's
// figures, so a change to a formula (or to a device file) shows up here.
//
//===----------------------------------------------------------------------===//

#include "loom/Analysis/CostModel.h"
#include "loom/Dialect/Coll/CollOps.h"
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

class CostModelTest : public ::testing::Test {
protected:
  CostModelTest() {
    context.loadDialect<coll::CollDialect, train::TrainDialect,
                        func::FuncDialect, linalg::LinalgDialect,
                        tensor::TensorDialect, arith::ArithDialect>();
  }

  /// Parses `body` as the body of `func.func @f(args)` and returns its ops.
  SmallVector<Operation *> parse(StringRef args, StringRef body) {
    std::string source =
        ("func.func @f(" + args + ") {\n" + body + "\n  return\n}").str();
    module = parseSourceString<ModuleOp>(source, &context);
    EXPECT_TRUE(module) << source;
    SmallVector<Operation *> ops;
    if (module)
      for (Operation &op :
           cast<func::FuncOp>(module->front()).getBody().front())
        ops.push_back(&op);
    return ops;
  }

  CostModel load(StringRef name) {
    llvm::Expected<DeviceDescription> device = DeviceDescription::load(name);
    if (!device) {
      ADD_FAILURE() << toString(device.takeError());
      return CostModel(DeviceDescription());
    }
    return CostModel(std::move(*device));
  }

  MLIRContext context;
  OwningOpRef<ModuleOp> module;
};

TEST_F(CostModelTest, LoadsEveryShippedDevice) {
  for (StringRef name : {"h100-nvlink", "h100-ib", "h200-nvlink", "cpu"}) {
    llvm::Expected<DeviceDescription> device = DeviceDescription::load(name);
    ASSERT_TRUE(bool(device)) << toString(device.takeError());
    EXPECT_EQ(device->name, name);
    EXPECT_FALSE(device->links.back().maxRanks.has_value());
  }
}

TEST_F(CostModelTest, MatmulIsComputeBound) {
  SmallVector<Operation *> ops =
      parse("%a: tensor<4096x4096xbf16>, %b: tensor<4096x4096xbf16>, "
            "%c: tensor<4096x4096xbf16>",
            "%m = linalg.matmul ins(%a, %b : tensor<4096x4096xbf16>, "
            "tensor<4096x4096xbf16>) outs(%c : tensor<4096x4096xbf16>) -> "
            "tensor<4096x4096xbf16>");
  CostModel model = load("h100-nvlink");
  OpWork work = CostModel::getWork(ops[0]);
  // One multiply and one add per point of the 4096^3 iteration domain.
  EXPECT_DOUBLE_EQ(work.flops, 2.0 * 4096 * 4096 * 4096);
  EXPECT_DOUBLE_EQ(work.bytes, 4.0 * 4096 * 4096 * 2);
  double expected = work.flops / (989e12 * 0.70);
  EXPECT_NEAR(model.getComputeTime(ops[0]), expected, expected * 1e-12);
}

TEST_F(CostModelTest, CastsAreNotFlops) {
  // bf16 inputs accumulated in f32: the body extends both operands.
  SmallVector<Operation *> ops =
      parse("%a: tensor<8x16xbf16>, %b: tensor<16x4xbf16>, %c: tensor<8x4xf32>",
            "%m = linalg.matmul ins(%a, %b : tensor<8x16xbf16>, "
            "tensor<16x4xbf16>) outs(%c : tensor<8x4xf32>) -> tensor<8x4xf32>");
  EXPECT_DOUBLE_EQ(CostModel::getWork(ops[0]).flops, 2.0 * 8 * 16 * 4);
}

TEST_F(CostModelTest, ElementwiseIsMemoryBound) {
  SmallVector<Operation *> ops =
      parse("%a: tensor<1048576xf32>, %b: tensor<1048576xf32>",
            "%e = tensor.empty() : tensor<1048576xf32>\n"
            "%s = linalg.add ins(%a, %b : tensor<1048576xf32>, "
            "tensor<1048576xf32>) outs(%e : tensor<1048576xf32>) -> "
            "tensor<1048576xf32>");
  CostModel model = load("h100-nvlink");
  EXPECT_EQ(model.getComputeTime(ops[0]), 0.0) << "tensor.empty is free";
  // Reads a, b and the init, writes the result: 4 x 4 MiB.
  double bytes = 4.0 * 1048576 * 4;
  EXPECT_DOUBLE_EQ(CostModel::getWork(ops[1]).bytes, bytes);
  EXPECT_DOUBLE_EQ(CostModel::getWork(ops[1]).flops, 1048576.0);
  EXPECT_DOUBLE_EQ(model.getComputeTime(ops[1]), bytes / (3.35e12 * 0.80));
}

TEST_F(CostModelTest, CollectivesUseTheLinkOfTheirScope) {
  SmallVector<Operation *> ops =
      parse("%x: tensor<1048576xbf16>",
            "%c8 = coll.comm_world : !coll.comm<8>\n"
            "%c64 = coll.comm_world : !coll.comm<64>\n"
            "%f8 = coll.all_gather_start %x on %c8 gather_axis = 0 : "
            "(tensor<1048576xbf16>, !coll.comm<8>) -> "
            "!coll.future<tensor<8388608xbf16>>\n"
            "%f64 = coll.reduce_scatter_start %x on %c64 scatter_axis = 0 "
            "reduction = <avg> : (tensor<1048576xbf16>, !coll.comm<64>) -> "
            "!coll.future<tensor<16384xbf16>>\n"
            "%w8 = coll.wait %f8 : !coll.future<tensor<8388608xbf16>>\n"
            "%w64 = coll.wait %f64 : !coll.future<tensor<16384xbf16>>");
  CostModel model = load("h100-nvlink");
  // 8 ranks stay on NVLink: 7 steps, each rank sends 7 shards of 2 MiB.
  double shard = 1048576.0 * 2;
  EXPECT_DOUBLE_EQ(model.getCollectiveTime(ops[2]),
                   7 * 6e-6 + 7 * shard / 360e9);
  // 64 ranks cross nodes: 63 steps over InfiniBand, blocks of 2 MiB / 64.
  EXPECT_DOUBLE_EQ(model.getCollectiveTime(ops[3]),
                   63 * 12e-6 + 63 * (shard / 64) / 45e9);
  // The same 8-rank gather entirely over InfiniBand is slower.
  EXPECT_GT(load("h100-ib").getCollectiveTime(ops[2]),
            model.getCollectiveTime(ops[2]));
}

TEST_F(CostModelTest, OneRankCollectivesAreFree) {
  SmallVector<Operation *> ops =
      parse("%x: tensor<64xf32>, %c: !coll.comm<1>",
            "%f = coll.all_reduce_start %x on %c reduction = <sum> : "
            "(tensor<64xf32>, !coll.comm<1>) -> !coll.future<tensor<64xf32>>\n"
            "%w = coll.wait %f : !coll.future<tensor<64xf32>>");
  EXPECT_EQ(load("h100-nvlink").getCollectiveTime(ops[0]), 0.0);
}

TEST_F(CostModelTest, ProfileOverridesEstimates) {
  SmallVector<Operation *> ops =
      parse("%a: tensor<64xf32>",
            "%e = tensor.empty() : tensor<64xf32>\n"
            "%s = linalg.exp ins(%a : tensor<64xf32>) outs(%e : "
            "tensor<64xf32>) -> tensor<64xf32>");
  EXPECT_EQ(CostModel::getOpId(ops[1]), "f:1");
  SmallString<128> path;
  ASSERT_FALSE(llvm::sys::fs::createTemporaryFile("profile", "json", path));
  {
    std::error_code ec;
    llvm::raw_fd_ostream out(path, ec);
    out << R"({"ops": {"f:1": 250.0}})";
  }
  CostModel model = load("cpu");
  double estimate = model.getComputeTime(ops[1]);
  ASSERT_FALSE(model.loadProfile(path));
  EXPECT_DOUBLE_EQ(model.getComputeTime(ops[1]), 250e-6);
  EXPECT_NE(estimate, 250e-6);
  llvm::sys::fs::remove(path);
}

TEST_F(CostModelTest, BadDescriptionsNameTheField) {
  auto error = [](StringRef json) {
    llvm::Expected<DeviceDescription> device =
        DeviceDescription::parse(json, "test.json");
    return device ? std::string("no error") : toString(device.takeError());
  };
  EXPECT_NE(error("{").find("invalid JSON"), std::string::npos);
  EXPECT_NE(error(R"({"name": "x"})").find("peak_flops"), std::string::npos);
  EXPECT_NE(
      error(
          R"({"name": "x", "peak_flops": {"f32": 1}, "memory_bandwidth": -1, "memory_bytes": 1, "links": []})")
          .find("'memory_bandwidth' to be positive"),
      std::string::npos);
  EXPECT_NE(
      error(
          R"({"name": "x", "peak_flops": {"f32": 1}, "memory_bandwidth": 1, "memory_bytes": 1,
                      "links": [{"scope": "node", "max_ranks": 8, "bandwidth": 1, "latency": 0}]})")
          .find("last link"),
      std::string::npos);
  llvm::Expected<DeviceDescription> missing =
      DeviceDescription::load("no-such-device");
  ASSERT_FALSE(bool(missing));
  EXPECT_NE(toString(missing.takeError()).find("no device description found"),
            std::string::npos);
}

} // namespace

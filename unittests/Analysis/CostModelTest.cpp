//===- CostModelTest.cpp - device descriptions and time estimates ---------===//
//
// Each expected time below is worked out by hand from the device file's
// figures, so a change to a formula (or to a device file) shows up here.
//
//===----------------------------------------------------------------------===//

#include "loom/Analysis/CostModel.h"
#include "loom/Analysis/OpIds.h"
#include "loom/Dialect/Coll/CollOps.h"
#include "loom/Dialect/Train/TrainDialect.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/raw_ostream.h"
#include "gtest/gtest.h"

using namespace mlir;
using namespace loom;

namespace {

class CostModelTest : public ::testing::Test {
protected:
  CostModelTest() {
    context
        .loadDialect<coll::CollDialect, train::TrainDialect, func::FuncDialect,
                     linalg::LinalgDialect, tensor::TensorDialect,
                     arith::ArithDialect, math::MathDialect>();
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

TEST_F(CostModelTest, TargetAttributeHoldsTheDescriptionExactly) {
  // Every shipped device survives the trip through #train.target, and the
  // cost model read from the module's attribute gives the file's times.
  for (StringRef name : {"h100-nvlink", "h100-ib", "h200-nvlink", "cpu"}) {
    llvm::Expected<DeviceDescription> device = DeviceDescription::load(name);
    ASSERT_TRUE(bool(device)) << toString(device.takeError());
    DeviceDescription back =
        DeviceDescription::fromAttr(device->toAttr(&context));
    EXPECT_EQ(back.name, device->name);
    EXPECT_EQ(back.memoryBandwidth, device->memoryBandwidth);
    EXPECT_EQ(back.memoryBytes, device->memoryBytes);
    EXPECT_EQ(back.computeEfficiency, device->computeEfficiency);
    EXPECT_EQ(back.memoryEfficiency, device->memoryEfficiency);
    EXPECT_EQ(back.computeSlowdown, device->computeSlowdown);
    ASSERT_EQ(back.peakFlops.size(), device->peakFlops.size());
    for (const auto &entry : device->peakFlops)
      EXPECT_EQ(back.peakFlops.lookup(entry.getKey()), entry.getValue());
    ASSERT_EQ(back.links.size(), device->links.size());
    for (auto [got, want] : llvm::zip(back.links, device->links)) {
      EXPECT_EQ(got.scope, want.scope);
      EXPECT_EQ(got.maxRanks, want.maxRanks);
      EXPECT_EQ(got.bandwidth, want.bandwidth);
      EXPECT_EQ(got.latency, want.latency);
    }
  }
  SmallVector<Operation *> ops =
      parse("%a: tensor<64xf32>",
            "%e = tensor.empty() : tensor<64xf32>\n"
            "%s = linalg.exp ins(%a : tensor<64xf32>) outs(%e : "
            "tensor<64xf32>) -> tensor<64xf32>");
  ops[1]->setLoc(withOpId(ops[1]->getLoc(), 3));
  func::FuncOp func = cast<func::FuncOp>(module->front());
  // No target: the passes' model is an error that names loom-set-target.
  std::string message;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diagnostic) {
    message = diagnostic.str();
    return success();
  });
  EXPECT_FALSE(getCostModel(func, "test-pass").has_value());
  EXPECT_NE(message.find("test-pass: the module has no target"),
            std::string::npos)
      << message;
  Profile profile;
  profile.source = "p.json";
  profile.runSeconds[3] = 250e-6;
  profile.runSeconds[1] = 1e-6;
  profile.fusedInto[4] = 3;
  profile.collectiveSeconds[9] = 5e-5;
  profile.stepSeconds = 1e-3;
  (*module)->setAttr(
      train::TrainDialect::kTargetAttrName,
      load("cpu").getDevice().toAttr(&context, profile.toAttr(&context)));
  Profile back = Profile::fromAttr(train::getTarget(func).getProfile());
  EXPECT_EQ(back.source, "p.json");
  EXPECT_EQ(back.runSeconds, profile.runSeconds);
  EXPECT_EQ(back.fusedInto, profile.fusedInto);
  EXPECT_EQ(back.collectiveSeconds, profile.collectiveSeconds);
  EXPECT_EQ(back.stepSeconds, 1e-3);
  // Module anchors bind the profile; functions without collectives do not.
  std::optional<CostModel> model = getCostModel(*module, "test-pass");
  ASSERT_TRUE(model.has_value()) << message;
  EXPECT_EQ(model->getDevice().name, "cpu");
  EXPECT_DOUBLE_EQ(model->getComputeTime(ops[1]), 250e-6);
  std::optional<CostModel> unbound =
      getCostModel(*module, "test-pass", /*bindProfile=*/false);
  ASSERT_TRUE(unbound.has_value());
  EXPECT_EQ(unbound->getProfile(), nullptr);
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

TEST_F(CostModelTest, FusedLossCountsItsProjection) {
  // 128 tokens of 64 against a 256-entry vocabulary: the logits' GEMM
  // (2 x 128 x 64 x 256) and the loss on them (5 x 128 x 256); the
  // gradient recomputes the logits and adds two GEMMs.
  SmallVector<Operation *> ops =
      parse("%h: tensor<128x64xf32>, %w: tensor<256x64xf32>, "
            "%l: tensor<128xi32>, %d: tensor<f32>, %s: tensor<128xf32>",
            "%loss, %lse = train.linear_cross_entropy %h, %w, %l "
            "ignore_index = -100 reduction = <mean> label_smoothing = 0.0 "
            "z_loss = 0.0 softcap = 0.0 chunk_tokens = 64 : "
            "tensor<128x64xf32>, tensor<256x64xf32>, tensor<128xi32> -> "
            "tensor<f32>, tensor<128xf32>");
  ASSERT_FALSE(ops.empty());
  double projection = 2.0 * 128 * 64 * 256, loss = 5.0 * 128 * 256;
  EXPECT_DOUBLE_EQ(CostModel::getWork(ops[0]).flops, projection + loss);
}

TEST_F(CostModelTest, FusedAttentionCountsTheAttention) {
  // train-fuse-attention's kernels (batch 2, seq 128, 4 heads, 2 kv heads,
  // head dim 16, causal) do the work of train.attention and its gradient:
  // q k^T and p v (4 x b h s s d, halved by the mask), and the backward's
  // 2.5x that; a call whose causal flag is 0 counts the whole square.
  SmallVector<Operation *> ops = parse(
      "%q: tensor<2x128x4x16xf32>, %k: tensor<2x128x2x16xf32>, "
      "%o: tensor<2x128x4x16xf32>, %l: tensor<2x4x128xf32>, "
      "%dk: tensor<2x128x2x16xf32>",
      "%b = arith.constant 2 : i64\n"
      "%s = arith.constant 128 : i64\n"
      "%h = arith.constant 4 : i64\n"
      "%g = arith.constant 2 : i64\n"
      "%d = arith.constant 16 : i64\n"
      "%c = arith.constant 1 : i32\n"
      "%n = arith.constant 0 : i32\n"
      "%x = arith.constant 0.25 : f32\n"
      "%a = train.attention %q, %k, %k causal scale = 0.25 : "
      "tensor<2x128x4x16xf32>, tensor<2x128x2x16xf32>\n"
      "%f:2 = train.call_kernel @loomrt_attention_f32(%b, %s, %h, %g, %d, "
      "%c, %x : i64, i64, i64, i64, i64, i32, f32) ins(%q, %k, %k : "
      "tensor<2x128x4x16xf32>, tensor<2x128x2x16xf32>, "
      "tensor<2x128x2x16xf32>) outs(%o, %l : tensor<2x128x4x16xf32>, "
      "tensor<2x4x128xf32>) -> tensor<2x128x4x16xf32>, tensor<2x4x128xf32>\n"
      "%r:2 = train.call_kernel @loomrt_attention_f32(%b, %s, %h, %g, %d, "
      "%n, %x : i64, i64, i64, i64, i64, i32, f32) ins(%q, %k, %k : "
      "tensor<2x128x4x16xf32>, tensor<2x128x2x16xf32>, "
      "tensor<2x128x2x16xf32>) outs(%o, %l : tensor<2x128x4x16xf32>, "
      "tensor<2x4x128xf32>) -> tensor<2x128x4x16xf32>, tensor<2x4x128xf32>\n"
      "%w:4 = train.call_kernel @loomrt_attention_grad_f32(%b, %s, %h, %g, "
      "%d, %c, %x : i64, i64, i64, i64, i64, i32, f32) ins(%q, %k, %k, %o, "
      "%l, %o : tensor<2x128x4x16xf32>, tensor<2x128x2x16xf32>, "
      "tensor<2x128x2x16xf32>, tensor<2x128x4x16xf32>, tensor<2x4x128xf32>, "
      "tensor<2x128x4x16xf32>) outs(%o, %dk, %dk, %l : "
      "tensor<2x128x4x16xf32>, tensor<2x128x2x16xf32>, "
      "tensor<2x128x2x16xf32>, tensor<2x4x128xf32>) -> "
      "tensor<2x128x4x16xf32>, tensor<2x128x2x16xf32>, "
      "tensor<2x128x2x16xf32>, tensor<2x4x128xf32>");
  ASSERT_EQ(ops.size(), 13u); // 8 constants, 4 ops, the return
  double square = 4.0 * 2 * 4 * 128 * 128 * 16;
  EXPECT_DOUBLE_EQ(CostModel::getWork(ops[8]).flops, square / 2);
  EXPECT_DOUBLE_EQ(CostModel::getWork(ops[9]).flops, square / 2);
  EXPECT_DOUBLE_EQ(CostModel::getWork(ops[10]).flops, square);
  EXPECT_DOUBLE_EQ(CostModel::getWork(ops[11]).flops, 2.5 * square / 2);
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

/// The error reading `json` as a profile and binding it to `root` gives, or
/// "no error".
std::string bindError(CostModel &model, StringRef json, Operation *root) {
  llvm::Expected<Profile> profile = Profile::parse(json, "profile.json");
  if (!profile)
    return toString(profile.takeError());
  llvm::Error error = model.bindProfile(std::move(*profile), root);
  return error ? toString(std::move(error)) : "no error";
}

TEST_F(CostModelTest, ProfileOverridesEstimatesById) {
  SmallVector<Operation *> ops =
      parse("%a: tensor<64xf32>",
            "%e = tensor.empty() : tensor<64xf32>\n"
            "%s = linalg.exp ins(%a : tensor<64xf32>) outs(%e : "
            "tensor<64xf32>) -> tensor<64xf32>");
  ops[1]->setLoc(withOpId(ops[1]->getLoc(), 7));
  EXPECT_EQ(getOpId(ops[1]), 7);
  EXPECT_EQ(getOpId(ops[0]), std::nullopt);
  CostModel model = load("cpu");
  double estimate = model.getComputeTime(ops[1]);
  EXPECT_EQ(bindError(model, R"({"ops": {"7": 250.0}})", *module), "no error");
  EXPECT_DOUBLE_EQ(model.getComputeTime(ops[1]), 250e-6);
  EXPECT_DOUBLE_EQ(model.getEstimatedComputeTime(ops[1]), estimate);
  EXPECT_NE(estimate, 250e-6);
  EXPECT_EQ(model.getNumProfiledOps(), 1u);
  // The id survives a move: the order does not key the profile.
  ops[1]->moveBefore(ops[0]);
  EXPECT_DOUBLE_EQ(model.getComputeTime(ops[1]), 250e-6);
  // Restamping replaces the id rather than nesting a second one.
  ops[1]->setLoc(withOpId(ops[1]->getLoc(), 9));
  EXPECT_EQ(getOpIds(ops[1]->getLoc()), SmallVector<int64_t>{9});
}

TEST_F(CostModelTest, FusedRunIsSharedByEstimate) {
  // Two exps timed as one run (fused): 300 us split by their estimates,
  // 1:4 (64 and 256 elements, both memory-bound).
  SmallVector<Operation *> ops =
      parse("%a: tensor<64xf32>, %b: tensor<256xf32>",
            "%x = math.exp %a : tensor<64xf32>\n"
            "%y = math.exp %b : tensor<256xf32>");
  ops[0]->setLoc(withOpId(ops[0]->getLoc(), 1));
  ops[1]->setLoc(withOpId(ops[1]->getLoc(), 2));
  CostModel model = load("cpu");
  double x = model.getEstimatedComputeTime(ops[0]);
  double y = model.getEstimatedComputeTime(ops[1]);
  ASSERT_GT(x, 0);
  EXPECT_EQ(
      bindError(model, R"({"ops": {"1": 300}, "fused": {"2": 1}})", *module),
      "no error");
  EXPECT_DOUBLE_EQ(model.getComputeTime(ops[0]), 300e-6 * x / (x + y));
  EXPECT_DOUBLE_EQ(model.getComputeTime(ops[1]), 300e-6 * y / (x + y));
  // An op whose location holds both ids (fused in the IR) costs the sum.
  ops[0]->setLoc(FusedLoc::get(&context, {ops[0]->getLoc(), ops[1]->getLoc()}));
  EXPECT_EQ(getOpIds(ops[0]->getLoc()), (SmallVector<int64_t>{1, 2}));
  EXPECT_DOUBLE_EQ(model.getComputeTime(ops[0]), 300e-6);
}

TEST_F(CostModelTest, CollectiveCallsAreHostTime) {
  // A start's own run is its call's cost to the host; its "collectives"
  // entry the collective's time on the stream. A wait's run is host time.
  SmallVector<Operation *> ops =
      parse("%x: tensor<64xf32>, %c: !coll.comm<2>",
            "%f = coll.all_gather_start %x on %c gather_axis = 0 : "
            "(tensor<64xf32>, !coll.comm<2>) -> !coll.future<tensor<128xf32>>\n"
            "%w = coll.wait %f : !coll.future<tensor<128xf32>>");
  ops[0]->setLoc(withOpId(ops[0]->getLoc(), 1));
  ops[1]->setLoc(withOpId(ops[1]->getLoc(), 2));
  CostModel model = load("cpu");
  EXPECT_EQ(model.getIssueTime(ops[0]), 0.0);
  EXPECT_EQ(bindError(model,
                      R"({"world_size": 2, "ops": {"1": 3, "2": 4},
                          "collectives": {"1": {"us": 50}}})",
                      *module),
            "no error");
  EXPECT_DOUBLE_EQ(model.getIssueTime(ops[0]), 3e-6);
  EXPECT_DOUBLE_EQ(model.getIssueTime(ops[1]), 4e-6);
  EXPECT_DOUBLE_EQ(model.getCollectiveTime(ops[0]), 50e-6);
  EXPECT_DOUBLE_EQ(model.getProfile()->stepSeconds, 0);
  // Measured on 4 ranks: not this step's.
  EXPECT_NE(bindError(model,
                      R"({"world_size": 4, "ops": {"1": 3},
                          "collectives": {"1": {"us": 50}}})",
                      *module)
                .find("measured on 4 ranks; this step's collectives run on 2"),
            std::string::npos);
}

TEST_F(CostModelTest, ProfilesThatMatchNothingAreErrors) {
  SmallVector<Operation *> ops =
      parse("%a: tensor<64xf32>", "%x = math.exp %a : tensor<64xf32>");
  CostModel model = load("cpu");
  EXPECT_NE(bindError(model, R"({"ops": {"0": 1}})", *module)
                .find("the IR has no op ids"),
            std::string::npos);
  ops[0]->setLoc(withOpId(ops[0]->getLoc(), 3));
  EXPECT_NE(bindError(model, R"({"ops": {"4": 1}})", *module)
                .find("matches none of the 1 op ids"),
            std::string::npos);
  EXPECT_NE(bindError(model, R"({"ops": {"x": 1}})", *module)
                .find("expected op ids as keys of 'ops'"),
            std::string::npos);
  EXPECT_NE(bindError(model, R"({"ops": {"3": -1}})", *module)
                .find("bad entry for op 3"),
            std::string::npos);
  EXPECT_NE(bindError(model, R"({"op": {}})", *module).find("trainer's"),
            std::string::npos);
  EXPECT_EQ(model.getProfile(), nullptr);
  EXPECT_FALSE(model.getProfiled(ops[0]));
}

TEST_F(CostModelTest, BadDescriptionsNameTheField) {
  auto error = [](StringRef json) {
    llvm::Expected<DeviceDescription> device =
        DeviceDescription::parse(json, "test.json");
    return device ? std::string("no error") : toString(device.takeError());
  };
  EXPECT_NE(error("{").find("invalid JSON"), std::string::npos);
  EXPECT_NE(error(R"({"name": "x"})").find("peak_flops"), std::string::npos);
  EXPECT_NE(error(R"({"name": "x", "peak_flops": {"f32": 1},
                      "memory_bandwidth": 1, "memory_bytes": 1,
                      "contention": {"compute_while_communicating": -1},
                      "links": [{"bandwidth": 1, "latency": 0}]})")
                .find("contention.compute_while_communicating"),
            std::string::npos);
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

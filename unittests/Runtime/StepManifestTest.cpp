//===- StepManifestTest.cpp - the manifest from both sides ----------------===//
//
// The compiler writes the step manifest (trainer-entry-point) and the
// trainer parses it (StepManifest::parse): the two agree on every field,
// and the parser rejects text the compiler never writes.
//
//===----------------------------------------------------------------------===//

#include "loom/Runtime/StepManifest.h"
#include "loom/Dialect/Coll/CollDialect.h"
#include "loom/Dialect/Train/TrainDialect.h"
#include "loom/Dialect/Train/TrainOps.h"
#include "loom/Trainer/Passes.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

using loom::runtime::StepManifest;
using loom::runtime::StepTensor;

namespace {

StepManifest example() {
  StepManifest m;
  m.properties = {{"world_size", "4"}, {"lr", "1.000000e-03"}};
  StepTensor w;
  w.isArgument = true;
  w.role = "param";
  w.name = "layers.0.w";
  w.dtype = "bf16";
  w.localShape = {16};
  w.fullShape = {8, 8};
  StepTensor loss;
  loss.role = "loss";
  loss.name = "loss";
  loss.dtype = "f32";
  StepTensor update = w;
  update.isArgument = false;
  update.inPlace = true;
  StepTensor tokens;
  tokens.isArgument = true;
  tokens.role = "input";
  tokens.name = "tokens";
  tokens.dtype = "i32";
  tokens.localShape = tokens.fullShape = {2, 8};
  tokens.bound = 256;
  m.tensors = {w, loss, update, tokens};
  return m;
}

TEST(StepManifestTest, PrintsTheDocumentedLines) {
  EXPECT_EQ(example().print(), "loom-step 1\n"
                               "lr 1.000000e-03\n"
                               "world_size 4\n"
                               "arg param layers.0.w bf16 16 8x8\n"
                               "result loss loss f32 - -\n"
                               "result param layers.0.w bf16 16 8x8 in-place\n"
                               "arg input tokens i32 2x8 2x8 below=256\n");
}

TEST(StepManifestTest, ParsesWhatItPrints) {
  StepManifest parsed;
  std::string error;
  ASSERT_TRUE(StepManifest::parse(example().print(), parsed, error)) << error;
  EXPECT_EQ(parsed.print(), example().print());
  ASSERT_EQ(parsed.tensors.size(), 4u);
  EXPECT_EQ(parsed.tensors[0].getBytes(), 32);
  EXPECT_EQ(parsed.tensors[0].bound, 0);
  EXPECT_EQ(parsed.tensors[3].bound, 256);
  EXPECT_EQ(parsed.tensors[0].getFullCount(), 64);
  EXPECT_TRUE(parsed.tensors[1].localShape.empty());
  EXPECT_EQ(parsed.tensors[1].getBytes(), 4);
  EXPECT_TRUE(parsed.tensors[2].inPlace);
  ASSERT_NE(parsed.getProperty("lr"), nullptr);
  EXPECT_EQ(*parsed.getProperty("lr"), "1.000000e-03");
  EXPECT_EQ(parsed.getProperty("source"), nullptr);
}

TEST(StepManifestTest, RejectsMalformedLines) {
  const char *bad[] = {
      "loom-step 2\n",
      "arg param w f32 4 4\n",
      "loom-step 1\narg weight w f32 4 4\n",
      "loom-step 1\narg param w f16 4 4\n",
      "loom-step 1\narg param w f32 4x 4\n",
      "loom-step 1\narg param w f32 x4 4\n",
      "loom-step 1\narg param w f32 -4 4\n",
      "loom-step 1\narg param w f32 4\n",
      "loom-step 1\narg param w f32 4 4 in-place\n",
      "loom-step 1\nresult param w f32 4 4 twice\n",
      "loom-step 1\nresult param w f32 4 4 in-place extra\n",
      "loom-step 1\nresult input ids i32 4 4 below=8\n",
      "loom-step 1\narg input ids i32 4 4 below=0\n",
      "loom-step 1\narg input ids i32 4 4 below=-3\n",
      "loom-step 1\narg input ids i32 4 4 below=\n",
      "loom-step 1\narg input ids i32 4 4 below=8 in-place\n",
      "loom-step 1\narg param w f64 4294967296x4294967296 4\n",
      "loom-step 1\n\n",
  };
  for (const char *text : bad) {
    StepManifest parsed;
    std::string error;
    EXPECT_FALSE(StepManifest::parse(text, parsed, error)) << text;
    EXPECT_FALSE(error.empty()) << text;
  }
}

/// The compiler's side: trainer-entry-point describes a step, and what it
/// records is what the trainer's parser reads back.
TEST(StepManifestTest, TheTrainerReadsWhatTheCompilerWrites) {
  mlir::MLIRContext context;
  context.loadDialect<mlir::arith::ArithDialect,
                      mlir::bufferization::BufferizationDialect,
                      mlir::func::FuncDialect, mlir::linalg::LinalgDialect,
                      mlir::tensor::TensorDialect, loom::coll::CollDialect,
                      loom::train::TrainDialect>();
  const char *source = R"mlir(
    func.func @step(%w: tensor<3xf32> {train.full_shape = array<i64: 2, 5>, train.param = "w"},
                    %s: tensor<f32> {train.state = "step"},
                    %ids: tensor<2x8xi32> {train.id_bound = 96 : i64, train.input = "tokens"})
        -> (tensor<f32> {train.loss}, tensor<3xf32> {train.full_shape = array<i64: 2, 5>, train.param = "w"})
        attributes {train.lr = 3.0e-4 : f64, train.optimizer = "adamw", train.zero_stage = 3 : i64,
                    train.tied_results = array<i64: -1, 0>, train.timeline_peak_bytes = 64 : i64} {
      %c = coll.comm_world : !coll.comm<4>
      return %s, %w : tensor<f32>, tensor<3xf32>
    })mlir";
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(source, &context);
  ASSERT_TRUE(module);
  mlir::PassManager pm(&context);
  loom::trainer::TrainerEntryPointPassOptions options;
  options.source = "model.mlir";
  pm.addPass(loom::trainer::createTrainerEntryPointPass(options));
  ASSERT_TRUE(mlir::succeeded(pm.run(*module)));
  auto manifest = (*module)->getAttrOfType<loom::train::StepManifestAttr>(
      loom::train::TrainDialect::kStepManifestAttrName);
  ASSERT_TRUE(manifest);

  // What trainer-manifest emits for the trainer, parsed as the trainer does.
  std::string text = loom::trainer::getRuntimeManifest(manifest).print();
  StepManifest parsed;
  std::string error;
  ASSERT_TRUE(StepManifest::parse(text, parsed, error)) << error;
  EXPECT_EQ(*parsed.getProperty("world_size"), "4");
  EXPECT_EQ(*parsed.getProperty("zero_stage"), "3");
  EXPECT_EQ(*parsed.getProperty("optimizer"), "adamw");
  EXPECT_EQ(std::stod(*parsed.getProperty("lr")), 3.0e-4);
  EXPECT_EQ(*parsed.getProperty("predicted_peak_bytes"), "64");
  EXPECT_EQ(*parsed.getProperty("source"), "model.mlir");
  ASSERT_EQ(parsed.tensors.size(), 5u);
  const StepTensor &w = parsed.tensors[0];
  EXPECT_TRUE(w.isArgument);
  EXPECT_EQ(w.role, "param");
  EXPECT_EQ(w.name, "w");
  EXPECT_EQ(w.localShape, std::vector<int64_t>{3});
  EXPECT_EQ(w.fullShape, (std::vector<int64_t>{2, 5}));
  EXPECT_EQ(parsed.tensors[1].role, "state");
  EXPECT_EQ(parsed.tensors[2].dtype, "i32");
  EXPECT_EQ(parsed.tensors[2].getBytes(), 64);
  EXPECT_EQ(parsed.tensors[2].bound, 96);
  EXPECT_EQ(parsed.tensors[0].bound, 0);
  EXPECT_EQ(parsed.tensors[3].role, "loss");
  EXPECT_FALSE(parsed.tensors[3].inPlace);
  EXPECT_TRUE(parsed.tensors[4].inPlace);
  EXPECT_FALSE(parsed.tensors[4].isArgument);
}

} // namespace

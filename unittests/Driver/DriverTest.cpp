//===- DriverTest.cpp - the compiler driver as a library ------------------===//
//
// CompileOptions' checks and the phase options made from it, and compiles
// run in-process through lib/Driver, as a client other than loomc would.
//
//===----------------------------------------------------------------------===//

#include "loom/Driver/Driver.h"
#include "loom/Trainer/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"

#include "gtest/gtest.h"

using namespace mlir;
using namespace loom;
using namespace loom::driver;

namespace {

// Two blocks and a classifier head: two pipeline units and the last.
constexpr const char *kForward = R"mlir(
func.func @mlp(%w0: tensor<8x8xf32> {train.param = "layers.0.w"},
               %w1: tensor<8x8xf32> {train.param = "layers.1.w"},
               %head: tensor<4x8xf32> {train.param = "head"},
               %x: tensor<4x8xf32> {train.input = "x"},
               %labels: tensor<4xi32> {train.input = "labels"})
    -> (tensor<f32> {train.loss}) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x8xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<4x8xf32>) -> tensor<4x8xf32>
  %h0 = linalg.matmul ins(%x, %w0 : tensor<4x8xf32>, tensor<8x8xf32>)
      outs(%z : tensor<4x8xf32>) -> tensor<4x8xf32>
  %h1 = linalg.matmul ins(%h0, %w1 : tensor<4x8xf32>, tensor<8x8xf32>)
      outs(%z : tensor<4x8xf32>) -> tensor<4x8xf32>
  %el = tensor.empty() : tensor<4x4xf32>
  %zl = linalg.fill ins(%zero : f32) outs(%el : tensor<4x4xf32>) -> tensor<4x4xf32>
  %logits = linalg.matmul indexing_maps = [
      affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>,
      affine_map<(m, n, k) -> (m, n)>]
      ins(%h1, %head : tensor<4x8xf32>, tensor<4x8xf32>)
      outs(%zl : tensor<4x4xf32>) -> tensor<4x4xf32>
  %loss = train.cross_entropy %logits, %labels ignore_index = -100
      reduction = <mean> label_smoothing = 0.0 z_loss = 0.0
      : tensor<4x4xf32>, tensor<4xi32> -> tensor<f32>
  return %loss : tensor<f32>
}
)mlir";

class DriverTest : public ::testing::Test {
protected:
  DriverTest() {
    DialectRegistry registry;
    registerCompileDialects(registry);
    context.appendDialectRegistry(registry);
    context.loadAllAvailableDialects();
  }

  OwningOpRef<ModuleOp> parse(const char *text) {
    return parseSourceString<ModuleOp>(text, &context);
  }

  MLIRContext context;
  std::string messages;
  llvm::raw_string_ostream messageStream{messages};
  Reporter reporter{"test", messageStream};
};

TEST(CompileOptions, DefaultsHold) {
  CompileOptions options;
  EXPECT_EQ(options.verify(), "");
  EXPECT_EQ(options.target, Target::Cpu);
  EXPECT_EQ(options.emit, EmitPoint::Exe);
  EXPECT_FALSE(options.runtimeDir.empty());
}

TEST(CompileOptions, RefusesWhatDoesNotCombine) {
  CompileOptions options;
  options.worldSize = 4;
  EXPECT_EQ(options.verify(),
            "--world-size 4 needs --zero-stage 1, 2 or 3 (stage 0 is "
            "single-rank)");
  options.zeroStage = ZeroStage::Parameters;
  EXPECT_EQ(options.verify(), "");
  options.pipelineStages = 2;
  EXPECT_NE(options.verify().find("--zero-stage 3 with --pipeline-stages"),
            std::string::npos);
  options.zeroStage = ZeroStage::Gradients;
  EXPECT_EQ(options.verify(), "");
  options.pipelineStages = 3;
  EXPECT_NE(options.verify().find("a multiple of 3"), std::string::npos);

  CompileOptions remat;
  remat.rematActivations = 1.5;
  EXPECT_EQ(remat.verify(), "expected --remat-activations in [0, 1]");
  CompileOptions ptx;
  ptx.emit = EmitPoint::Ptx;
  EXPECT_EQ(ptx.verify(), "--emit=ptx needs --target=cuda");
  CompileOptions profile;
  profile.zeroStage = ZeroStage::Parameters;
  profile.worldSize = 2;
  profile.profile = "/nonexistent/profile.json";
  EXPECT_NE(profile.verify().find("--profile"), std::string::npos);
}

TEST(CompileOptions, FillsThePhasesOptions) {
  CompileOptions options;
  options.worldSize = 8;
  options.pipelineStages = 2;
  options.zeroStage = ZeroStage::OptimizerState;
  options.microbatches = 4;
  TrainingStepOptions step;
  options.fill(step);
  EXPECT_EQ(step.pipelineReplicas, 4);
  EXPECT_EQ(step.microbatches, 4);
  // A stage is sharded over its replicas; the device loom-set-target reads
  // follows the target unless named.
  ShardingOptions sharding;
  options.fill(sharding);
  EXPECT_EQ(sharding.worldSize, 4);
  target::LoomSetTargetPassOptions cpu;
  options.fill(cpu);
  EXPECT_EQ(cpu.device, "cpu");
  EXPECT_EQ(cpu.profile, "");
  options.target = Target::Cuda;
  target::LoomSetTargetPassOptions cuda;
  options.fill(cuda);
  EXPECT_EQ(cuda.device, "h100-nvlink");
  options.device = "a100-pcie";
  options.profile = "p.json";
  target::LoomSetTargetPassOptions named;
  options.fill(named);
  EXPECT_EQ(named.device, "a100-pcie");
  EXPECT_EQ(named.profile, "p.json");
  // --emit=ptx asks the CUDA lowering for PTX whatever the format.
  options.emit = EmitPoint::Ptx;
  LowerToCudaOptions lowering;
  options.fill(lowering);
  EXPECT_EQ(lowering.format, GpuFormat::Ptx);
}

TEST_F(DriverTest, CompilesAZeroStepInProcess) {
  OwningOpRef<ModuleOp> module = parse(kForward);
  ASSERT_TRUE(module);
  CompileOptions options;
  options.worldSize = 2;
  options.zeroStage = ZeroStage::Parameters;
  options.emit = EmitPoint::Step;
  ASSERT_TRUE(succeeded(compileToMlir(module, options, reporter))) << messages;
  // ZeRO-3 gathers the parameters: the step holds collectives.
  int collectives = 0;
  module->walk([&](Operation *op) {
    collectives += op->getName().getDialectNamespace() == "coll";
  });
  EXPECT_GT(collectives, 0);
}

TEST_F(DriverTest, CompilesPipelineStagesToOneLlvmModule) {
  OwningOpRef<ModuleOp> module = parse(kForward);
  ASSERT_TRUE(module);
  CompileOptions options;
  options.worldSize = 2;
  options.pipelineStages = 2;
  options.microbatches = 2;
  options.emit = EmitPoint::LlvmMlir;
  ASSERT_TRUE(succeeded(compileToMlir(module, options, reporter))) << messages;
  // The stages are linked into the module: no nested module is left.
  EXPECT_TRUE(module->getOps<ModuleOp>().empty());
  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> linked =
      translateToLlvm(*module, llvmContext, reporter);
  ASSERT_TRUE(linked) << messages;
  auto *count = linked->getNamedGlobal("loom_pipeline_stages");
  ASSERT_TRUE(count);
  EXPECT_EQ(
      llvm::cast<llvm::ConstantInt>(count->getInitializer())->getSExtValue(),
      2);
  EXPECT_TRUE(linked->getNamedValue("loom_step_packed_stage0"));
  EXPECT_TRUE(linked->getNamedValue("loom_step_packed_stage1"));
}

TEST_F(DriverTest, ReportsWithTheClientsName) {
  OwningOpRef<ModuleOp> module = parse(R"mlir(
    func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> { return %x : tensor<4xf32> }
  )mlir");
  ASSERT_TRUE(module);
  CompileOptions options;
  options.sourceName = "f.mlir";
  EXPECT_TRUE(failed(compileToMlir(module, options, reporter)));
  EXPECT_EQ(messages,
            "test: error: f.mlir has no function with a train.loss result\n");
}

TEST_F(DriverTest, VerifiesTheOptionsItIsGiven) {
  OwningOpRef<ModuleOp> module = parse(kForward);
  ASSERT_TRUE(module);
  CompileOptions options;
  options.pipelineStages = 2;
  options.zeroStage = ZeroStage::Parameters;
  options.worldSize = 4;
  EXPECT_TRUE(failed(compileToMlir(module, options, reporter)));
  EXPECT_NE(messages.find("test: error: --zero-stage 3 with --pipeline-stages"),
            std::string::npos)
      << messages;
}

TEST_F(DriverTest, ReportsAnUnmetMemoryLimit) {
  // The limit is the scheduler's: it refuses one below the least retiming
  // reaches and says what that is; with nothing to schedule (one rank) the
  // driver says what the plan needs.
  for (int64_t worldSize : {2, 1}) {
    OwningOpRef<ModuleOp> module = parse(kForward);
    ASSERT_TRUE(module);
    CompileOptions options;
    options.worldSize = worldSize;
    options.zeroStage = worldSize > 1 ? ZeroStage::Parameters : ZeroStage::None;
    options.memoryLimitMb = 0.001;
    options.emit = EmitPoint::MemoryPlan;
    std::string diagnostics;
    ScopedDiagnosticHandler keep(&context, [&](Diagnostic &diag) {
      diagnostics += diag.str() + "\n";
      return success();
    });
    messages.clear();
    EXPECT_TRUE(failed(compileToMlir(module, options, reporter)));
    if (worldSize > 1)
      EXPECT_NE(diagnostics.find("coll-overlap-schedule: memory-limit-mb=0.00 "
                                 "is below the smallest peak retiming "
                                 "collectives reaches"),
                std::string::npos)
          << diagnostics;
    else
      EXPECT_NE(messages.find("test: error: --memory-limit-mb 0.001 cannot "
                              "be met: the step's memory plan needs"),
                std::string::npos)
          << messages;
  }
}

} // namespace

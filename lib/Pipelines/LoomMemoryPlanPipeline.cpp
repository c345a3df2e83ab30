//===- LoomMemoryPlanPipeline.cpp - loom-memory-plan-pipeline -------------===//
//
// The step as it will run, still on tensors, and its static memory plan
// (attention's kernels were chosen in the sharding phase):
//
//   convert-train-to-kernels     the loss's rows and the embedding gradient
//                                as the runtime's kernels (default: on CUDA)
//   train-decompose              the other train ops as linalg
//   codegen-widen-compute        bf16/f16 arithmetic in f32
//   codegen-fold-init-fills      elementwise ops read a fill's value
//   codegen-share-index-generics equal index tables (RoPE's) once
//   gpu-fuse-elementwise         for GPU kernels: producers into consumers
//   gpu-split-reduction          for GPU kernels: column sums in partials
//   codegen-update-in-place      updates written into their arguments
//   codegen-memory-plan          every buffer at an arena offset
//
// codegen-eliminate-empty-tensors (upstream's, where it can replace
// something) runs before the plan so that an op whose result is inserted
// into a slice of a new tensor writes into that slice, and the plan sees no
// copy.
//
//===----------------------------------------------------------------------===//

#include "loom/Codegen/Common/Passes.h"
#include "loom/Codegen/GPU/Passes.h"
#include "loom/Codegen/Utils/ReductionMatch.h"
#include "loom/Conversion/Passes.h"
#include "loom/Dialect/Train/TrainPasses.h"
#include "loom/Pipelines/Pipelines.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

void loom::buildMemoryPlanPipeline(OpPassManager &pm,
                                   const MemoryPlanOptions &options) {
  bool cuda = options.target == Target::Cuda;
  bool gpuKernels = cuda || options.emulateGpu;
  auto onForCuda = [&](TargetDefault value) {
    return value == TargetDefault::Auto ? cuda : value == TargetDefault::On;
  };
  loom::ConvertTrainToKernelsPassOptions kernels;
  kernels.lossKernels = onForCuda(options.lossKernels);
  kernels.embeddingKernel = onForCuda(options.embeddingKernel);
  kernels.cuda = cuda;
  if (kernels.lossKernels || kernels.embeddingKernel)
    pm.addPass(loom::createConvertTrainToKernelsPass(kernels));
  pm.addPass(train::createTrainDecomposePass());
  if (options.widenCompute)
    pm.addNestedPass<func::FuncOp>(codegen::createCodegenWidenComputePass());
  pm.addNestedPass<func::FuncOp>(codegen::createCodegenFoldInitFillsPass());
  pm.addPass(createCanonicalizerPass());
  pm.addNestedPass<func::FuncOp>(
      codegen::createCodegenShareIndexGenericsPass());
  if (gpuKernels && onForCuda(options.fuseElementwise)) {
    pm.addNestedPass<func::FuncOp>(codegen::createGpuFuseElementwisePass());
    pm.addPass(createCanonicalizerPass());
  }
  if (gpuKernels && options.splitReduction > 0) {
    // Enough partials to give the GPU's multiprocessors blocks to run.
    codegen::GpuSplitReductionPassOptions split;
    split.rows = options.splitReduction;
    split.maxOutputs = codegen::kFewBlocks * options.gpuThreads;
    split.minRows = options.splitMinRows;
    pm.addNestedPass<func::FuncOp>(codegen::createGpuSplitReductionPass(split));
  }
  if (!options.memoryPlan)
    return;
  pm.addPass(codegen::createCodegenEliminateEmptyTensorsPass());
  OpPassManager &func = pm.nest<func::FuncOp>();
  func.addPass(codegen::createCodegenUpdateInPlacePass());
  codegen::CodegenMemoryPlanPassOptions plan;
  plan.callerOwnedResults = true;
  func.addPass(codegen::createCodegenMemoryPlanPass(plan));
}

std::string loom::getFootprintLowering(MemoryPlanOptions &plan) {
  plan.memoryPlan = false;
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "builtin.module(loom-memory-plan-pipeline";
  plan.print(os);
  os << ")";
  return text;
}

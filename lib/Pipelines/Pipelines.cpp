//===- Pipelines.cpp - registration and the shared lowering pieces --------===//

#include "loom/Pipelines/Pipelines.h"
#include "PipelineParts.h"
#include "loom/Codegen/Common/Passes.h"
#include "loom/Conversion/Passes.h"
#include "loom/Dialect/Train/TrainPasses.h"
#include "loom/Remat/Passes.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/Bufferization/Pipelines/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

llvm::StringRef loom::stringifyOptimizer(Optimizer optimizer) {
  switch (optimizer) {
  case Optimizer::AdamW:
    return "adamw";
  case Optimizer::Sgd:
    return "sgd";
  case Optimizer::None:
    return "none";
  }
  llvm_unreachable("unknown optimizer");
}

void loom::pipelines::addTrainRemat(OpPassManager &pm, double budgetMb,
                                    double activationBudget,
                                    const std::string &solver,
                                    bool leanestBelowFloor) {
  remat::TrainRematPassOptions remat;
  remat.budgetMb = budgetMb;
  remat.activationBudget = activationBudget;
  remat.leanestBelowFloor = leanestBelowFloor;
  remat.solver = solver;
  pm.addPass(remat::createTrainRematPass(remat));
}

/// One-Shot Bufferize across function boundaries, with identity layouts
/// at them.
static bufferization::OneShotBufferizePassOptions bufferizeOptions() {
  bufferization::OneShotBufferizePassOptions bufferize;
  bufferize.bufferizeFunctionBoundaries = true;
  bufferize.functionBoundaryTypeConversion =
      bufferization::LayoutMapOption::IdentityLayoutMap;
  return bufferize;
}

void loom::pipelines::addBufferize(OpPassManager &pm) {
  pm.addPass(bufferization::createOneShotBufferizePass(bufferizeOptions()));
  bufferization::buildBufferDeallocationPipeline(pm);
}

void loom::pipelines::addStepBufferization(OpPassManager &pm, bool memoryPlan) {
  pm.addPass(train::createTrainDropRolesPass());
  pm.addPass(codegen::createCodegenEliminateEmptyTensorsPass());
  if (memoryPlan) {
    // A planned step's buffers are its arena and its sends' empty buffers:
    // freed where it returns, or by upstream's pipeline where that does not
    // hold; then the CSE upstream's pipeline ends with.
    pm.addPass(bufferization::createOneShotBufferizePass(bufferizeOptions()));
    pm.addPass(codegen::createCodegenDeallocateAtExitPass());
    pm.addPass(createCSEPass());
  } else {
    addBufferize(pm);
  }
  pm.addPass(createCanonicalizerPass());
  if (memoryPlan)
    pm.addNestedPass<func::FuncOp>(codegen::createCodegenPackBuffersPass());
  pm.addPass(createConvertTrainKernelsToCallsPass());
}

void loom::pipelines::addHostScalarLowering(OpPassManager &pm) {
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  math::MathExtendToSupportedTypesOptions extend;
  extend.targetTypeStr = "f32";
  pm.addPass(math::createMathExtendToSupportedTypes(extend));
  arith::ArithEmulateUnsupportedFloatsOptions emulate;
  emulate.sourceTypeStrs = {"bf16"};
  emulate.targetTypeStr = "f32";
  pm.addPass(arith::createArithEmulateUnsupportedFloats(emulate));
  arith::ArithExpandOpsPassOptions expand;
  expand.includeBf16 = true;
  pm.addPass(arith::createArithExpandOpsPass(expand));
  pm.addPass(createSCFToControlFlowPass());
}

void loom::pipelines::addToLLVM(OpPassManager &pm, bool countedAllocations) {
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createConvertMathToLibmPass());
  if (countedAllocations) {
    FinalizeMemRefToLLVMConversionPassOptions memref;
    memref.useGenericFunctions = true;
    memref.useAlignedAlloc = true;
    pm.addPass(createFinalizeMemRefToLLVMConversionPass(memref));
  }
  pm.addPass(createConvertToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
}

void loom::registerPipelines() {
  PassPipelineRegistration<TrainingStepOptions>(
      "loom-training-step-pipeline",
      "loomc's training-step phase: the fused loss, train-autodiff and "
      "train-optimizer",
      buildTrainingStepPipeline);
  PassPipelineRegistration<ShardingOptions>(
      "loom-sharding-pipeline",
      "loomc's sharding phase: zero-partition and loom-schedule-pipeline, "
      "then the scheduled peak",
      buildShardingPipeline);
  PassPipelineRegistration<SchedulePipelineOptions>(
      "loom-schedule-pipeline",
      "Selective gather, bucketing, prefetch and the memory-bounded overlap "
      "schedule, with shared options",
      buildSchedulePipeline);
  PassPipelineRegistration<MemoryPlanOptions>(
      "loom-memory-plan-pipeline",
      "loomc's memory-plan phase: train ops decomposed, codegen on tensors "
      "and the static memory plan",
      buildMemoryPlanPipeline);
  PassPipelineRegistration<EntryOptions>(
      "loom-entry-pipeline",
      "loomc's entry phase: the trainer's entry point and the runtime's "
      "collective calls",
      buildEntryPipeline);
  PassPipelineRegistration<LowerToCpuOptions>(
      "loom-lower-to-cpu-pipeline",
      "loomc's lowering for the CPU: buffers, BLAS, vector loops, the LLVM "
      "dialect and the trainer's manifest",
      buildLowerToCpuPipeline);
  PassPipelineRegistration<LowerToCudaOptions>(
      "loom-lower-to-cuda-pipeline",
      "loomc's lowering for CUDA: buffers, cuBLAS, GPU kernels, the LLVM "
      "dialect and the trainer's manifest",
      buildLowerToCudaPipeline);
  PassPipelineRegistration<>(
      "loom-reference-pipeline",
      "loom-run's lowering: train ops decomposed, plain loops, the LLVM "
      "dialect",
      buildReferencePipeline);
}

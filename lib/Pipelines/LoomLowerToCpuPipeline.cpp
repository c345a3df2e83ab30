//===- LoomLowerToCpuPipeline.cpp - loom-lower-to-cpu-pipeline ------------===//
//
// Bufferisation (results straight into the caller's buffers where the plan
// says so), runtime kernel calls, matmuls to BLAS, each op's run bracketed
// by profile probes, a pipeline stage's actions outlined (one function per
// kind: codegen-outline-actions), the other linalg ops as vector loops (or
// as the CUDA target maps them, with emulate-gpu), then the LLVM dialect,
// where memref.alloc and dealloc become the allocation functions
// libloomtrainer counts, and the trainer's manifest.
//
//===----------------------------------------------------------------------===//

#include "PipelineParts.h"
#include "loom/Codegen/CPU/Passes.h"
#include "loom/Codegen/Common/Passes.h"
#include "loom/Codegen/GPU/Passes.h"
#include "loom/Conversion/Passes.h"
#include "loom/Pipelines/Pipelines.h"
#include "loom/Trainer/Passes.h"
#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

void loom::buildLowerToCpuPipeline(OpPassManager &pm,
                                   const LowerToCpuOptions &options) {
  pipelines::addStepBufferization(pm, options.memoryPlan);
  pm.addPass(createConvertLinalgToBlasPass());
  // Probes and outlining before the loops: the loops and the LLVM dialect
  // are then made once per kind of pipeline action, not per microbatch.
  pm.addPass(trainer::createTrainerProfileProbesPass());
  pm.addPass(codegen::createCodegenOutlineActionsPass());
  if (options.emulateGpu) {
    codegen::GpuMapLinalgPassOptions map;
    map.threads = options.gpuThreads;
    map.blockReduceMin = options.gpuBlockReduce;
    map.vectorBytes = options.gpuVectorBytes;
    map.deviceBuffers = false;
    pm.addNestedPass<func::FuncOp>(codegen::createGpuMapLinalgPass(map));
  } else {
    if (options.vectorize) {
      pm.addNestedPass<func::FuncOp>(codegen::createCpuVectorizePass());
      pm.addPass(createCanonicalizerPass());
    }
    pm.addNestedPass<func::FuncOp>(createConvertLinalgToLoopsPass());
  }
  pipelines::addHostScalarLowering(pm);
  pm.addPass(createConvertVectorToLLVMPass());
  pipelines::addToLLVM(pm, /*countedAllocations=*/true);
  pm.addPass(trainer::createTrainerManifestPass());
}

//===- LoomLowerToCudaPipeline.cpp - loom-lower-to-cuda-pipeline ----------===//
//
// On the CUDA target the step is host code that launches kernels: matmuls
// go to cuBLAS, every other linalg op becomes a kernel lowered through NVVM
// (one module, identical kernels once) to a cubin or PTX embedded in the
// trainer, and the arena is a gpu.alloc. Then the LLVM dialect and the
// trainer's manifest.
//
//===----------------------------------------------------------------------===//

#include "PipelineParts.h"
#include "loom/Codegen/GPU/Passes.h"
#include "loom/Conversion/Passes.h"
#include "loom/Pipelines/Pipelines.h"
#include "loom/Trainer/Passes.h"
#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

void loom::buildLowerToCudaPipeline(OpPassManager &pm,
                                    const LowerToCudaOptions &options) {
  pipelines::addStepBufferization(pm, options.memoryPlan);
  ConvertLinalgToBlasPassOptions blas;
  blas.library = "cublas";
  pm.addPass(createConvertLinalgToBlasPass(blas));
  codegen::GpuMapLinalgPassOptions map;
  map.threads = options.gpuThreads;
  map.blockReduceMin = options.gpuBlockReduce;
  map.vectorBytes = options.gpuVectorBytes;
  pm.addNestedPass<func::FuncOp>(codegen::createGpuMapLinalgPass(map));
  pm.addNestedPass<func::FuncOp>(createConvertParallelLoopToGpuPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  pm.addPass(createGpuLaunchSinkIndexComputationsPass());
  pm.addPass(createGpuKernelOutliningPass());
  pm.addPass(codegen::createGpuNameKernelsPass());
  pm.addPass(codegen::createGpuMergeModulesPass());
  trainer::TrainerProfileProbesPassOptions probes;
  probes.collectiveCalls = false;
  pm.addPass(trainer::createTrainerProfileProbesPass(probes));
  // gpu-lower-to-nvvm-pipeline's default PTX ISA (+ptx60) aborts for sm_90.
  GpuNVVMAttachTargetOptions target;
  target.chip = options.chip;
  target.features = "+ptx80";
  target.optLevel = 3;
  pm.addPass(createGpuNVVMAttachTarget(target));
  pm.addPass(createSCFToControlFlowPass());
  pm.addNestedPass<gpu::GPUModuleOp>(createConvertGpuOpsToNVVMOps());
  pm.addPass(createGpuToLLVMConversionPass());
  // ptxas runs from the toolkit (not found under a clean environment).
  GpuModuleToBinaryPassOptions binary;
  binary.compilationTarget = options.format == GpuFormat::Ptx ? "isa" : "bin";
  binary.toolkitPath = options.toolkit.empty() ? std::string(LOOM_CUDA_ROOT)
                                               : options.toolkit.getValue();
  pm.addPass(createGpuModuleToBinaryPass(binary));
  pipelines::addToLLVM(pm, /*countedAllocations=*/true);
  pm.addPass(trainer::createTrainerManifestPass());
}

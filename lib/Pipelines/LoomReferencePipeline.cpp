//===- LoomReferencePipeline.cpp - loom-reference-pipeline ----------------===//
//
// What loom-run evaluates with, the reference the numerical tests compare
// against: the train roles dropped, every train op decomposed into linalg,
// then plain loops (no BLAS, no vectors, no plan) and the LLVM dialect.
//
//===----------------------------------------------------------------------===//

#include "PipelineParts.h"
#include "loom/Dialect/Train/TrainPasses.h"
#include "loom/Pipelines/Pipelines.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

void loom::buildReferencePipeline(OpPassManager &pm) {
  pm.addPass(train::createTrainDropRolesPass());
  pm.addPass(train::createTrainDecomposePass());
  pm.addPass(createCanonicalizerPass());
  pipelines::addBufferize(pm);
  pm.addNestedPass<func::FuncOp>(createConvertLinalgToLoopsPass());
  pipelines::addHostScalarLowering(pm);
  pipelines::addToLLVM(pm, /*countedAllocations=*/false);
}

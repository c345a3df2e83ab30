//===- LoomTrainingStepPipeline.cpp - loom-training-step-pipeline ---------===//
//
// forward -> training step: the output projection fused into the loss (so
// that autodiff differentiates the fused op), the batch split into
// microbatches, reverse-mode gradients, the optimizer update with the
// learning rate as a run-time input, and, for a pipeline, one step per
// stage. With forward-only (the trainer's evaluation step), the fused loss
// and no more.
//
//===----------------------------------------------------------------------===//

#include "loom/Autodiff/Passes.h"
#include "loom/Dialect/Train/TrainPasses.h"
#include "loom/PipelineParallel/Passes.h"
#include "loom/Pipelines/Pipelines.h"

using namespace mlir;

void loom::buildTrainingStepPipeline(OpPassManager &pm,
                                     const TrainingStepOptions &options) {
  // The vocabulary each input of ids is read with, for the trainer's check
  // of its data.
  pm.addNestedPass<func::FuncOp>(train::createTrainRecordIdBoundsPass());
  if (options.fuseCrossEntropy > 0) {
    train::TrainFuseLinearCrossEntropyPassOptions fuse;
    fuse.chunkTokens = options.fuseCrossEntropy;
    fuse.chunkVocab = options.fuseCrossEntropyVocab;
    pm.addNestedPass<func::FuncOp>(
        train::createTrainFuseLinearCrossEntropyPass(fuse));
  }
  if (options.forwardOnly)
    return;
  if (options.microbatches > 1) {
    train::TrainMicrobatchPassOptions split;
    split.microbatches = options.microbatches;
    pm.addPass(train::createTrainMicrobatchPass(split));
  }
  pm.addPass(autodiff::createTrainAutodiffPass());
  if (options.optimizer != Optimizer::None) {
    autodiff::TrainOptimizerPassOptions optimizer;
    optimizer.kind = stringifyOptimizer(options.optimizer).str();
    optimizer.lr = options.lr;
    optimizer.weightDecay = options.weightDecay;
    optimizer.lrInput = true;
    pm.addPass(autodiff::createTrainOptimizerPass(optimizer));
  }
  if (options.pipelineStages > 1) {
    pp::PPPartitionPassOptions partition;
    partition.stages = options.pipelineStages;
    partition.replicas = options.pipelineReplicas;
    partition.schedule = options.pipelineSchedule;
    partition.layout = options.pipelineLayout;
    pm.addPass(pp::createPPPartitionPass(partition));
  }
}

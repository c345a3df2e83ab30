//===- PipelineSimulator.h - simulated execution of pipeline stages -*- C++
//-*-===//
//
// Runs pp-partition's stage programs together on the cost model, one
// compute stream per stage, matching each receive with its sender's send:
// the k-th receive a stage posts from stage s takes the k-th message s sent
// it, which arrives a transfer time (the cost model's, for its bytes) after
// the send started. A receive's wait stalls its stage until then; a send
// never blocks (the backends post it and move on). Collectives within a
// stage run on that stage's communication streams, as `simulate` models
// them.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_ANALYSIS_PIPELINESIMULATOR_H
#define LOOM_ANALYSIS_PIPELINESIMULATOR_H

#include "loom/Analysis/CostModel.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include <string>
#include <vector>

namespace loom {

/// One stage's timeline.
struct StageSimulation {
  /// When the stage's program ends.
  double finish = 0;
  /// Compute time (ops and the calls that issue collectives).
  double busy = 0;
  /// Time its compute stream waited for received values and collectives.
  double stalled = 0;
  int64_t peakBytes = 0;
  /// Consecutive ops of one schedule action ("F3", `train.action`) merged:
  /// (action, start, end); stalls as ("", start, end).
  struct Interval {
    std::string action;
    double start = 0, end = 0;
  };
  std::vector<Interval> intervals;
};

struct PipelineSimulation {
  std::vector<StageSimulation> stages;
  /// When the last of the stages finishes.
  double makespan = 0;
  /// The stages' idle share of the step: 1 - sum(compute) / (P *
  /// makespan). Stalls, and a stage's wait after its program ends for the
  /// slowest, both count: with equal stages and a textbook schedule it is
  /// (P-1)/(M+P-1).
  double bubble = 0;
};

/// Simulates `stages` (stage s at index s). Fails with a diagnostic on a
/// receive whose send never comes (the programs deadlock or disagree).
mlir::FailureOr<PipelineSimulation>
simulatePipeline(llvm::ArrayRef<mlir::func::FuncOp> stages,
                 const CostModel &model);

/// pp-partition's stage functions of `module`, by stage, or an empty list
/// when it has none. Fails when stages are missing or repeated.
mlir::FailureOr<llvm::SmallVector<mlir::func::FuncOp>>
getPipelineStages(mlir::ModuleOp module);

} // namespace loom

#endif // LOOM_ANALYSIS_PIPELINESIMULATOR_H

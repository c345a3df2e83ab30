//===- Simulator.h - simulated execution of a step --------------*- C++ -*-===//
//
// Replays a block in a given order on one compute stream and one in-order
// communication stream per communicator. A collective start is issued when
// the compute stream reaches it (its inputs are ready then, since compute is
// sequential) and runs when its communicator's stream is free; a wait
// stalls the compute stream until its collective has finished. Where a
// profile measured what the start and wait calls cost the host, that time
// is the compute stream's too. On a device whose compute contends with its
// communication (DeviceDescription::computeSlowdown), compute runs slower
// while a collective is in flight.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_ANALYSIS_SIMULATOR_H
#define LOOM_ANALYSIS_SIMULATOR_H

#include "loom/Analysis/CostModel.h"
#include "loom/Dialect/Coll/CollOps.h"
#include <array>
#include <string>
#include <vector>

namespace loom {

constexpr unsigned kNumCollectiveKinds = 6;

/// One interval on a stream, for traces.
struct TraceEvent {
  std::string name;
  /// "compute" or "comm <n>" (the n-th communicator seen).
  std::string stream;
  double start = 0, duration = 0;
  mlir::Operation *op = nullptr;
};

struct SimulationResult {
  /// Seconds throughout.
  double makespan = 0;
  double computeTime = 0;
  /// Busy time of each communicator's stream, in order of first use (a
  /// coll.comm_group shares its root communicator's).
  std::vector<double> commTimePerCommunicator;
  /// Compute-stream stall at waits, and the number of waits that stalled,
  /// per collective kind (indexed by coll::CollectiveKind).
  std::array<double, kNumCollectiveKinds> exposedTime{};
  std::array<unsigned, kNumCollectiveKinds> exposedCount{};
  std::array<unsigned, kNumCollectiveKinds> collectiveCount{};
  double criticalPath = 0;
  /// max(compute time, each communicator's time, critical path).
  double lowerBound = 0;
  int64_t peakBytes = 0;
  unsigned numOps = 0;
  /// When each op started and finished (collective starts: on their stream).
  llvm::DenseMap<mlir::Operation *, std::pair<double, double>> times;
  /// The compute stream's clock when it reached each op (for a wait: before
  /// it stalled).
  llvm::DenseMap<mlir::Operation *, double> reached;
  std::vector<TraceEvent> events;

  double getExposedTime() const;
  double getCommTime() const;
};

/// What a simulation records beyond times. Schedulers that simulate many
/// candidate orders turn off what they do not read.
struct SimulationOptions {
  /// Fill SimulationResult::events (for traces).
  bool events = true;
  /// Fill SimulationResult::peakBytes from the memory timeline.
  bool memory = true;
};

/// Simulates `ops` (the top-level ops of `block`, in execution order).
SimulationResult simulate(mlir::Block &block,
                          llvm::ArrayRef<mlir::Operation *> ops,
                          const CostModel &model,
                          SimulationOptions options = {});
/// Simulates a block in its current order.
SimulationResult simulate(mlir::Block &block, const CostModel &model,
                          SimulationOptions options = {});

} // namespace loom

#endif // LOOM_ANALYSIS_SIMULATOR_H

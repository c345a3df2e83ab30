//===- Simulator.cpp - simulated execution of a step ----------------------===//

#include "loom/Analysis/Simulator.h"
#include "loom/Analysis/MemoryTimeline.h"
#include "loom/Dialect/Coll/CollOps.h"
#include "loom/Utils/ReadValues.h"

using namespace mlir;
using namespace loom;

double SimulationResult::getExposedTime() const {
  double total = 0;
  for (double t : exposedTime)
    total += t;
  return total;
}

double SimulationResult::getCommTime() const {
  double total = 0;
  for (double t : commTimePerCommunicator)
    total += t;
  return total;
}

SimulationResult loom::simulate(Block &block, const CostModel &model,
                                SimulationOptions options) {
  SmallVector<Operation *> ops;
  for (Operation &op : block)
    ops.push_back(&op);
  return simulate(block, ops, model, options);
}

SimulationResult loom::simulate(Block &block, ArrayRef<Operation *> ops,
                                const CostModel &model,
                                SimulationOptions options) {
  SimulationResult result;
  result.numOps = ops.size();
  DenseMap<Value, unsigned> streamOf;
  std::vector<double> streamFree;
  DenseMap<Operation *, double> collectiveDone;
  // Earliest finish of each value ignoring stream contention: the critical
  // path.
  DenseMap<Value, double> finish;
  DenseMap<Operation *, double> startReady;
  double clock = 0;

  for (Operation *op : ops) {
    result.reached[op] = clock;
    double ready = 0;
    for (Value value : getReadValues(op))
      ready = std::max(ready, finish.lookup(value));

    if (auto start = dyn_cast<coll::CollectiveOpInterface>(op)) {
      // Groups of a communicator run on its stream, as loomrt runs them.
      Value comm = coll::getRootComm(start.getComm());
      auto [it, inserted] = streamOf.try_emplace(comm, streamFree.size());
      if (inserted) {
        streamFree.push_back(0);
        result.commTimePerCommunicator.push_back(0);
      }
      unsigned stream = it->second;
      // The call that starts it runs on the compute side first.
      double issue = model.getIssueTime(op);
      clock += issue;
      result.computeTime += issue;
      double duration = model.getCollectiveTime(op);
      double begin = std::max(clock, streamFree[stream]);
      double end = begin + duration;
      streamFree[stream] = end;
      collectiveDone[op] = end;
      result.commTimePerCommunicator[stream] += duration;
      result.collectiveCount[unsigned(start.getKind())]++;
      result.times[op] = {begin, end};
      if (options.events)
        result.events.push_back({op->getName().getStringRef().str(),
                                 "comm " + std::to_string(stream), begin,
                                 duration, op});
      startReady[op] = ready;
      for (Value r : op->getResults())
        finish[r] = ready;
      continue;
    }
    if (auto wait = dyn_cast<coll::WaitOp>(op)) {
      coll::CollectiveOpInterface start = wait.getStart();
      double done = start ? collectiveDone.lookup(start) : clock;
      unsigned kind = start ? unsigned(start.getKind()) : 0;
      if (done > clock) {
        result.exposedTime[kind] += done - clock;
        result.exposedCount[kind]++;
        if (options.events)
          result.events.push_back(
              {"wait (stalled)", "compute", clock, done - clock, op});
        clock = done;
      }
      double issue = model.getIssueTime(op);
      result.times[op] = {clock, clock + issue};
      clock += issue;
      result.computeTime += issue;
      double duration = start ? model.getCollectiveTime(start) : 0;
      finish[wait.getResult()] =
          (start ? startReady.lookup(start) : ready) + duration;
      continue;
    }
    double duration = model.getComputeTime(op);
    // While a collective is in flight (every stream busy now stays busy
    // until its streamFree: what it runs was issued by now), compute runs
    // at 1 / (1 + s) of its speed on a host that contends. The compute
    // time, the critical path and so the lower bound count the op alone.
    double elapsed = duration;
    if (double slowdown = model.getDevice().computeSlowdown;
        slowdown > 0 && duration > 0) {
      double busy = 0;
      for (double free : streamFree)
        busy = std::max(busy, free - clock);
      double slowed = duration * (1 + slowdown);
      elapsed =
          slowed <= busy ? slowed : busy + (duration - busy / (1 + slowdown));
    }
    result.times[op] = {clock, clock + elapsed};
    if (options.events && elapsed > 0)
      result.events.push_back(
          {op->getName().getStringRef().str(), "compute", clock, elapsed, op});
    clock += elapsed;
    result.computeTime += duration;
    for (Value r : op->getResults())
      finish[r] = ready + duration;
    result.criticalPath = std::max(result.criticalPath, ready + duration);
  }
  result.makespan = clock;
  for (double free : streamFree)
    result.makespan = std::max(result.makespan, free);
  for (auto &[value, time] : finish)
    result.criticalPath = std::max(result.criticalPath, time);
  result.lowerBound = std::max(result.computeTime, result.criticalPath);
  for (double comm : result.commTimePerCommunicator)
    result.lowerBound = std::max(result.lowerBound, comm);
  if (options.memory)
    result.peakBytes =
        MemoryTimeline(block, ops, MemoryTimelineOptions::asPlanned(block))
            .getPeakBytes();
  return result;
}

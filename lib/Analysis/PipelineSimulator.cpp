//===- PipelineSimulator.cpp - simulated execution of pipeline stages -----===//

#include "loom/Analysis/PipelineSimulator.h"
#include "loom/Analysis/MemoryTimeline.h"
#include "loom/Dialect/Coll/CollOps.h"
#include "loom/Dialect/Train/TrainOps.h"
#include <map>

using namespace mlir;
using namespace loom;

FailureOr<SmallVector<func::FuncOp>> loom::getPipelineStages(ModuleOp module) {
  std::map<int64_t, func::FuncOp> byStage;
  for (auto func : module.getOps<func::FuncOp>()) {
    auto stage = func->getAttrOfType<IntegerAttr>(
        loom::train::TrainDialect::kPipelineStageAttrName);
    if (!stage)
      continue;
    if (!byStage.emplace(stage.getInt(), func).second)
      return func.emitError("two functions of pipeline stage ")
             << stage.getInt();
  }
  SmallVector<func::FuncOp> stages;
  for (auto &[index, func] : byStage) {
    if (index != int64_t(stages.size()))
      return func.emitError("pipeline stage ")
             << stages.size() << " is missing";
    stages.push_back(func);
  }
  return stages;
}

namespace {

struct StageState {
  SmallVector<Operation *> ops;
  size_t next = 0;
  double clock = 0;
  /// Per communicator of non-point-to-point collectives: its stream.
  DenseMap<Value, double> streamFree;
  DenseMap<Operation *, double> done;
  /// Receives posted per sender, and when each was posted.
  std::map<int64_t, int64_t> receives;
  DenseMap<Operation *, std::pair<int64_t, int64_t>> receiveIndex;
  DenseMap<Operation *, double> posted;
};

} // namespace

FailureOr<PipelineSimulation>
loom::simulatePipeline(ArrayRef<func::FuncOp> stages, const CostModel &model) {
  int64_t numStages = stages.size();
  std::vector<StageState> state(numStages);
  PipelineSimulation result;
  result.stages.resize(numStages);
  // Arrival times of the messages each (sender, receiver) pair sent.
  std::map<std::pair<int64_t, int64_t>, std::vector<double>> arrivals;
  for (auto [s, stage] : llvm::enumerate(stages)) {
    func::FuncOp func = stage;
    if (!func.getBody().hasOneBlock())
      return emitError(func.getLoc(),
                       "pipeline simulation expects one-block stages");
    for (Operation &op : func.getBody().front())
      state[s].ops.push_back(&op);
    result.stages[s].peakBytes =
        MemoryTimeline(func.getBody().front(), state[s].ops).getPeakBytes();
  }
  auto record = [&](int64_t s, StringRef action, double start, double end) {
    auto &intervals = result.stages[s].intervals;
    // Ops outside the schedule's actions (communicators, constants) and
    // zero-time ops leave no mark.
    if (end <= start || action == "-")
      return;
    if (!intervals.empty() && intervals.back().action == action &&
        intervals.back().end >= start - 1e-15) {
      intervals.back().end = end;
      return;
    }
    intervals.push_back({action.str(), start, end});
  };
  for (bool progress = true; progress;) {
    progress = false;
    for (int64_t s = 0; s < numStages; ++s) {
      StageState &st = state[s];
      StageSimulation &out = result.stages[s];
      while (st.next < st.ops.size()) {
        Operation *op = st.ops[st.next];
        auto action = op->getAttrOfType<StringAttr>("train.action");
        StringRef label = action ? action.getValue() : StringRef("-");
        if (auto start = dyn_cast<coll::CollectiveOpInterface>(op)) {
          double issue = model.getIssueTime(op);
          record(s, label, st.clock, st.clock + issue);
          st.clock += issue;
          out.busy += issue;
          double duration = model.getCollectiveTime(op);
          if (auto send = dyn_cast<coll::SendStartOp>(op)) {
            double arrival = st.clock + duration;
            arrivals[{s, int64_t(send.getPeer())}].push_back(arrival);
            st.done[op] = arrival;
          } else if (auto recv = dyn_cast<coll::RecvStartOp>(op)) {
            int64_t from = recv.getPeer();
            st.receiveIndex[op] = {from, st.receives[from]++};
            st.posted[op] = st.clock;
          } else {
            double &free = st.streamFree[coll::getRootComm(start.getComm())];
            double begin = std::max(st.clock, free);
            free = begin + duration;
            st.done[op] = free;
          }
          ++st.next;
          progress = true;
          continue;
        }
        if (auto wait = dyn_cast<coll::WaitOp>(op)) {
          Operation *start = wait.getStart();
          double ready = st.clock;
          if (auto it = st.receiveIndex.find(start);
              it != st.receiveIndex.end()) {
            auto &sent = arrivals[{it->second.first, s}];
            if (int64_t(sent.size()) <= it->second.second)
              break; // the message is not sent yet: run the other stages
            ready = std::max(st.posted[start], sent[it->second.second]);
          } else if (start) {
            ready = st.done.lookup(start);
          }
          if (ready > st.clock) {
            record(s, "", st.clock, ready);
            out.stalled += ready - st.clock;
            st.clock = ready;
          }
          double issue = model.getIssueTime(op);
          st.clock += issue;
          out.busy += issue;
          ++st.next;
          progress = true;
          continue;
        }
        double duration = model.getComputeTime(op);
        record(s, label, st.clock, st.clock + duration);
        st.clock += duration;
        out.busy += duration;
        ++st.next;
        progress = true;
      }
    }
  }
  double busy = 0;
  for (int64_t s = 0; s < numStages; ++s) {
    StageState &st = state[s];
    if (st.next < st.ops.size())
      return st.ops[st.next]->emitError("pipeline simulation: stage ")
             << s << " waits for a message no stage sends";
    result.stages[s].finish = st.clock;
    result.makespan = std::max(result.makespan, st.clock);
    busy += result.stages[s].busy;
  }
  result.bubble = result.makespan > 0
                      ? 1 - busy / (double(numStages) * result.makespan)
                      : 0;
  return result;
}

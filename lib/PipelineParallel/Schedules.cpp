//===- Schedules.cpp - pipeline schedules as action lists -----------------===//

#include "loom/PipelineParallel/Schedules.h"
#include <algorithm>
#include <map>

using namespace loom::pp;

std::optional<ScheduleKind> loom::pp::parseScheduleKind(llvm::StringRef name) {
  if (name == "gpipe")
    return ScheduleKind::GPipe;
  if (name == "1f1b")
    return ScheduleKind::OneFOneB;
  if (name == "zb-h1")
    return ScheduleKind::ZeroBubbleH1;
  return std::nullopt;
}

llvm::StringRef loom::pp::getScheduleName(ScheduleKind kind) {
  switch (kind) {
  case ScheduleKind::GPipe:
    return "gpipe";
  case ScheduleKind::OneFOneB:
    return "1f1b";
  case ScheduleKind::ZeroBubbleH1:
    return "zb-h1";
  }
  return "";
}

std::string Action::str() const {
  const char *letter = kind == ActionKind::Forward     ? "F"
                       : kind == ActionKind::Backward  ? "B"
                       : kind == ActionKind::InputGrad ? "I"
                                                       : "W";
  return letter + std::to_string(microbatch);
}

std::vector<std::vector<Action>> loom::pp::buildSchedule(ScheduleKind kind,
                                                         int64_t stages,
                                                         int64_t microbatches) {
  std::vector<std::vector<Action>> schedule(stages);
  for (int64_t s = 0; s < stages; ++s) {
    std::vector<Action> &actions = schedule[s];
    if (kind == ScheduleKind::GPipe) {
      for (int64_t m = 0; m < microbatches; ++m)
        actions.push_back({ActionKind::Forward, m});
      for (int64_t m = 0; m < microbatches; ++m)
        actions.push_back({ActionKind::Backward, m});
      continue;
    }
    bool split = kind == ScheduleKind::ZeroBubbleH1;
    int64_t warmup = std::min(stages - s - 1, microbatches);
    int64_t nextForward = 0, nextBackward = 0, nextWeight = 0;
    // ZB-H1 (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024)
    // splits every backward into I, run where 1F1B runs B because the
    // previous stage waits for it, and W, which nothing waits for, and
    // places the W's where the stage would wait: stage s runs no W in its
    // first s steady-state steps, then W(j - s) after I(j); in the
    // cool-down each I is followed by one W, which fills the wait for the
    // next I (the stage below runs I then W too), and the last s W's end
    // the stage while the stages before it drain. With T_W <= min(T_F,
    // T_B) and M >= P the busiest stage then idles (P - 1)(T_F + T_B -
    // T_W), two W's per stage boundary less than 1F1B's (P - 1)(T_F + T_B
    // + T_W), at any such times: the order takes no costs, and the
    // simulator (or the stages' run) gives the times.
    //
    // Memory, as in the paper: between F and I stage s holds 1F1B's P - s
    // microbatches, between F and W (whose inputs outlive I) at most P,
    // 1F1B's stage 0's. Holding P - s up to W cannot reach that bubble:
    // the last stage would run F, I, W for one microbatch after another,
    // and its last I would reach stage 0 too late.
    auto backward = [&] {
      actions.push_back({split ? ActionKind::InputGrad : ActionKind::Backward,
                         nextBackward++});
    };
    auto weightGrad = [&] {
      actions.push_back({ActionKind::WeightGrad, nextWeight++});
    };
    for (; nextForward < warmup; ++nextForward)
      actions.push_back({ActionKind::Forward, nextForward});
    for (int64_t step = 0; nextForward < microbatches; ++step) {
      actions.push_back({ActionKind::Forward, nextForward++});
      backward();
      if (split && step >= s)
        weightGrad();
    }
    while (nextBackward < microbatches) {
      backward();
      if (split)
        weightGrad();
    }
    while (split && nextWeight < microbatches)
      weightGrad();
  }
  return schedule;
}

std::optional<ScheduleTiming> loom::pp::simulateSchedule(
    const std::vector<std::vector<Action>> &schedule,
    const std::function<double(int64_t, const Action &)> &duration,
    double transfer) {
  int64_t stages = schedule.size();
  ScheduleTiming timing;
  timing.intervals.resize(stages);
  // End time of each (stage, kind, microbatch) once it has run.
  std::map<std::tuple<int64_t, int, int64_t>, double> done;
  auto finished = [&](int64_t s, ActionKind kind,
                      int64_t m) -> std::optional<double> {
    auto it = done.find({s, int(kind), m});
    if (it == done.end())
      return std::nullopt;
    return it->second;
  };
  // The first backward half of m on stage s, whichever kind it is.
  auto backwardDone = [&](int64_t s, int64_t m) {
    if (auto b = finished(s, ActionKind::Backward, m))
      return b;
    return finished(s, ActionKind::InputGrad, m);
  };
  std::vector<size_t> next(stages, 0);
  std::vector<double> free(stages, 0);
  double busy = 0;
  for (bool progress = true; progress;) {
    progress = false;
    for (int64_t s = 0; s < stages; ++s) {
      while (next[s] < schedule[s].size()) {
        const Action &a = schedule[s][next[s]];
        std::optional<double> ready = 0.0;
        auto after = [&](std::optional<double> t, double delay) {
          if (!ready)
            return;
          if (!t)
            ready = std::nullopt;
          else
            ready = std::max(*ready, *t + delay);
        };
        if (a.kind == ActionKind::Forward) {
          if (s > 0)
            after(finished(s - 1, ActionKind::Forward, a.microbatch), transfer);
        } else if (a.kind == ActionKind::WeightGrad) {
          after(finished(s, ActionKind::InputGrad, a.microbatch), 0);
        } else {
          after(finished(s, ActionKind::Forward, a.microbatch), 0);
          if (s + 1 < stages)
            after(backwardDone(s + 1, a.microbatch), transfer);
        }
        if (!ready)
          break;
        double start = std::max(free[s], *ready);
        double length = duration(s, a);
        free[s] = start + length;
        busy += length;
        done[{s, int(a.kind), a.microbatch}] = free[s];
        timing.intervals[s].push_back({start, free[s]});
        ++next[s];
        progress = true;
      }
    }
  }
  for (int64_t s = 0; s < stages; ++s) {
    if (next[s] < schedule[s].size())
      return std::nullopt;
    timing.makespan = std::max(timing.makespan, free[s]);
  }
  timing.bubble =
      timing.makespan > 0 ? 1 - busy / (double(stages) * timing.makespan) : 0;
  return timing;
}

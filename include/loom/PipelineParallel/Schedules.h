//===- Schedules.h - pipeline schedules as action lists --------*- C++ -*-===//
//
// A pipeline schedule says, per stage, in which order the stage runs its
// microbatches' forwards and backwards: torch.distributed.pipelining's
// schedule IR without the transfers (pp-partition places those from the
// data flow). The same lists drive the stage programs pp-partition emits and
// the tests that check the schedules' properties.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_PIPELINEPARALLEL_SCHEDULES_H
#define LOOM_PIPELINEPARALLEL_SCHEDULES_H

#include "llvm/ADT/StringRef.h"
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace loom::pp {

enum class ScheduleKind { GPipe, OneFOneB, ZeroBubbleH1 };

/// Parses "gpipe", "1f1b" or "zb-h1".
std::optional<ScheduleKind> parseScheduleKind(llvm::StringRef name);
llvm::StringRef getScheduleName(ScheduleKind kind);

enum class ActionKind {
  /// The forward of a microbatch.
  Forward,
  /// The whole backward of a microbatch (GPipe, 1F1B).
  Backward,
  /// Zero bubble's halves of the backward: the input gradients (what the
  /// previous stage waits for) and the weight gradients (deferrable).
  InputGrad,
  WeightGrad,
};

struct Action {
  ActionKind kind;
  int64_t microbatch;
  bool operator==(const Action &other) const {
    return kind == other.kind && microbatch == other.microbatch;
  }
  /// "F3", "B0", "I2", "W1".
  std::string str() const;
};

/// Each stage's actions in order: GPipe runs every forward then every
/// backward; 1F1B runs min(P - s - 1, M) warm-up forwards on stage s, then
/// alternates a forward and a backward, then the remaining backwards; ZB-H1
/// is 1F1B with each backward split into I (where 1F1B runs B) and W, and
/// the W's placed where stage s would otherwise wait: its first s steady
/// steps run none, then W(j - s) follows I(j); in the cool-down one W
/// follows each I, and the last s end the stage. Between F and I stage s
/// holds 1F1B's P - s microbatches, between F and W at most P (1F1B's first
/// stage's), as ZB-H1 does. For M >= P and T_W <= min(T_F, T_B) the
/// busiest stage idles (P - 1)(T_F + T_B - T_W), against 1F1B's
/// (P - 1)(T_F + T_B + T_W). Requires stages >= 1 and microbatches >= 1.
std::vector<std::vector<Action>>
buildSchedule(ScheduleKind kind, int64_t stages, int64_t microbatches);

/// A schedule's timing when each action takes `duration(stage, action)` and
/// a transfer between stages `transfer`: F(m) on stage s waits for F(m) on
/// s - 1, the first backward half of m (B or I) for the same on s + 1 and
/// for F(m), W(m) for I(m).
struct ScheduleTiming {
  /// Per stage, each action's start and end, in the schedule's order.
  std::vector<std::vector<std::pair<double, double>>> intervals;
  double makespan = 0;
  /// Idle time over all stages' time: 1 - sum(busy) / (P * makespan).
  double bubble = 0;
};

/// Times `schedule`; nullopt if it deadlocks (an action waits for one that
/// can only run after it).
std::optional<ScheduleTiming>
simulateSchedule(const std::vector<std::vector<Action>> &schedule,
                 const std::function<double(int64_t, const Action &)> &duration,
                 double transfer = 0);

} // namespace loom::pp

#endif // LOOM_PIPELINEPARALLEL_SCHEDULES_H

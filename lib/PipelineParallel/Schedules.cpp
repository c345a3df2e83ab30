//===- Schedules.cpp - pipeline schedules as action lists -----------------===//

#include "loom/PipelineParallel/Schedules.h"
#include <algorithm>

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
    int64_t nextForward = 0, nextBackward = 0;
    std::vector<int64_t> deferred;
    auto backward = [&](bool cooldown) {
      int64_t m = nextBackward++;
      if (!split) {
        actions.push_back({ActionKind::Backward, m});
        return;
      }
      actions.push_back({ActionKind::InputGrad, m});
      if (cooldown)
        deferred.push_back(m);
      else
        actions.push_back({ActionKind::WeightGrad, m});
    };
    for (; nextForward < warmup; ++nextForward)
      actions.push_back({ActionKind::Forward, nextForward});
    while (nextForward < microbatches) {
      actions.push_back({ActionKind::Forward, nextForward++});
      backward(/*cooldown=*/false);
    }
    while (nextBackward < microbatches)
      backward(/*cooldown=*/true);
    for (int64_t m : deferred)
      actions.push_back({ActionKind::WeightGrad, m});
  }
  return schedule;
}

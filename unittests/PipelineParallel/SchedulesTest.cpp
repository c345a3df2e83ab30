//===- SchedulesTest.cpp - pipeline schedules -----------------------------===//
//
// Each schedule runs every microbatch's forward and backward once per stage,
// in an order that cannot deadlock; 1F1B keeps at most P - s microbatches in
// flight on stage s and has the textbook bubble (P - 1) / (M + P - 1) when a
// backward takes twice a forward; ZB-H1 keeps 1F1B's bound and has a smaller
// bubble.
//
//===----------------------------------------------------------------------===//

#include "loom/PipelineParallel/Schedules.h"
#include "gtest/gtest.h"
#include <set>

using namespace loom::pp;

namespace {

double unitTimes(int64_t, const Action &a) {
  // A backward is twice a forward; its halves are one forward each.
  return a.kind == ActionKind::Backward ? 2.0 : 1.0;
}

/// Microbatches whose forward has run and whose backward (or I) has not, at
/// the most.
int64_t maxInFlight(const std::vector<Action> &actions) {
  int64_t inFlight = 0, most = 0;
  for (const Action &a : actions) {
    if (a.kind == ActionKind::Forward)
      most = std::max(most, ++inFlight);
    if (a.kind == ActionKind::Backward || a.kind == ActionKind::InputGrad)
      --inFlight;
  }
  return most;
}

TEST(Schedules, EveryActionOnceAndInOrder) {
  for (ScheduleKind kind : {ScheduleKind::GPipe, ScheduleKind::OneFOneB,
                            ScheduleKind::ZeroBubbleH1})
    for (int64_t p : {1, 2, 3, 4, 8})
      for (int64_t m : {1, 2, 4, 8, 13}) {
        auto schedule = buildSchedule(kind, p, m);
        ASSERT_EQ(int64_t(schedule.size()), p);
        for (const auto &actions : schedule) {
          std::set<std::pair<int, int64_t>> seen;
          std::set<int64_t> forwards, firstHalves;
          for (const Action &a : actions) {
            EXPECT_TRUE(seen.insert({int(a.kind), a.microbatch}).second)
                << getScheduleName(kind).str() << " repeats " << a.str();
            if (a.kind == ActionKind::Forward)
              forwards.insert(a.microbatch);
            else if (a.kind == ActionKind::WeightGrad)
              EXPECT_TRUE(firstHalves.count(a.microbatch)) << a.str();
            else {
              EXPECT_TRUE(forwards.count(a.microbatch)) << a.str();
              firstHalves.insert(a.microbatch);
            }
          }
          // F, then B or I and W, per microbatch.
          EXPECT_EQ(int64_t(forwards.size()), m);
          EXPECT_EQ(int64_t(firstHalves.size()), m);
          int64_t split = 0;
          for (const Action &a : actions)
            split += a.kind == ActionKind::WeightGrad;
          for (int64_t mb = 0; mb < m; ++mb)
            EXPECT_EQ(seen.count({int(ActionKind::InputGrad), mb}),
                      seen.count({int(ActionKind::WeightGrad), mb}));
          EXPECT_EQ(int64_t(actions.size()), 2 * m + split);
        }
        EXPECT_TRUE(simulateSchedule(schedule, unitTimes).has_value())
            << getScheduleName(kind).str() << " deadlocks at P=" << p
            << " M=" << m;
      }
}

TEST(Schedules, OneFOneBBoundsMicrobatchesInFlight) {
  for (int64_t p : {2, 4, 8})
    for (int64_t m : {4, 8, 16}) {
      auto oneF = buildSchedule(ScheduleKind::OneFOneB, p, m);
      auto zb = buildSchedule(ScheduleKind::ZeroBubbleH1, p, m);
      auto gpipe = buildSchedule(ScheduleKind::GPipe, p, m);
      for (int64_t s = 0; s < p; ++s) {
        EXPECT_EQ(maxInFlight(oneF[s]), std::min(p - s, m));
        EXPECT_EQ(maxInFlight(zb[s]), std::min(p - s, m));
        EXPECT_EQ(maxInFlight(gpipe[s]), m);
      }
    }
}

TEST(Schedules, OneFOneBBubbleIsTheTextbookOne) {
  for (int64_t p : {2, 4, 8})
    for (int64_t m : {4, 8, 16, 32}) {
      auto timing = simulateSchedule(
          buildSchedule(ScheduleKind::OneFOneB, p, m), unitTimes);
      ASSERT_TRUE(timing);
      EXPECT_NEAR(timing->bubble, double(p - 1) / double(m + p - 1), 1e-12)
          << "P=" << p << " M=" << m;
      EXPECT_DOUBLE_EQ(timing->makespan, 3.0 * (m + p - 1));
    }
}

TEST(Schedules, ZeroBubbleH1HasLessBubbleThanOneFOneB) {
  for (int64_t p : {2, 4, 8})
    for (int64_t m : {4, 8, 16}) {
      auto oneF = simulateSchedule(buildSchedule(ScheduleKind::OneFOneB, p, m),
                                   unitTimes);
      auto zb = simulateSchedule(
          buildSchedule(ScheduleKind::ZeroBubbleH1, p, m), unitTimes);
      ASSERT_TRUE(oneF && zb);
      EXPECT_LT(zb->bubble, oneF->bubble) << "P=" << p << " M=" << m;
      EXPECT_LT(zb->makespan, oneF->makespan);
    }
}

TEST(Schedules, DetectsADeadlock) {
  // Stage 1 runs B0 before F0: its backward waits for a forward that
  // comes after it.
  std::vector<std::vector<Action>> bad = {
      {{ActionKind::Forward, 0}, {ActionKind::Backward, 0}},
      {{ActionKind::Backward, 0}, {ActionKind::Forward, 0}}};
  EXPECT_FALSE(simulateSchedule(bad, unitTimes).has_value());
}

TEST(Schedules, ParsesNames) {
  EXPECT_EQ(parseScheduleKind("1f1b"), ScheduleKind::OneFOneB);
  EXPECT_EQ(parseScheduleKind("zb-h1"), ScheduleKind::ZeroBubbleH1);
  EXPECT_EQ(parseScheduleKind("gpipe"), ScheduleKind::GPipe);
  EXPECT_FALSE(parseScheduleKind("interleaved"));
  EXPECT_EQ(buildSchedule(ScheduleKind::ZeroBubbleH1, 2, 2)[0][2].str(), "I0");
}

} // namespace

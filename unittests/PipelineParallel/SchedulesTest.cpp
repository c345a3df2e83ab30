//===- SchedulesTest.cpp - pipeline schedules -----------------------------===//
//
// Each schedule runs every microbatch's forward and backward once per stage,
// in an order that cannot deadlock; 1F1B keeps at most P - s microbatches in
// flight on stage s and has the textbook bubble (P - 1) / (M + P - 1) when a
// backward takes twice a forward; ZB-H1 keeps 1F1B's P - s between F and I
// and 1F1B's first stage's P between F and W, and its makespan is the Zero
// Bubble paper's: M (T_F + T_B + T_W) + (P - 1)(T_F + T_B - T_W).
//
//===----------------------------------------------------------------------===//

#include "loom/PipelineParallel/Schedules.h"
#include "gtest/gtest.h"
#include <functional>
#include <set>
#include <string>

using namespace loom::pp;

namespace {

double unitTimes(int64_t, const Action &a) {
  // A backward is twice a forward; its halves are one forward each.
  return a.kind == ActionKind::Backward ? 2.0 : 1.0;
}

/// F, I and W take `forward`, `inputGrad` and `weightGrad`; a whole
/// backward (B) takes I and W together.
std::function<double(int64_t, const Action &)>
timesOf(double forward, double inputGrad, double weightGrad) {
  return [=](int64_t, const Action &a) {
    switch (a.kind) {
    case ActionKind::Forward:
      return forward;
    case ActionKind::Backward:
      return inputGrad + weightGrad;
    case ActionKind::InputGrad:
      return inputGrad;
    case ActionKind::WeightGrad:
      return weightGrad;
    }
    return 0.0;
  };
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

/// "F0 I0 W0 ...".
std::string orderOf(const std::vector<Action> &actions) {
  std::string order;
  for (const Action &a : actions)
    order += (order.empty() ? "" : " ") + a.str();
  return order;
}

/// Microbatches whose forward has run and whose backward (or W) has not, at
/// the most: whose activations the stage holds, in part after I.
int64_t maxHeld(const std::vector<Action> &actions) {
  int64_t held = 0, most = 0;
  for (const Action &a : actions) {
    if (a.kind == ActionKind::Forward)
      most = std::max(most, ++held);
    if (a.kind == ActionKind::Backward || a.kind == ActionKind::WeightGrad)
      --held;
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
      auto gpipe = buildSchedule(ScheduleKind::GPipe, p, m);
      for (int64_t s = 0; s < p; ++s) {
        EXPECT_EQ(maxInFlight(oneF[s]), std::min(p - s, m));
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

TEST(Schedules, ZeroBubbleH1HoldsNoMoreThanOneFOneB) {
  for (int64_t p : {1, 2, 3, 4, 8})
    for (int64_t m : {1, 2, 4, 8, 13, 16}) {
      auto oneF = buildSchedule(ScheduleKind::OneFOneB, p, m);
      auto zb = buildSchedule(ScheduleKind::ZeroBubbleH1, p, m);
      int64_t oneFPeak = 0;
      for (const auto &actions : oneF)
        oneFPeak = std::max(oneFPeak, maxHeld(actions));
      EXPECT_EQ(oneFPeak, std::min(p, m));
      for (int64_t s = 0; s < p; ++s) {
        // All of a microbatch's activations: 1F1B's, stage by stage.
        EXPECT_EQ(maxInFlight(zb[s]), maxInFlight(oneF[s]))
            << "P=" << p << " M=" << m << " stage " << s;
        // What W reads: no more than 1F1B's busiest stage holds.
        EXPECT_LE(maxHeld(zb[s]), oneFPeak)
            << "P=" << p << " M=" << m << " stage " << s;
      }
    }
}

// The paper's bubble for ZB-H1 is (P - 1)(T_F + T_B - T_W) against 1F1B's
// (P - 1)(T_F + T_B + T_W), on the busiest stage, whose work is
// M (T_F + T_B + T_W); it holds for T_W <= min(T_F, T_B) and M >= P.
TEST(Schedules, ZeroBubbleH1ReachesThePapersBubble) {
  struct Times {
    double forward, inputGrad, weightGrad;
  };
  for (Times t : {Times{1, 1, 1}, Times{1, 2, 1}, Times{2, 2, 1},
                  Times{2, 1, 1}, Times{3, 2, 1}, Times{1.5, 1.25, 0.5}})
    for (int64_t p : {1, 2, 3, 4, 8})
      for (int64_t m : {1, 2, 4, 8, 13, 16}) {
        if (m < p)
          continue;
        auto times = timesOf(t.forward, t.inputGrad, t.weightGrad);
        double work = m * (t.forward + t.inputGrad + t.weightGrad);
        auto zb = simulateSchedule(
            buildSchedule(ScheduleKind::ZeroBubbleH1, p, m), times);
        auto oneF = simulateSchedule(
            buildSchedule(ScheduleKind::OneFOneB, p, m), times);
        ASSERT_TRUE(zb && oneF);
        EXPECT_NEAR(zb->makespan,
                    work + (p - 1) * (t.forward + t.inputGrad - t.weightGrad),
                    1e-9)
            << "P=" << p << " M=" << m << " F=" << t.forward
            << " B=" << t.inputGrad << " W=" << t.weightGrad;
        EXPECT_NEAR(oneF->makespan,
                    work + (p - 1) * (t.forward + t.inputGrad + t.weightGrad),
                    1e-9);
      }
}

TEST(Schedules, ZeroBubbleH1AtFourStagesEightMicrobatches) {
  // Per stage M (T_F + T_B + T_W) of work; at unit times 24, and the
  // busiest stage idles 9 under 1F1B, 3 under ZB-H1.
  struct Case {
    double forward, inputGrad, weightGrad, zeroBubble, oneFOneB;
  };
  for (Case c :
       {Case{1, 1, 1, 27, 33}, Case{1, 2, 1, 38, 44}, Case{2, 2, 1, 49, 55}}) {
    auto times = timesOf(c.forward, c.inputGrad, c.weightGrad);
    auto zb = simulateSchedule(buildSchedule(ScheduleKind::ZeroBubbleH1, 4, 8),
                               times);
    auto oneF =
        simulateSchedule(buildSchedule(ScheduleKind::OneFOneB, 4, 8), times);
    ASSERT_TRUE(zb && oneF);
    EXPECT_EQ(zb->makespan, c.zeroBubble);
    EXPECT_EQ(oneF->makespan, c.oneFOneB);
  }
  // The last stage runs its first W after I3, as the paper's ZB-H1 does:
  // it then holds four microbatches' activations, as stage 0 does.
  auto zb = buildSchedule(ScheduleKind::ZeroBubbleH1, 4, 8);
  EXPECT_EQ(orderOf(zb[3]), "F0 I0 F1 I1 F2 I2 F3 I3 W0 F4 I4 W1 F5 I5 W2 F6 "
                            "I6 W3 F7 I7 W4 W5 W6 W7");
  EXPECT_EQ(orderOf(zb[0]), "F0 F1 F2 F3 I0 W0 F4 I1 W1 F5 I2 W2 F6 I3 W3 F7 "
                            "I4 W4 I5 W5 I6 W6 I7 W7");
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

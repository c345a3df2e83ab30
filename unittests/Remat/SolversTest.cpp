//===- SolversTest.cpp - CBC's programs and the chain over layers ---------===//

#include "Solvers.h"
#include "Milp.h"

#include "gtest/gtest.h"
#include <random>

using namespace loom::remat;

namespace {

TEST(Milp, SolvesAKnapsackToOptimality) {
  // max 10a + 13b + 7c  s.t. 4a + 6b + 3c <= 9: a and b would not fit
  // together (10 > 9); b and c (9) give 20, a and c (7) give 17.
  Milp milp;
  int a = milp.addBinary(-10), b = milp.addBinary(-13), c = milp.addBinary(-7);
  milp.addRow({{a, 4}, {b, 6}, {c, 3}}, -1e30, 9);
  Milp::Result result = milp.solve(10, 0);
  ASSERT_EQ(result.status, Milp::Result::Optimal);
  EXPECT_DOUBLE_EQ(result.objective, -20);
  EXPECT_EQ(result.values, (std::vector<double>{0, 1, 1}));
  EXPECT_EQ(result.gap, 0);
}

TEST(Milp, ReportsInfeasibility) {
  Milp milp;
  int a = milp.addBinary(1), b = milp.addBinary(1);
  milp.addRow({{a, 1}, {b, 1}}, 3, 1e30);
  EXPECT_EQ(milp.solve(10, 0).status, Milp::Result::Infeasible);
}

TEST(Milp, KeepsAnOptimalWarmStart) {
  Milp milp;
  int a = milp.addBinary(-1), b = milp.addBinary(-2);
  milp.addRow({{a, 1}, {b, 1}}, -1e30, 1);
  Milp::Result result = milp.solve(10, 0, {0, 1});
  ASSERT_TRUE(result.hasSolution());
  EXPECT_TRUE(result.startKept);
  EXPECT_DOUBLE_EQ(result.objective, -2);
}

TEST(Milp, ImprovesOnAWorseWarmStart) {
  // The start (a) is feasible but not optimal: CBC must return b.
  Milp milp;
  int a = milp.addBinary(-1), b = milp.addBinary(-2);
  milp.addRow({{a, 1}, {b, 1}}, -1e30, 1);
  Milp::Result result = milp.solve(10, 0, {1, 0});
  ASSERT_EQ(result.status, Milp::Result::Optimal);
  EXPECT_FALSE(result.startKept);
  EXPECT_EQ(result.values, (std::vector<double>{0, 1}));
}

TEST(Milp, ReusesASolveThatEndedWithinItsLimits) {
  // A program of its own (no other test solves it): solved once, then
  // taken from the earlier solve whatever the time limit; another start or
  // another gap is another solve.
  Milp milp;
  int a = milp.addBinary(-3), b = milp.addBinary(-5), c = milp.addBinary(-4);
  milp.addRow({{a, 2}, {b, 4}, {c, 3}}, -1e30, 5.5);
  Milp::Result first = milp.solve(10, 0);
  ASSERT_EQ(first.status, Milp::Result::Optimal);
  EXPECT_FALSE(first.cached);
  Milp::Result again = milp.solve(3, 0);
  EXPECT_TRUE(again.cached);
  EXPECT_EQ(again.seconds, 0);
  EXPECT_EQ(again.values, first.values);
  EXPECT_DOUBLE_EQ(again.objective, first.objective);
  EXPECT_FALSE(milp.solve(10, 0, {1, 0, 1}).cached);
  EXPECT_FALSE(milp.solve(10, 0.5).cached);
  // A changed program is not the one solved.
  milp.setCost(a, -6);
  Milp::Result changed = milp.solve(10, 0);
  EXPECT_FALSE(changed.cached);
  EXPECT_EQ(changed.values, (std::vector<double>{1, 0, 1}));
}

/// A random chain: each layer's options from keeping everything (first) to
/// keeping little, more time the less kept; the keep-all timeline's needs
/// grow with the phantoms alive.
struct RandomChain {
  std::vector<std::vector<LayerOption>> options;
  ChainModel model;

  RandomChain(unsigned layers, unsigned seed) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int64_t> bytes(100, 1000);
    options.resize(layers);
    for (auto &layer : options) {
      int64_t full = bytes(rng) * 4;
      layer.push_back({{}, full, 0, 0});
      for (unsigned o = 1; o < 4; ++o) {
        LayerOption option;
        option.keptBytes = full / int64_t(o + 1);
        option.recomputedBytes = full - option.keptBytes;
        option.seconds =
            double(full - option.keptBytes) * (1.0 + 0.5 * o) * 1e-6;
        layer.push_back(option);
      }
    }
    model.numLayers = layers;
    model.need.assign(layers + 1, {0, 0});
    int64_t alive = 5000;
    for (unsigned j = 0; j < layers; ++j) {
      model.fullBytes.push_back(options[j][0].keptBytes);
      model.options.push_back(&options[j]);
    }
    for (unsigned c = 0; c <= layers; ++c) {
      model.need[c][0] = alive;
      model.need[c][1] = c ? alive + 50 : 0;
      if (c < layers)
        alive += options[c][0].keptBytes;
    }
  }

  /// The fastest choice within `budget`, by trying every one.
  std::optional<double> bruteForce(int64_t budget) const {
    std::optional<double> best;
    std::vector<unsigned> choice(model.numLayers, 0);
    while (true) {
      if (model.getPeak(choice) <= budget) {
        double t = model.getSeconds(choice);
        if (!best || t < *best)
          best = t;
      }
      unsigned j = 0;
      while (j < choice.size() && ++choice[j] == options[j].size())
        choice[j++] = 0;
      if (j == choice.size())
        return best;
    }
  }
};

TEST(Chain, DynamicProgramIsExactOnSmallChains) {
  for (unsigned seed = 0; seed < 20; ++seed) {
    RandomChain chain(5, seed);
    int64_t top = chain.model.getPeak(std::vector<unsigned>(5, 0));
    for (int64_t budget = top; budget > top / 3; budget -= top / 17) {
      std::optional<double> expected = chain.bruteForce(budget);
      std::optional<std::vector<unsigned>> got =
          solveChain(chain.model, budget);
      ASSERT_EQ(expected.has_value(), got.has_value())
          << "seed " << seed << " budget " << budget;
      if (!got)
        continue;
      EXPECT_LE(chain.model.getPeak(*got), budget);
      EXPECT_NEAR(chain.model.getSeconds(*got), *expected, 1e-12);
    }
  }
}

TEST(Chain, IlpAgreesWithTheDynamicProgram) {
  for (unsigned seed = 0; seed < 5; ++seed) {
    RandomChain chain(12, 100 + seed);
    int64_t top = chain.model.getPeak(std::vector<unsigned>(12, 0));
    for (int64_t budget = top; budget > top / 2; budget -= top / 9) {
      std::optional<std::vector<unsigned>> dp = solveChain(chain.model, budget);
      if (!dp)
        continue;
      SolveStats stats;
      std::optional<std::vector<unsigned>> ilp =
          solveChainIlp(chain.model, budget, *dp, 10, 0, -1, stats);
      ASSERT_TRUE(ilp.has_value());
      EXPECT_LE(chain.model.getPeak(*ilp), budget);
      EXPECT_NEAR(chain.model.getSeconds(*ilp), chain.model.getSeconds(*dp),
                  1e-9);
      EXPECT_EQ(stats.solves, 1u);
    }
  }
}

TEST(Chain, TimeNeverGrowsWithTheBudget) {
  RandomChain chain(30, 7);
  int64_t top = chain.model.getPeak(std::vector<unsigned>(30, 0));
  double previous = -1;
  for (int i = 0; i <= 50; ++i) {
    int64_t budget = top / 3 + (top - top / 3) * i / 50;
    std::optional<std::vector<unsigned>> got = solveChain(chain.model, budget);
    if (!got)
      continue;
    double seconds = chain.model.getSeconds(*got);
    if (previous >= 0)
      EXPECT_LE(seconds, previous + 1e-15);
    previous = seconds;
  }
  EXPECT_EQ(previous, 0); // the whole budget keeps everything
}

TEST(Chain, NoChoiceBelowTheFloor) {
  RandomChain chain(4, 3);
  EXPECT_FALSE(solveChain(chain.model, 10).has_value());
  SolveStats stats;
  EXPECT_FALSE(solveChainIlp(chain.model, 10, {}, 10, 0, -1, stats).has_value());
}

} // namespace

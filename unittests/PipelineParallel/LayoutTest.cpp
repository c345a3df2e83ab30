//===- LayoutTest.cpp - pipeline layouts ----------------------------------===//
//
// Megatron's layout strings parse to each stage's units, malformed ones are
// errors, and the balancing cut is the best contiguous one (against brute
// force over every cut).
//
//===----------------------------------------------------------------------===//

#include "loom/PipelineParallel/Layout.h"
#include "gtest/gtest.h"
#include <algorithm>
#include <random>

using namespace loom::pp;

namespace {

TEST(Layout, ParsesMegatronSyntax) {
  std::string error;
  auto stages = parseLayout("Et*3|t*2|ttL", error);
  ASSERT_TRUE(error.empty()) << error;
  ASSERT_EQ(stages.size(), 3u);
  EXPECT_EQ(stages[0], "Ettt");
  EXPECT_EQ(stages[1], "tt");
  EXPECT_EQ(stages[2], "ttL");
}

TEST(Layout, RejectsMalformed) {
  for (const char *bad : {"Et|tX", "t*0|L", "t*|L", "Et*x"}) {
    std::string error;
    EXPECT_TRUE(parseLayout(bad, error).empty()) << bad;
    EXPECT_FALSE(error.empty()) << bad;
  }
}

/// The costliest run of the best cut, by trying every cut.
double bruteForce(const std::vector<double> &costs, int64_t stages) {
  int64_t n = costs.size();
  double best = 1e300;
  std::vector<int> pick(n - 1, 0);
  std::fill(pick.end() - (stages - 1), pick.end(), 1);
  do {
    double run = 0, worst = 0;
    for (int64_t u = 0; u < n; ++u) {
      run += costs[u];
      if (u == n - 1 || pick[u]) {
        worst = std::max(worst, run);
        run = 0;
      }
    }
    best = std::min(best, worst);
  } while (std::next_permutation(pick.begin(), pick.end()));
  return best;
}

TEST(Layout, BalancesAsWellAsBruteForce) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> cost(0.1, 5.0);
  for (int trial = 0; trial < 40; ++trial) {
    int64_t n = 2 + trial % 8;
    std::vector<double> costs(n);
    for (double &c : costs)
      c = cost(rng);
    for (int64_t stages = 1; stages <= n; ++stages) {
      auto stageOf = balanceUnits(costs, stages);
      ASSERT_EQ(int64_t(stageOf.size()), n);
      // Contiguous, every stage used, in order.
      EXPECT_EQ(stageOf.front(), 0);
      EXPECT_EQ(stageOf.back(), stages - 1);
      std::vector<double> load(stages, 0);
      for (int64_t u = 0; u < n; ++u) {
        if (u > 0)
          EXPECT_TRUE(stageOf[u] == stageOf[u - 1] ||
                      stageOf[u] == stageOf[u - 1] + 1);
        load[stageOf[u]] += costs[u];
      }
      EXPECT_NEAR(*std::max_element(load.begin(), load.end()),
                  bruteForce(costs, stages), 1e-9);
    }
  }
}

TEST(Layout, PrintsCuts) {
  EXPECT_EQ(printLayout({"E", "t", "t", "L"}, {0, 0, 1, 1}), "Et|tL");
}

} // namespace

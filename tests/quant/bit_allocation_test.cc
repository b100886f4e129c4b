// The multiple-choice knapsack of mixed precision (bit_allocation.h)
// against exhaustive search on small random instances, exactly when the
// slack fits the buckets and within its stated bound when it does not, and
// its refusals.
#include "core/quant/bit_allocation.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace quant {
namespace {

using ::testing::HasSubstr;

// The least error over every assignment that fits, by enumeration.
double BruteForce(const std::vector<AllocationGroup>& groups, int64_t budget) {
  double best = std::numeric_limits<double>::infinity();
  std::vector<size_t> index(groups.size(), 0);
  for (;;) {
    int64_t cost = 0;
    double error = 0.0;
    for (size_t g = 0; g < groups.size(); ++g) {
      cost += groups[g].choices[index[g]].cost;
      error += groups[g].choices[index[g]].error;
    }
    if (cost <= budget && error < best) best = error;
    size_t g = 0;
    while (g < groups.size() && ++index[g] == groups[g].choices.size()) {
      index[g++] = 0;
    }
    if (g == groups.size()) return best;
  }
}

// Layer-like groups: more bits cost more and err less (error ~ 4^-bits),
// with some dominated choices mixed in.
std::vector<AllocationGroup> RandomGroups(std::mt19937_64& rng, int count,
                                          int64_t weights_scale) {
  std::uniform_int_distribution<int64_t> weights(1, weights_scale);
  std::uniform_real_distribution<double> sensitivity(0.1, 10.0);
  std::vector<AllocationGroup> groups(count);
  for (AllocationGroup& group : groups) {
    const int64_t n = weights(rng);
    const double s = sensitivity(rng);
    for (int bits : {2, 3, 4, 8}) {
      group.choices.push_back({n * bits + n / 4, s * std::pow(4.0, -bits)});
    }
    group.choices.push_back({n * 5, s});  // Dominated: costly and bad.
  }
  return groups;
}

TEST(BitAllocationTest, ExactWhenTheSlackFitsTheBuckets) {
  std::mt19937_64 rng(42);
  for (int trial = 0; trial < 200; ++trial) {
    const std::vector<AllocationGroup> groups = RandomGroups(rng, 5, 40);
    int64_t low = 0, high = 0;
    for (const AllocationGroup& g : groups) {
      low += g.choices[0].cost;
      high += g.choices[3].cost;
    }
    const int64_t budget =
        low + std::uniform_int_distribution<int64_t>(0, high - low)(rng);
    auto result = AllocateBits(groups, budget);
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(result->unit, 1);
    EXPECT_LE(result->cost, budget);
    EXPECT_DOUBLE_EQ(result->error, BruteForce(groups, budget))
        << "trial " << trial;
  }
}

TEST(BitAllocationTest, CoarseBucketsStayWithinBudgetAndNearTheOptimum) {
  std::mt19937_64 rng(7);
  BitAllocationOptions coarse;
  coarse.buckets = 16;
  for (int trial = 0; trial < 100; ++trial) {
    const std::vector<AllocationGroup> groups = RandomGroups(rng, 6, 5000);
    int64_t low = 0, high = 0;
    for (const AllocationGroup& g : groups) {
      low += g.choices[0].cost;
      high += g.choices[3].cost;
    }
    const int64_t budget = (low + high) / 2;
    auto result = AllocateBits(groups, budget, coarse);
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_GT(result->unit, 1);
    EXPECT_LE(result->cost, budget);
    const double optimum = BruteForce(groups, budget);
    EXPECT_GE(result->error, optimum - 1e-12);
    // Never worse than the optimum for a budget one unit per group
    // smaller: the programme's guarantee.
    const int64_t shrunk =
        budget - static_cast<int64_t>(groups.size()) * result->unit;
    EXPECT_LE(result->error, BruteForce(groups, shrunk) + 1e-12)
        << "trial " << trial;
  }
}

TEST(BitAllocationTest, BudgetChoosesBetweenExtremes) {
  // Two groups of 100 weights; 2 bits or 8.
  std::vector<AllocationGroup> groups(2);
  groups[0] = {"a", {{200, 1.0}, {800, 0.01}}};
  groups[1] = {"b", {{200, 5.0}, {800, 0.05}}};
  auto low = AllocateBits(groups, 400);
  ASSERT_TRUE(low.ok());
  EXPECT_EQ(low->choice, (std::vector<int>{0, 0}));
  // Room for one upgrade: the group whose error falls most.
  auto mid = AllocateBits(groups, 1000);
  ASSERT_TRUE(mid.ok());
  EXPECT_EQ(mid->choice, (std::vector<int>{0, 1}));
  EXPECT_EQ(mid->cost, 1000);
  EXPECT_DOUBLE_EQ(mid->error, 1.05);
  auto high = AllocateBits(groups, 1 << 20);
  ASSERT_TRUE(high.ok());
  EXPECT_EQ(high->choice, (std::vector<int>{1, 1}));
}

TEST(BitAllocationTest, RefusesWhatCannotBeSolved) {
  std::vector<AllocationGroup> groups(2);
  groups[0] = {"model.layers.0.self_attn.qkv_proj", {{300, 1.0}}};
  groups[1] = {"model.layers.0.mlp.down_proj", {{300, 1.0}}};
  auto over = AllocateBits(groups, 500);
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(over.status().message(), HasSubstr("over the budget of 500 by "
                                                 "100"));
  groups[1].choices.push_back({-1, 0.0});
  EXPECT_THAT(AllocateBits(groups, 1000).status().message(),
              HasSubstr("model.layers.0.mlp.down_proj: choice 1 costs -1"));
  groups[1].choices.back() = {10, std::nan("")};
  EXPECT_THAT(AllocateBits(groups, 1000).status().message(),
              HasSubstr("choice 1 has error nan"));
  groups[1].choices.clear();
  EXPECT_THAT(AllocateBits(groups, 1000).status().message(),
              HasSubstr("down_proj: no choices"));
  // No groups: nothing to choose, nothing spent.
  auto none = AllocateBits({}, 0);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->cost, 0);
}

}  // namespace
}  // namespace quant

// Hessian and activation-statistic accumulation in batches.
#include "core/quant/hessian.h"

#include <cmath>
#include <cstdint>

#include "core/base/thread_pool.h"
#include "gtest/gtest.h"
#include "tests/quant/random_data.h"

namespace quant {
namespace {

TEST(HessianTest, BatchesEqualXtXAtOnce) {
  const RowMatrixF x = testing::CorrelatedActivations(300, 40, 5);
  HessianAccumulator acc(40);
  // Uneven batches, including an empty one.
  int64_t begin = 0;
  for (int64_t size : {1, 0, 64, 100, 135}) {
    ASSERT_TRUE(acc.Add(x.middleRows(begin, size)).ok());
    begin += size;
  }
  ASSERT_EQ(begin, 300);
  EXPECT_EQ(acc.token_count(), 300);
  const RowMatrixF h = acc.Finish();
  const RowMatrixD expected = x.cast<double>().transpose() * x.cast<double>();
  EXPECT_LT((h.cast<double>() - expected).norm() / expected.norm(), 1e-6);
  EXPECT_TRUE(h.isApprox(h.transpose(), 0.0f));  // exactly symmetric
}

// K = 600 spans 3 x 3 tiles, the last ones partial: the tiled sum is XᵀX,
// and it is the same bytes on 1, 2 and 5 threads.
TEST(HessianTest, TilesGiveXtXAndTheSameBytesOnAnyThreadCount) {
  const int64_t k = 2 * kHessianTile + 88;
  const RowMatrixF x = testing::CorrelatedActivations(700, k, 11);
  const RowMatrixD expected = x.cast<double>().transpose() * x.cast<double>();
  RowMatrixF one_thread;
  for (int threads : {1, 2, 5}) {
    SCOPED_TRACE(threads);
    ThreadPool pool(threads);
    HessianAccumulator acc(k);
    SplitHessianAccumulator split(k, 0.25);
    for (int64_t begin = 0; begin < 700; begin += 350) {
      ASSERT_TRUE(acc.Add(x.middleRows(begin, 350), &pool).ok());
      ASSERT_TRUE(split.Add(x.middleRows(begin, 350), &pool).ok());
    }
    const RowMatrixF h = acc.Finish();
    EXPECT_LT((h.cast<double>() - expected).norm() / expected.norm(), 1e-6);
    EXPECT_TRUE(h.isApprox(h.transpose(), 0.0f));
    const RowMatrixF both =
        split.train().Finish() + split.validation().Finish();
    EXPECT_LT((both.cast<double>() - expected).norm() / expected.norm(), 1e-6);
    if (threads == 1) {
      one_thread = h;
    } else {
      EXPECT_EQ(h, one_thread);  // Bit for bit.
    }
  }
}

TEST(HessianTest, MergeAddsSums) {
  const RowMatrixF x = testing::RandomNormal(50, 8, 2);
  HessianAccumulator a(8), b(8), all(8);
  ASSERT_TRUE(a.Add(x.topRows(20)).ok());
  ASSERT_TRUE(b.Add(x.bottomRows(30)).ok());
  ASSERT_TRUE(all.Add(x).ok());
  ASSERT_TRUE(a.Merge(b).ok());
  EXPECT_EQ(a.token_count(), 50);
  EXPECT_TRUE(a.Finish().isApprox(all.Finish(), 1e-5f));
  EXPECT_FALSE(a.Merge(HessianAccumulator(9)).ok());
}

TEST(HessianTest, RejectsWrongWidthAndNonFinite) {
  HessianAccumulator acc(8);
  auto s = acc.Add(testing::RandomNormal(4, 7, 1));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("K = 8"), std::string::npos);
  RowMatrixF bad = testing::RandomNormal(4, 8, 1);
  bad(1, 1) = std::nanf("");
  EXPECT_FALSE(acc.Add(bad).ok());
  EXPECT_EQ(acc.token_count(), 0);
}

// The check is spread over a pool in row ranges: a bad value in any range
// (first row, last row, between) is found, and nothing is added.
TEST(HessianTest, PoolFindsANonFiniteValueInEveryRowRange) {
  ThreadPool pool(2);
  const RowMatrixF good = testing::RandomNormal(37, 8, 2);
  for (const int64_t row : {int64_t{0}, int64_t{9}, int64_t{18}, int64_t{36}}) {
    for (const float value : {std::nanf(""), INFINITY, -INFINITY}) {
      RowMatrixF bad = good;
      bad(row, 3) = value;
      HessianAccumulator acc(8);
      EXPECT_FALSE(acc.Add(bad, &pool).ok()) << row;
      EXPECT_EQ(acc.token_count(), 0);
      SplitHessianAccumulator split(8, 0.25);
      EXPECT_FALSE(split.Add(bad, &pool).ok()) << row;
      EXPECT_EQ(split.next_token(), 0);
    }
  }
  HessianAccumulator acc(8);
  ASSERT_TRUE(acc.Add(good, &pool).ok());
  EXPECT_EQ(acc.token_count(), 37);
}

TEST(ActivationStatsTest, MeanAbsolutePerChannel) {
  const RowMatrixF x = testing::RandomNormal(90, 6, 4);
  ActivationStatsAccumulator acc(6);
  ASSERT_TRUE(acc.Add(x.topRows(45)).ok());
  ASSERT_TRUE(acc.Add(x.bottomRows(45)).ok());
  const Eigen::VectorXf expected = x.cwiseAbs().colwise().mean().transpose();
  EXPECT_TRUE(acc.MeanAbs().isApprox(expected, 1e-6f));
  EXPECT_TRUE(ActivationStatsAccumulator(3).MeanAbs().isZero());
}

}  // namespace
}  // namespace quant

namespace quant {
namespace {

TEST(SplitHessianTest, EvenSpreadIndependentOfBatchingAndSumsToAll) {
  const RowMatrixF x = testing::RandomNormal(200, 6, 8);
  SplitHessianAccumulator one(6, 0.25), many(6, 0.25);
  ASSERT_TRUE(one.Add(x).ok());
  for (int64_t b = 0; b < 200; b += 30) {
    ASSERT_TRUE(many.Add(x.middleRows(b, std::min<int64_t>(30, 200 - b))).ok());
  }
  EXPECT_EQ(one.validation().token_count(), 50);
  EXPECT_EQ(one.train().token_count(), 150);
  EXPECT_TRUE(
      one.validation().Finish().isApprox(many.validation().Finish(), 1e-5f));
  // Every 4th token (indices 3, 7, ...) is validation.
  HessianAccumulator expected(6);
  for (int64_t i = 3; i < 200; i += 4) ASSERT_TRUE(expected.Add(x.row(i)).ok());
  EXPECT_TRUE(one.validation().Finish().isApprox(expected.Finish(), 1e-5f));
  HessianAccumulator all(6);
  ASSERT_TRUE(all.Add(x).ok());
  EXPECT_TRUE((one.train().Finish() + one.validation().Finish())
                  .isApprox(all.Finish(), 1e-5f));
}

}  // namespace
}  // namespace quant

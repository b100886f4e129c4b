// AWQ: scales, the α search, folding, clipping search, errors.
#include "core/quant/awq.h"

#include <cmath>

#include "core/quant/hessian.h"
#include "core/quant/rtn.h"
#include "gtest/gtest.h"
#include "tests/quant/random_data.h"

namespace quant {
namespace {

using ::quant::testing::CorrelatedActivations;
using ::quant::testing::RandomNormal;

struct Layer {
  RowMatrixF w;
  RowMatrixF x;
  Eigen::VectorXf stat;
};

Layer MakeLayer(int64_t n, int64_t k, uint32_t seed) {
  Layer l;
  l.w = RandomNormal(n, k, seed, 0.1f);
  l.x = CorrelatedActivations(4 * k, k, seed + 1);
  l.x.leftCols(4) *= 10.0f;  // a few salient channels
  l.stat = l.x.cwiseAbs().colwise().mean().transpose();
  return l;
}

TEST(AwqTest, ScalesHaveMeanOneAndFollowTheStatistic) {
  Eigen::VectorXf stat(4);
  stat << 1.0f, 4.0f, 9.0f, 0.0f;
  const Eigen::VectorXf s = AwqScales(stat, 0.5f);
  EXPECT_NEAR(s.mean(), 1.0f, 1e-6f);
  EXPECT_NEAR(s(1) / s(0), 2.0f, 1e-5f);
  EXPECT_NEAR(s(2) / s(0), 3.0f, 1e-5f);
  EXPECT_GT(s(3), 0.0f);  // a dead channel keeps a finite 1/s
  EXPECT_TRUE(AwqScales(stat, 0.0f).isOnes());
}

TEST(AwqTest, AlphaZeroIsRtnAndTheSearchPicksTheSmallestError) {
  const Layer l = MakeLayer(16, 64, 3);
  auto cal = OutputErrorEvaluator::FromActivations(l.x);
  ASSERT_TRUE(cal.ok());
  AwqOptions o;
  o.grid = {GridKind::kAsym, 4, 32};
  o.alpha_grid = {0.0f};
  auto zero = QuantizeAwq(l.w, l.stat, *cal, o);
  auto rtn = QuantizeRtn(l.w, o.grid, "x");
  ASSERT_TRUE(zero.ok() && rtn.ok());
  EXPECT_EQ(zero->layer.dequantized, rtn->dequantized);
  EXPECT_EQ(zero->effective, rtn->dequantized);

  o.alpha_grid = AwqOptions::DefaultAlphaGrid();
  ASSERT_EQ(o.alpha_grid.size(), 20u);
  EXPECT_FLOAT_EQ(o.alpha_grid.back(), 0.95f);
  auto best = QuantizeAwq(l.w, l.stat, *cal, o);
  ASSERT_TRUE(best.ok());
  ASSERT_EQ(best->alpha_errors.size(), 20u);
  size_t argmin = 0;
  for (size_t i = 1; i < 20; ++i) {
    if (best->alpha_errors[i] < best->alpha_errors[argmin]) argmin = i;
  }
  EXPECT_FLOAT_EQ(best->alpha, o.alpha_grid[argmin]);
  EXPECT_GT(best->alpha, 0.0f);  // salient channels make scaling pay
  EXPECT_LT(best->alpha_errors[argmin], best->alpha_errors[0]);
  EXPECT_NEAR(cal->SquaredError(l.w, best->effective),
              best->alpha_errors[argmin], 1e-6 * best->alpha_errors[argmin]);
  // Folding: (x / s) · (Q_s)ᵀ equals x · effectiveᵀ.
  const RowMatrixF folded_x =
      l.x.array().rowwise() / best->input_scales.transpose().array();
  const RowMatrixF y1 = folded_x * best->layer.dequantized.transpose();
  const RowMatrixF y2 = l.x * best->effective.transpose();
  EXPECT_TRUE(y1.isApprox(y2, 1e-4f));
}

TEST(AwqTest, ClipSearchNeverIncreasesPerRowCalibrationError) {
  const Layer l = MakeLayer(12, 48, 7);
  auto cal = OutputErrorEvaluator::FromActivations(l.x);
  ASSERT_TRUE(cal.ok());
  AwqOptions o;
  o.grid = {GridKind::kSym, 3, 0};  // per row: the group block is all of H
  auto plain = QuantizeAwq(l.w, l.stat, *cal, o);
  o.clip_search = true;
  auto clipped = QuantizeAwq(l.w, l.stat, *cal, o);
  ASSERT_TRUE(plain.ok() && clipped.ok());
  EXPECT_EQ(plain->alpha, clipped->alpha);
  const double e_plain = cal->SquaredError(l.w, plain->effective);
  const double e_clip = cal->SquaredError(l.w, clipped->effective);
  EXPECT_LE(e_clip, e_plain * (1 + 1e-6));
  EXPECT_LT(e_clip, e_plain);  // at 3 bits some row gains from clipping
  // Codes, scales and dequantized values stay consistent after clipping.
  for (int64_t r = 0; r < l.w.rows(); ++r) {
    for (int64_t c = 0; c < l.w.cols(); ++c) {
      const QuantizedLayer& q = clipped->layer;
      EXPECT_EQ(q.dequantized(r, c),
                q.scales(0, r) * (q.codes(r, c) - q.zeros(0, r)));
    }
  }
  // Grouped clipping runs and keeps results finite.
  o.grid = {GridKind::kAsym, 4, 16};
  auto grouped = QuantizeAwq(l.w, l.stat, *cal, o);
  ASSERT_TRUE(grouped.ok());
  EXPECT_TRUE(grouped->effective.allFinite());
}

TEST(AwqTest, BadInputsAreErrorsNamingTheLayer) {
  const Layer l = MakeLayer(4, 16, 9);
  auto cal = OutputErrorEvaluator::FromActivations(l.x);
  ASSERT_TRUE(cal.ok());
  AwqOptions o;
  o.layer_name = "model.layers.1.mlp.down_proj";
  RowMatrixF w = l.w;
  w(0, 0) = std::nanf("");
  auto r = QuantizeAwq(w, l.stat, *cal, o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(o.layer_name), std::string::npos);
  r = QuantizeAwq(l.w, l.stat.head(15), *cal, o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(o.layer_name), std::string::npos);
  o.alpha_grid.clear();
  EXPECT_FALSE(QuantizeAwq(l.w, l.stat, *cal, o).ok());
}

}  // namespace
}  // namespace quant

namespace quant {
namespace {

TEST(AwqTest, RowSubsetSearchAppliesTheChosenAlphaToEveryRow) {
  const RowMatrixF w = testing::RandomNormal(64, 48, 21, 0.1f);
  RowMatrixF x = testing::CorrelatedActivations(200, 48, 22);
  x.leftCols(3) *= 8.0f;
  const Eigen::VectorXf stat = x.cwiseAbs().colwise().mean().transpose();
  auto cal = OutputErrorEvaluator::FromActivations(x);
  ASSERT_TRUE(cal.ok());
  AwqOptions o;
  o.grid = {GridKind::kSym, 4, 16};
  o.search_rows = 16;
  auto sub = QuantizeAwq(w, stat, *cal, o);
  ASSERT_TRUE(sub.ok());
  EXPECT_EQ(sub->layer.rows, 64);
  // Same as a full search restricted to that α.
  AwqOptions fixed = o;
  fixed.search_rows = 0;
  fixed.alpha_grid = {sub->alpha};
  auto full = QuantizeAwq(w, stat, *cal, fixed);
  ASSERT_TRUE(full.ok());
  EXPECT_EQ(sub->effective, full->effective);
  EXPECT_EQ(sub->layer.codes, full->layer.codes);
}

}  // namespace
}  // namespace quant

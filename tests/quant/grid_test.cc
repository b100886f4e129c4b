// Grid conventions (sym, sym-restricted, asym) and round-to-nearest.
#include "core/quant/grid.h"

#include <cmath>

#include "core/base/dtype.h"
#include "core/quant/rtn.h"
#include "gtest/gtest.h"
#include "tests/quant/random_data.h"

namespace quant {
namespace {

TEST(GridTest, ParsesKindsAndRejectsUnknown) {
  EXPECT_EQ(*ParseGridKind("sym"), GridKind::kSym);
  EXPECT_EQ(*ParseGridKind("sym-restricted"), GridKind::kSymRestricted);
  EXPECT_EQ(*ParseGridKind("asym"), GridKind::kAsym);
  auto bad = ParseGridKind("symmetric");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("symmetric"), std::string::npos);
  EXPECT_STREQ(GridKindName(GridKind::kSymRestricted), "sym-restricted");
}

TEST(GridTest, ValidatesBitsAndGroupSize) {
  for (int bits : {2, 3, 4, 8}) {
    EXPECT_TRUE(ValidateGridSpec({GridKind::kSym, bits, 0}).ok());
  }
  auto s = ValidateGridSpec({GridKind::kSym, 5, 0});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("grid.bits"), std::string::npos);
  s = ValidateGridSpec({GridKind::kSym, 4, -1});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("grid.group_size"), std::string::npos);
}

TEST(GridTest, SymParamsFollowKernelConvention) {
  const float v[] = {-1.0f, 0.5f, 0.25f};
  const GroupParams p = ComputeGroupParams({GridKind::kSym, 4, 0}, v, 3);
  EXPECT_FLOAT_EQ(p.scale, 2.0f / 15.0f);
  EXPECT_EQ(p.zero, 8.0f);
  const CodeRange r = CodeRangeFor({GridKind::kSym, 4, 0});
  EXPECT_EQ(r.lo, 0);
  EXPECT_EQ(r.hi, 15);
  // amax comes from |w|, not from clipping non-negative groups.
  const float pos[] = {0.0f, 3.0f};
  EXPECT_FLOAT_EQ(ComputeGroupParams({GridKind::kSym, 4, 0}, pos, 2).scale,
                  6.0f / 15.0f);
}

TEST(GridTest, SymRestrictedUsesFifteenOfSixteenCodes) {
  const float v[] = {0.7f, -0.35f};
  const GroupParams p =
      ComputeGroupParams({GridKind::kSymRestricted, 4, 0}, v, 2);
  EXPECT_FLOAT_EQ(p.scale, 0.7f / 7.0f);
  EXPECT_EQ(p.zero, 8.0f);
  const CodeRange r = CodeRangeFor({GridKind::kSymRestricted, 4, 0});
  EXPECT_EQ(r.lo, 1);   // signed -7
  EXPECT_EQ(r.hi, 15);  // signed +7
  EXPECT_EQ(QuantizeToCode(0.7f, p, r), 15);
  EXPECT_EQ(QuantizeToCode(-0.7f, p, r), 1);
  EXPECT_FLOAT_EQ(DequantizeCode(QuantizeToCode(-0.33f, p, r), p), -0.3f);
}

TEST(GridTest, AsymParamsIncludeZeroInRange) {
  const float v[] = {0.2f, 1.7f};  // lo clamps to 0
  const GroupParams p = ComputeGroupParams({GridKind::kAsym, 4, 0}, v, 2);
  EXPECT_FLOAT_EQ(p.scale, 1.7f / 15.0f);
  EXPECT_EQ(p.zero, 0.0f);
  const float w[] = {-3.0f, 1.0f};
  const GroupParams q = ComputeGroupParams({GridKind::kAsym, 4, 0}, w, 2);
  EXPECT_FLOAT_EQ(q.scale, 4.0f / 15.0f);
  EXPECT_EQ(q.zero, std::nearbyint(3.0f / (4.0f / 15.0f)));
}

TEST(GridTest, F16ScalesAreRepresentableAndChooseCodesWithThem) {
  const float v[] = {-0.123456f, 0.05f, 0.1f};
  GridSpec grid{GridKind::kSym, 4, 0};
  const GroupParams exact = ComputeGroupParams(grid, v, 3);
  grid.f16_scales = true;
  const GroupParams stored = ComputeGroupParams(grid, v, 3);
  EXPECT_NE(stored.scale, exact.scale);
  EXPECT_EQ(stored.scale, HalfToFloat(FloatToHalf(exact.scale)));
  // Tiny ranges keep a positive scale; out-of-range ones are left to the
  // packer to refuse.
  const float tiny[] = {1e-12f, -1e-12f};
  EXPECT_GT(ComputeGroupParams(grid, tiny, 2).scale, 0.0f);
  const float huge[] = {1e9f, -1e9f};
  EXPECT_EQ(ComputeGroupParams(grid, huge, 2).scale, 2e9f / 15.0f);
  // Asymmetric zeros are chosen with the stored scale.
  grid.kind = GridKind::kAsym;
  const float w[] = {-3.0f, 1.1f};
  const GroupParams a = ComputeGroupParams(grid, w, 2);
  EXPECT_EQ(a.scale, HalfToFloat(FloatToHalf(4.1f / 15.0f)));
  EXPECT_EQ(a.zero, std::nearbyint(3.0f / a.scale));
}

TEST(GridTest, ZeroSliceGetsScaleOne) {
  const float z[] = {0.0f, 0.0f, 0.0f};
  for (GridKind kind :
       {GridKind::kSym, GridKind::kSymRestricted, GridKind::kAsym}) {
    const GroupParams p = ComputeGroupParams({kind, 4, 0}, z, 3);
    EXPECT_EQ(p.scale, 1.0f);
    const CodeRange r = CodeRangeFor({kind, 4, 0});
    EXPECT_EQ(DequantizeCode(QuantizeToCode(0.0f, p, r), p), 0.0f);
  }
}

TEST(GridTest, RoundTripErrorAtMostHalfStepForEveryKindAndWidth) {
  const RowMatrixF w = testing::RandomNormal(16, 96, 7);
  for (GridKind kind :
       {GridKind::kSym, GridKind::kSymRestricted, GridKind::kAsym}) {
    for (int bits : {2, 3, 4, 8}) {
      const GridSpec grid{kind, bits, 32};
      auto q = QuantizeRtn(w, grid, "layer");
      ASSERT_TRUE(q.ok());
      const CodeRange range = CodeRangeFor(grid);
      for (int64_t r = 0; r < w.rows(); ++r) {
        for (int64_t c = 0; c < w.cols(); ++c) {
          const int code = q->codes(r, c);
          ASSERT_GE(code, range.lo);
          ASSERT_LE(code, range.hi);
          const float scale = q->scales(c / 32, r);
          const float zero = q->zeros(c / 32, r);
          EXPECT_EQ(q->dequantized(r, c), scale * (code - zero));
          // sym's top code is unused on the positive side (2^(b-1)-1 steps
          // above zero against 2^(b-1) below), so the largest positive value
          // may be clamped by up to one step.
          const float bound = kind == GridKind::kSym ? scale : 0.5001f * scale;
          EXPECT_LE(std::fabs(q->dequantized(r, c) - w(r, c)), bound)
              << GridKindName(kind) << " bits " << bits;
        }
      }
      if (kind == GridKind::kAsym) {
        EXPECT_GE(q->zeros.minCoeff(), 0.0f);
        EXPECT_LE(q->zeros.maxCoeff(), static_cast<float>((1 << bits) - 1));
        EXPECT_TRUE((q->zeros.array() == q->zeros.array().round()).all());
      }
    }
  }
}

TEST(RtnTest, PartialLastGroup) {
  const RowMatrixF w = testing::RandomNormal(8, 172, 3);
  auto q = QuantizeRtn(w, {GridKind::kSym, 4, 32}, "blk.0.down");
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->scales.rows(), 6);  // 5 full groups + 12 columns
  EXPECT_EQ(q->g_idx[171], 5);
  EXPECT_EQ(q->g_idx[160], 5);
  EXPECT_EQ(q->g_idx[159], 4);
  // The last group's scale is computed from its 12 columns only.
  for (int64_t r = 0; r < 8; ++r) {
    const float amax = w.row(r).tail(12).cwiseAbs().maxCoeff();
    EXPECT_FLOAT_EQ(q->scales(5, r), 2.0f * amax / 15.0f);
  }
}

TEST(RtnTest, AllZeroRowGetsScaleOneAndZeros) {
  RowMatrixF w = testing::RandomNormal(4, 64, 1);
  w.row(2).setZero();
  for (GridKind kind :
       {GridKind::kSym, GridKind::kSymRestricted, GridKind::kAsym}) {
    auto q = QuantizeRtn(w, {kind, 4, 0}, "layer");
    ASSERT_TRUE(q.ok());
    EXPECT_EQ(q->scales(0, 2), 1.0f);
    EXPECT_TRUE(q->dequantized.row(2).isZero(0.0f));
    EXPECT_TRUE(q->dequantized.allFinite());
  }
}

TEST(RtnTest, NonFiniteWeightIsAnErrorNamingTheLayer) {
  RowMatrixF w = testing::RandomNormal(4, 16, 1);
  w(3, 5) = std::nanf("");
  auto q = QuantizeRtn(w, {GridKind::kSym, 4, 0}, "model.layers.3.mlp.up_proj");
  ASSERT_FALSE(q.ok());
  EXPECT_EQ(q.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(q.status().message().find("model.layers.3.mlp.up_proj"),
            std::string::npos);
  EXPECT_NE(q.status().message().find("[3, 5]"), std::string::npos);
  w(3, 5) = INFINITY;
  EXPECT_FALSE(QuantizeRtn(w, {GridKind::kSym, 4, 0}, "x").ok());
}

}  // namespace
}  // namespace quant

// Audit metrics: H-based errors equal the direct definitions; gain,
// flattery, diagnostics and flags.
#include "core/quant/audit.h"

#include <cmath>
#include <tuple>
#include <vector>

#include "core/quant/gptq.h"
#include "core/quant/rtn.h"
#include "gtest/gtest.h"
#include "tests/quant/random_data.h"

namespace quant {
namespace {

using ::quant::testing::CorrelatedActivations;
using ::quant::testing::GramOf;
using ::quant::testing::RandomNormal;

TEST(OutputErrorTest, HessianFormEqualsDirectDefinition) {
  const RowMatrixF w = RandomNormal(20, 40, 1, 0.1f);
  const RowMatrixF q = RandomNormal(20, 40, 2, 0.01f) + w;
  for (int64_t t : {10, 40, 200}) {  // T < K keeps X, T > K forms H
    const RowMatrixF x = CorrelatedActivations(t, 40, 3);
    auto e = OutputErrorEvaluator::FromActivations(x);
    ASSERT_TRUE(e.ok());
    EXPECT_EQ(e->uses_hessian(), t > 40);
    const RowMatrixD y = x.cast<double>() * (w - q).cast<double>().transpose();
    const RowMatrixD ref = x.cast<double>() * w.cast<double>().transpose();
    EXPECT_NEAR(e->SquaredError(w, q), y.squaredNorm(), 1e-5 * y.squaredNorm());
    EXPECT_NEAR(e->OutputMse(w, q), y.array().square().mean(),
                1e-5 * y.array().square().mean());
    EXPECT_NEAR(e->RelativeError(w, q),
                std::sqrt(y.squaredNorm() / ref.squaredNorm()), 1e-5);
    auto from_h = OutputErrorEvaluator::FromHessian(GramOf(x), t);
    ASSERT_TRUE(from_h.ok());
    EXPECT_NEAR(from_h->OutputMse(w, q), e->OutputMse(w, q),
                1e-5 * e->OutputMse(w, q));
    EXPECT_TRUE(from_h->GramBlock(3, 5).isApprox(e->GramBlock(3, 5), 1e-4f));
  }
}

TEST(AuditTest, RhoRmsIsZeroForDiagonalAndOneForRankOne) {
  RowMatrixF d = RowMatrixF::Zero(5, 5);
  d.diagonal() << 1, 2, 3, 0, 5;
  EXPECT_EQ(RmsOffDiagonalCorrelation(d), 0.0);
  EXPECT_EQ(CountDeadChannels(d), 1);
  const RowMatrixF v = RandomNormal(6, 1, 4);
  EXPECT_NEAR(RmsOffDiagonalCorrelation(v * v.transpose()), 1.0, 1e-6);
}

TEST(AuditTest, BitsPerWeightCountsPartialGroups) {
  EXPECT_DOUBLE_EQ(BitsPerWeight({GridKind::kSym, 4, 128}, 4096, 16, 4),
                   4.0 + 20.0 / 128.0);
  // K = 172, groups of 32: 6 groups' metadata over 172 columns.
  EXPECT_DOUBLE_EQ(BitsPerWeight({GridKind::kAsym, 3, 32}, 172, 16, 3),
                   3.0 + 6.0 * 19.0 / 172.0);
  EXPECT_DOUBLE_EQ(BitsPerWeight({GridKind::kSym, 8, 0}, 64, 16, 0), 8.25);
}

TEST(AuditTest, GptqAuditGainsFlagsAndDiagnostics) {
  const int64_t k = 64;
  const RowMatrixF w = RandomNormal(32, k, 5, 0.1f);
  RowMatrixF x_cal = CorrelatedActivations(48, k, 6);  // T < K: rank deficient
  x_cal.col(9).setZero();
  const RowMatrixF x_held = CorrelatedActivations(2000, k, 7);
  const RowMatrixF h = GramOf(x_cal);
  GptqOptions o;
  o.grid = {GridKind::kSym, 4, 32};
  o.damp_percent = 0.001;
  auto g = QuantizeGptq(w, h, o);
  ASSERT_TRUE(g.ok());
  auto cal = OutputErrorEvaluator::FromHessian(h, 48);
  auto held = OutputErrorEvaluator::FromActivations(x_held);
  ASSERT_TRUE(cal.ok() && held.ok());
  AuditInputs in{
      "blk.0.q", "gptq",       o.grid,         w, g->layer.dequantized, &*cal,
      &*held,    g->damp_used, g->damp_retries};
  auto a = AuditLayer(in);
  ASSERT_TRUE(a.ok()) << a.status();
  auto rtn = QuantizeRtn(w, o.grid, "x");
  ASSERT_TRUE(rtn.ok());
  EXPECT_DOUBLE_EQ(a->rtn_weight_mse, WeightMse(w, rtn->dequantized));
  EXPECT_DOUBLE_EQ(a->method_weight_mse, WeightMse(w, g->layer.dequantized));
  EXPECT_NEAR(a->gain_calibration,
              a->rtn_calibration.output_mse / a->method_calibration.output_mse,
              1e-12);
  EXPECT_NEAR(a->flattery, a->gain_calibration / a->gain_heldout, 1e-12);
  // Fitting 48 tokens with 64 free columns per row: a big calibration gain
  // that does not survive on held-out data.
  EXPECT_GT(a->gain_calibration, 2.0);
  EXPECT_GT(a->flattery, 1.5);
  EXPECT_TRUE(a->overfit);
  EXPECT_TRUE(a->rank_deficient);
  EXPECT_EQ(a->hessian.tokens, 48);
  EXPECT_EQ(a->hessian.dead_channels, 1);
  EXPECT_DOUBLE_EQ(a->hessian.tokens_per_input, 48.0 / 64.0);
  EXPECT_DOUBLE_EQ(a->hessian.inv_sqrt_tokens, 1.0 / std::sqrt(48.0));
  EXPECT_EQ(a->hessian.damp_used, 0.001);
  EXPECT_EQ(a->worse_than_rtn_heldout,
            a->method_heldout.output_mse > a->rtn_heldout.output_mse);
  EXPECT_DOUBLE_EQ(a->bits_per_weight, 4.0 + 2.0 * 20.0 / 64.0);
  // Auditing RTN itself: gain 1, flattery 1, not worse.
  AuditInputs rtn_in{"blk.0.q", "rtn",  o.grid, w, rtn->dequantized,
                     &*cal,     &*held, 0.0,    0};
  auto self = AuditLayer(rtn_in);
  ASSERT_TRUE(self.ok());
  EXPECT_DOUBLE_EQ(self->gain_heldout, 1.0);
  EXPECT_DOUBLE_EQ(self->flattery, 1.0);
  EXPECT_FALSE(self->worse_than_rtn_heldout);
}

// The audit in two parts (a round's reduce, then the block's held-out
// audit) gives AuditLayer's result; the held-out part is measured once,
// for the layer it was started for, and each part needs only its split.
TEST(AuditTest, CalibrationThenHeldoutPartEqualsTheWholeAudit) {
  const int64_t k = 64;
  const RowMatrixF w = RandomNormal(32, k, 5, 0.1f);
  const RowMatrixF x_cal = CorrelatedActivations(300, k, 6);
  const RowMatrixF x_held = CorrelatedActivations(500, k, 7);
  const RowMatrixF h = GramOf(x_cal);
  GptqOptions o;
  o.grid = {GridKind::kAsym, 4, 32};
  auto g = QuantizeGptq(w, h, o);
  ASSERT_TRUE(g.ok());
  auto cal = OutputErrorEvaluator::FromHessian(h, 300);
  auto held = OutputErrorEvaluator::FromHessian(GramOf(x_held), 500);
  ASSERT_TRUE(cal.ok() && held.ok());
  const RowMatrixF previous = RandomNormal(32, k, 8, 0.1f);
  AuditInputs in{"blk.0.q",
                 "gptq",
                 o.grid,
                 w,
                 g->layer.dequantized,
                 &*cal,
                 &*held,
                 g->damp_used,
                 g->damp_retries,
                 nullptr,
                 nullptr,
                 &previous};
  auto whole = AuditLayer(in);
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_FALSE(whole->heldout_pending);

  AuditInputs calibration_only = in;
  calibration_only.heldout = nullptr;
  auto part = AuditLayerCalibration(calibration_only);
  ASSERT_TRUE(part.ok()) << part.status();
  EXPECT_TRUE(part->heldout_pending);
  EXPECT_EQ(part->gain_calibration, whole->gain_calibration);
  EXPECT_EQ(part->method_heldout.output_mse, 0.0);
  EXPECT_FALSE(part->previous_heldout.has_value());

  AuditInputs heldout_only = in;
  heldout_only.calibration = nullptr;
  heldout_only.damp_used = 0.0;  // Not read by the held-out part.
  AuditInputs wrong_layer = heldout_only;
  wrong_layer.layer = "blk.0.k";
  LayerAudit kept = *part;
  absl::Status other = AddHeldoutAudit(wrong_layer, {}, &kept);
  EXPECT_EQ(other.code(), absl::StatusCode::kFailedPrecondition) << other;
  EXPECT_TRUE(kept.heldout_pending) << "a refused part changes nothing";
  ASSERT_TRUE(AddHeldoutAudit(heldout_only, {}, &*part).ok());
  EXPECT_FALSE(part->heldout_pending);
  for (const auto& [name, got, want] :
       std::vector<std::tuple<const char*, double, double>>{
           {"method_heldout", part->method_heldout.output_mse,
            whole->method_heldout.output_mse},
           {"method_heldout rel", part->method_heldout.relative_error,
            whole->method_heldout.relative_error},
           {"rtn_heldout", part->rtn_heldout.output_mse,
            whole->rtn_heldout.output_mse},
           {"gain_heldout", part->gain_heldout, whole->gain_heldout},
           {"flattery", part->flattery, whole->flattery},
           {"previous", part->previous_heldout->output_mse,
            whole->previous_heldout->output_mse},
           {"gain_calibration", part->gain_calibration,
            whole->gain_calibration},
           {"rtn_weight_mse", part->rtn_weight_mse, whole->rtn_weight_mse},
           {"rho_rms", part->hessian.rho_rms, whole->hessian.rho_rms},
           {"damp_used", part->hessian.damp_used, whole->hessian.damp_used}}) {
    EXPECT_EQ(got, want) << name;
  }
  EXPECT_EQ(part->overfit, whole->overfit);
  EXPECT_EQ(part->worse_than_rtn_heldout, whole->worse_than_rtn_heldout);
  EXPECT_EQ(part->rank_deficient, whole->rank_deficient);

  absl::Status twice = AddHeldoutAudit(heldout_only, {}, &*part);
  EXPECT_EQ(twice.code(), absl::StatusCode::kFailedPrecondition) << twice;
  AuditInputs no_heldout = heldout_only;
  no_heldout.heldout = nullptr;
  kept = LayerAudit();
  kept.layer = "blk.0.q";
  kept.heldout_pending = true;
  absl::Status missing = AddHeldoutAudit(no_heldout, {}, &kept);
  EXPECT_EQ(missing.code(), absl::StatusCode::kInvalidArgument) << missing;
  EXPECT_NE(missing.message().find("held-out activations are required"),
            std::string::npos)
      << missing;
  EXPECT_FALSE(AuditLayerCalibration(heldout_only).ok())
      << "the calibration part needs the calibration split";
}

TEST(AuditTest, MissingInputsAndShapeMismatchAreErrors) {
  const RowMatrixF w = RandomNormal(4, 8, 1);
  auto cal = OutputErrorEvaluator::FromActivations(RandomNormal(20, 8, 2));
  auto other = OutputErrorEvaluator::FromActivations(RandomNormal(20, 9, 3));
  ASSERT_TRUE(cal.ok() && other.ok());
  AuditInputs in{"lyr", "gptq", {}, w, w, &*cal, nullptr, 0.0, 0};
  auto a = AuditLayer(in);
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("lyr"), std::string::npos);
  in.heldout = &*other;
  a = AuditLayer(in);
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("held-out K 9"), std::string::npos);
}

}  // namespace
}  // namespace quant

namespace quant {
namespace {

TEST(AuditTest, OutliersAreFarAboveTheirTypeMedian) {
  std::vector<LayerAudit> audits(5);
  const char* names[] = {"m.layers.0.mlp.down_proj", "m.layers.1.mlp.down_proj",
                         "m.layers.2.mlp.down_proj",
                         "m.layers.0.self_attn.q_proj",
                         "m.layers.1.mlp.down_proj_extra"};
  const double errors[] = {0.01, 0.012, 0.05, 0.9, 0.9};
  for (int i = 0; i < 5; ++i) {
    audits[i].layer = names[i];
    audits[i].method_heldout.relative_error = errors[i];
  }
  MarkOutliers(&audits, 3.0);
  EXPECT_FALSE(audits[0].outlier);
  EXPECT_FALSE(audits[1].outlier);
  EXPECT_TRUE(audits[2].outlier);   // 0.05 > 3 x median 0.012
  EXPECT_FALSE(audits[3].outlier);  // alone in its type
  EXPECT_FALSE(audits[4].outlier);
  EXPECT_EQ(LayerTypeOfName(names[3]), "q_proj");
}

}  // namespace
}  // namespace quant

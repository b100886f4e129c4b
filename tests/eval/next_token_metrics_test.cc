// Tests for the end-to-end gate metrics.
#include "core/eval/next_token_metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace quant {
namespace {

TEST(NextTokenMetricsTest, HandComputedTwoWordVocabulary) {
  RowMatrixF reference(1, 2), quantized(1, 2);
  reference << 0.0f, 0.0f;                               // p = (1/2, 1/2)
  quantized << static_cast<float>(std::log(3.0)), 0.0f;  // q = (3/4, 1/4)
  NextTokenMetricsAccumulator acc;
  ASSERT_TRUE(acc.Add(reference, quantized, {0}).ok());
  const NextTokenMetrics m = acc.Result();
  EXPECT_EQ(m.tokens, 1);
  EXPECT_NEAR(m.reference_nll, std::log(2.0), 1e-7);
  EXPECT_NEAR(m.quantized_nll, -std::log(0.75), 1e-7);
  EXPECT_NEAR(m.mean_kl, 0.5 * std::log(4.0 / 3.0), 1e-7);
  EXPECT_NEAR(m.ppl_ratio, (1 / 0.75) / 2.0, 1e-6);
  // Ties in the reference resolve to the first index, as does the quantized
  // argmax here.
  EXPECT_EQ(m.top1_agreement, 1.0);
}

TEST(NextTokenMetricsTest, IdenticalLogitsGiveZeroKlAndRatioOne) {
  RowMatrixF logits = RowMatrixF::Random(6, 11) * 4.0f;
  NextTokenMetricsAccumulator acc;
  ASSERT_TRUE(acc.Add(logits, logits, {0, 3, -1, 10, 5, 2}).ok());
  const NextTokenMetrics m = acc.Result();
  EXPECT_EQ(m.tokens, 5);  // The -1 row is not scored.
  EXPECT_NEAR(m.mean_kl, 0.0, 1e-12);
  EXPECT_DOUBLE_EQ(m.ppl_ratio, 1.0);
  EXPECT_EQ(m.top1_agreement, 1.0);
}

TEST(NextTokenMetricsTest, DisagreementAndBatchesAccumulate) {
  RowMatrixF reference(2, 3), quantized(2, 3);
  reference << 5, 0, 0, 0, 5, 0;
  quantized << 5, 0, 0, 0, 0, 5;  // Second row's argmax moves.
  NextTokenMetricsAccumulator acc;
  ASSERT_TRUE(acc.Add(reference.topRows(1), quantized.topRows(1), {0}).ok());
  ASSERT_TRUE(
      acc.Add(reference.bottomRows(1), quantized.bottomRows(1), {1}).ok());
  const NextTokenMetrics m = acc.Result();
  EXPECT_EQ(m.tokens, 2);
  EXPECT_DOUBLE_EQ(m.top1_agreement, 0.5);
  EXPECT_GT(m.mean_kl, 0.0);
  EXPECT_GT(m.ppl_ratio, 1.0);
}

TEST(NextTokenMetricsTest, BadShapesAndTargetsAreErrors) {
  RowMatrixF a(2, 3), b(2, 4);
  a.setZero();
  b.setZero();
  NextTokenMetricsAccumulator acc;
  EXPECT_FALSE(acc.Add(a, b, {0, 0}).ok());
  EXPECT_FALSE(acc.Add(a, a, {0}).ok());
  const absl::Status status = acc.Add(a, a, {0, 3});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("target id 3"), std::string::npos);
}

// What the streamed evaluation does with a batch: rows scored in ranges
// (on any threads), the scores added in row order, give Add's numbers
// exactly; a bad target scores nothing.
TEST(NextTokenMetricsTest, ScoresAddedInRowOrderEqualAdd) {
  const RowMatrixF reference = RowMatrixF::Random(37, 13) * 3.0f;
  const RowMatrixF quantized = reference + RowMatrixF::Random(37, 13) * 0.5f;
  std::vector<int32_t> targets;
  for (int r = 0; r < 37; ++r) targets.push_back(r % 5 == 2 ? -1 : r % 13);
  NextTokenMetricsAccumulator whole;
  ASSERT_TRUE(whole.Add(reference, quantized, targets).ok());
  NextTokenMetricsAccumulator ranges;
  for (int first = 0; first < 37; first += 8) {
    const int count = std::min(8, 37 - first);
    absl::StatusOr<std::vector<NextTokenScore>> scores = ScoreNextTokens(
        reference.middleRows(first, count), quantized.middleRows(first, count),
        absl::MakeConstSpan(targets).subspan(first, count));
    ASSERT_TRUE(scores.ok()) << scores.status();
    ranges.AddScores(*scores);
  }
  const NextTokenMetrics a = whole.Result(), b = ranges.Result();
  EXPECT_EQ(a.tokens, 30);
  EXPECT_EQ(b.tokens, a.tokens);
  EXPECT_EQ(b.reference_nll, a.reference_nll);
  EXPECT_EQ(b.quantized_nll, a.quantized_nll);
  EXPECT_EQ(b.mean_kl, a.mean_kl);
  EXPECT_EQ(b.top1_agreement, a.top1_agreement);

  targets[20] = 13;  // Outside the vocabulary, after scorable rows.
  NextTokenMetricsAccumulator bad;
  EXPECT_FALSE(bad.Add(reference, quantized, targets).ok());
  EXPECT_EQ(bad.Result().tokens, 0);
}

}  // namespace
}  // namespace quant

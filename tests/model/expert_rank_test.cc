// The expert rank arithmetic against the seed document's worked example and
// the published Qwen3-30B-A3B and Mixtral shapes.
#include "core/model/expert_rank.h"

#include <string>

#include "core/base/file_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/test_env.h"

namespace quant {
namespace {

using ::testing::HasSubstr;

TEST(ExpertRankTest, SeedWorkedExample) {
  // 64 experts, top-2, 128 x 2048 tokens: 262,144 x 2 / 64 = 8,192.
  ModelConfig config;
  config.hidden_size = 4096;
  config.intermediate_size = 11008;
  config.num_hidden_layers = 1;
  config.num_attention_heads = 32;
  config.head_dim = 128;
  config.moe.emplace();
  config.moe->num_experts = 64;
  config.moe->experts_per_token = 2;
  config.moe->expert_intermediate_size = 11008;
  const auto estimate = EstimateExpertRank(config, 128 * 2048);
  ASSERT_TRUE(estimate.has_value());
  EXPECT_DOUBLE_EQ(estimate->tokens_per_expert, 8192.0);
  EXPECT_FALSE(estimate->gate_up_rank_deficient());  // 8192 >= 4096
  EXPECT_TRUE(estimate->down_rank_deficient());      // 8192 < 11008
  // 262,144 x 11,008 / 8,192 = 352,256 tokens give the average expert K.
  EXPECT_EQ(estimate->TokensForFullRank(), 352256);
  const std::string text = DescribeExpertRank(*estimate);
  EXPECT_THAT(text, HasSubstr("262144 calibration tokens x top-2 / 64 "
                              "experts = 8192 tokens per expert"));
  EXPECT_THAT(text, HasSubstr("expert down: K = 11008, rank-deficient"));
  EXPECT_THAT(text, HasSubstr("reaches K at about 352256"));

  config.moe.reset();
  EXPECT_FALSE(EstimateExpertRank(config, 1000).has_value());
}

TEST(ExpertRankTest, PublishedShapes) {
  // Qwen3-30B-A3B: 128 experts, top-8, hidden 2048, expert 768.
  absl::StatusOr<std::string> text = ReadFileToString(
      testing::FixturesDir() + "/model/configs/qwen3-30b-a3b.json");
  ASSERT_TRUE(text.ok()) << text.status();
  absl::StatusOr<ModelConfig> qwen = ParseModelConfig(*text);
  ASSERT_TRUE(qwen.ok()) << qwen.status();
  auto estimate = EstimateExpertRank(*qwen, 128 * 2048);
  ASSERT_TRUE(estimate.has_value());
  EXPECT_DOUBLE_EQ(estimate->tokens_per_expert, 16384.0);
  EXPECT_EQ(estimate->gate_up_k, 2048);
  EXPECT_EQ(estimate->down_k, 768);
  EXPECT_FALSE(estimate->gate_up_rank_deficient());
  // Every layer sparse: the widest dense input is the attention's
  // (o_proj reads 32 heads x 128 = 4096).
  EXPECT_EQ(estimate->widest_dense_k, 4096);
  // 512 tokens: 512 x 8 / 128 = 32 per expert, below both K.
  estimate = EstimateExpertRank(*qwen, 512);
  EXPECT_TRUE(estimate->gate_up_rank_deficient());
  EXPECT_TRUE(estimate->down_rank_deficient());
}

}  // namespace
}  // namespace quant

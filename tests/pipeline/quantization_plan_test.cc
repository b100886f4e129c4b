// PlanQuantization's refusal of recipes that give the parts of a layer
// runtimes fuse (q/k/v into qkv_proj, gate/up into gate_up_proj) different
// packed settings: vLLM would not load such a checkpoint.
#include "core/pipeline/quantization_plan.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "core/model/model_config.h"
#include "core/recipe/recipe.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/pipeline/pipeline_fixture.h"

namespace quant {
namespace {

using ::testing::AllOf;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;

LayerOverride Bits(const std::string& match, int bits) {
  LayerOverride o;
  o.match = match;
  o.bits = bits;
  return o;
}

TEST(QuantizationPlanTest, OneMemberOfQkvWithOtherBitsIsRefusedNamingTheGroup) {
  Recipe recipe;
  recipe.overrides.push_back(
      Bits("model\\.layers\\.1\\.self_attn\\.q_proj", 8));
  auto plan = PlanQuantization(testing::TwoBlockConfig(), recipe);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(plan.status().message(),
              AllOf(HasSubstr("model.layers.1.self_attn.k_proj"),
                    HasSubstr("vLLM's qkv_proj"),
                    HasSubstr("q_proj gets 8 bits, group size 128, sym "
                              "(overrides[0])"),
                    HasSubstr("k_proj gets 4 bits, group size 128, sym "
                              "(the recipe)")));
}

TEST(QuantizationPlanTest, IgnoringGateButNotUpIsRefused) {
  Recipe recipe;
  recipe.ignore.push_back(".*\\.0\\.mlp\\.gate_proj");
  auto plan = PlanQuantization(testing::TwoBlockConfig(), recipe);
  ASSERT_FALSE(plan.ok());
  EXPECT_THAT(
      plan.status().message(),
      AllOf(HasSubstr("model.layers.0.mlp.up_proj"), HasSubstr("gate_up_proj"),
            HasSubstr("gate_proj gets unquantized (ignore[1]"),
            HasSubstr("up_proj gets 4 bits")));
}

TEST(QuantizationPlanTest, GroupSizeOrGridDifferingInsideAFusedLayerIsRefused) {
  Recipe recipe;
  LayerOverride group = Bits(".*up_proj", 4);
  group.group_size = 64;
  recipe.overrides.push_back(group);
  auto plan = PlanQuantization(testing::TwoBlockConfig(), recipe);
  ASSERT_FALSE(plan.ok());
  EXPECT_THAT(plan.status().message(), HasSubstr("group size 64"));

  Recipe asym;
  LayerOverride grid;
  grid.match = ".*v_proj";
  grid.grid = QuantGrid::kAsym;
  asym.overrides.push_back(grid);
  plan = PlanQuantization(testing::TwoBlockConfig(), asym);
  ASSERT_FALSE(plan.ok());
  EXPECT_THAT(plan.status().message(), HasSubstr("v_proj gets 4 bits, group "
                                                 "size 128, asym"));
}

TEST(QuantizationPlanTest, WholeFusedLayersAndUnfusedLayersMayDiffer) {
  Recipe recipe;
  // All of block 0's q/k/v at 8 bits, both of its gate/up kept, o_proj and
  // down_proj on their own settings, sym and sym-restricted mixed (both
  // pack symmetric).
  recipe.overrides.push_back(
      Bits("model\\.layers\\.0\\.self_attn\\.[qkv]_proj", 8));
  LayerOverride keep;
  keep.match = "model\\.layers\\.0\\.mlp\\.(gate|up)_proj";
  keep.keep_unquantized = true;
  recipe.overrides.push_back(keep);
  recipe.overrides.push_back(Bits(".*o_proj", 3));
  recipe.overrides.push_back(Bits(".*down_proj", 8));
  LayerOverride restricted;
  restricted.match = ".*\\.1\\.self_attn\\.k_proj";
  restricted.grid = QuantGrid::kSymRestricted;
  recipe.overrides.push_back(restricted);
  auto plan = PlanQuantization(testing::TwoBlockConfig(), recipe);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->blocks[0].at(LayerType::kVProj).bits, 8);
  EXPECT_TRUE(plan->blocks[0].at(LayerType::kUpProj).keep_unquantized);
  EXPECT_EQ(plan->blocks[1].at(LayerType::kOProj).bits, 3);
}

// A mixture-of-experts model is refused before any work, saying why,
// rather than quantizing its attention and leaving the experts behind.
ModelConfig MixtralConfig() {
  ModelConfig config = testing::TwoBlockConfig();
  config.architecture = Architecture::kMixtral;
  config.moe.emplace();
  config.moe->num_experts = 4;
  config.moe->experts_per_token = 2;
  config.moe->expert_intermediate_size = config.intermediate_size;
  return config;
}

TEST(QuantizationPlanTest,
     MixtureOfExpertsGetsOneSettingPerBlockForItsExperts) {
  Recipe recipe;
  recipe.group_size = 32;
  // Block 1's experts at 8 bits: allowed, as every expert of it agrees.
  recipe.overrides.push_back(
      Bits("model\\.layers\\.1\\.block_sparse_moe\\.experts\\..*", 8));
  auto plan = PlanQuantization(MixtralConfig(), recipe);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->expert_blocks.size(), 2u);
  for (int b = 0; b < 2; ++b) {
    SCOPED_TRACE(b);
    // q, k, v, o only; the experts' gate (w1), up (w3) and down (w2) apart.
    EXPECT_EQ(plan->blocks[b].size(), 4u);
    EXPECT_EQ(plan->blocks[b].count(LayerType::kGateProj), 0u);
    ASSERT_EQ(plan->expert_blocks[b].size(), 3u);
    for (const auto& [type, s] : plan->expert_blocks[b]) {
      EXPECT_FALSE(s.keep_unquantized);
      EXPECT_EQ(s.bits, b == 0 ? 4 : 8);
      EXPECT_EQ(s.group_size, 32);
    }
    EXPECT_EQ(
        plan->expert_blocks[b].at(LayerType::kDownProj).name,
        absl::StrCat("model.layers.", b, ".block_sparse_moe.experts.0.w2"));
  }
  // A dense model's expert plan is empty.
  auto dense = PlanQuantization(testing::TwoBlockConfig(), Recipe());
  ASSERT_TRUE(dense.ok()) << dense.status();
  EXPECT_TRUE(dense->expert_blocks[0].empty());
}

TEST(QuantizationPlanTest, ExpertRankArithmeticWarnsBeforeAnyWork) {
  // 4 x 16 tokens x top-2 / 4 experts = 32 per expert, below both K.
  Recipe recipe;
  recipe.calibration.samples = 4;
  recipe.calibration.seq_len = 16;
  auto plan = PlanQuantization(MixtralConfig(), recipe);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(plan->warnings,
              Contains(AllOf(HasSubstr("experts: 64 calibration tokens x "
                                       "top-2 / 4 experts = 32 tokens per "
                                       "expert on average"),
                             HasSubstr("of gate/up and K = "),
                             HasSubstr("routing: all_experts"))));
  // Every expert on every token: no warning; nor with the experts kept.
  recipe.moe.emplace();
  recipe.moe->routing = ExpertRouting::kAllExperts;
  plan = PlanQuantization(MixtralConfig(), recipe);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(plan->warnings,
              Not(Contains(HasSubstr("tokens per expert on average"))));
  recipe.moe.reset();
  recipe.ignore.push_back(".*experts\\..*");
  plan = PlanQuantization(MixtralConfig(), recipe);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(plan->warnings,
              Not(Contains(HasSubstr("tokens per expert on average"))));
}

TEST(QuantizationPlanTest, ExpertsOfOneBlockThatDisagreeAreRefused) {
  Recipe recipe;
  recipe.overrides.push_back(Bits(".*\\.experts\\.3\\.w2", 8));
  auto plan = PlanQuantization(MixtralConfig(), recipe);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(plan.status().message(),
              AllOf(HasSubstr("model.layers.0.block_sparse_moe.experts.3.w2"),
                    HasSubstr("fused-MoE layer "
                              "model.layers.0.block_sparse_moe.experts"),
                    HasSubstr("experts.0.w2 gets 4 bits"),
                    HasSubstr("experts.3.w2 gets 8 bits")));
  // Ignoring one expert is the same mistake; ignoring all of them is fine.
  recipe.overrides.clear();
  recipe.ignore.push_back(".*experts\\.1\\..*");
  plan = PlanQuantization(MixtralConfig(), recipe);
  ASSERT_FALSE(plan.ok());
  EXPECT_THAT(plan.status().message(), HasSubstr("unquantized (ignore[1]"));
  recipe.ignore.back() = ".*experts\\..*";
  plan = PlanQuantization(MixtralConfig(), recipe);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(plan->expert_blocks[1].at(LayerType::kUpProj).keep_unquantized);
}

TEST(QuantizationPlanTest, AwqExpertsQuantizedRoutersAndMixedPrecisionRefused) {
  Recipe awq;
  awq.method = QuantMethod::kAwq;
  auto plan = PlanQuantization(MixtralConfig(), awq);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(plan.status().message(),
              AllOf(HasSubstr("experts.0.w1"),
                    HasSubstr("method awq, which is not supported for "
                              "experts")));
  // AWQ on the attention only, GPTQ on the experts: fine.
  LayerOverride gptq;
  gptq.match = ".*experts.*";
  gptq.method = QuantMethod::kGptq;
  awq.overrides.push_back(gptq);
  EXPECT_TRUE(PlanQuantization(MixtralConfig(), awq).ok());

  // The router stays unquantized unless an override names it, and then
  // the plan says why it cannot be.
  Recipe router;
  router.overrides.push_back(Bits(".*\\.1\\.block_sparse_moe\\.gate", 8));
  plan = PlanQuantization(MixtralConfig(), router);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(plan.status().message(),
              AllOf(HasSubstr("model.layers.1.block_sparse_moe.gate: "
                              "overrides[0] would quantize this "
                              "mixture-of-experts router"),
                    HasSubstr("quant_config=None")));
  EXPECT_TRUE(PlanQuantization(MixtralConfig(), Recipe()).ok());

  Recipe mixed;
  mixed.mixed_precision = MixedPrecision{4.5, {4, 8}, {}, false};
  plan = PlanQuantization(MixtralConfig(), mixed);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(plan.status().message(),
              HasSubstr("mixed precision over experts is not supported yet"));
}

}  // namespace
}  // namespace quant

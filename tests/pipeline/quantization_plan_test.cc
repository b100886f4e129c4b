// PlanQuantization's refusal of recipes that give the parts of a layer
// runtimes fuse (q/k/v into qkv_proj, gate/up into gate_up_proj) different
// packed settings: vLLM would not load such a checkpoint.
#include "core/pipeline/quantization_plan.h"

#include <string>

#include "core/model/model_config.h"
#include "core/recipe/recipe.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/pipeline/pipeline_fixture.h"

namespace quant {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

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
TEST(QuantizationPlanTest, MixtureOfExpertsIsRefusedBeforeAnyWork) {
  ModelConfig config = testing::TwoBlockConfig();
  config.architecture = Architecture::kMixtral;
  config.moe.emplace();
  config.moe->num_experts = 8;
  config.moe->experts_per_token = 2;
  config.moe->expert_intermediate_size = config.intermediate_size;
  auto plan = PlanQuantization(config, Recipe());
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(plan.status().message(),
              AllOf(HasSubstr("MixtralForCausalLM is a mixture-of-experts "
                              "model (8 experts, top-2)"),
                    HasSubstr("does not quantize its experts yet")));
}

}  // namespace
}  // namespace quant

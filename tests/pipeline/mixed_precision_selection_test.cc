// The pure half of mixed precision: setting groups and their costs from the
// model's shapes, the budget refused before calibration, the solve, the
// plan it gives, and the selection's JSON.
#include "core/pipeline/mixed_precision_selection.h"

#include <string>

#include "core/model/model_config.h"
#include "core/pipeline/layer_packing.h"
#include "core/pipeline/output_size.h"
#include "core/pipeline/quantization_plan.h"
#include "core/recipe/recipe.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/pipeline/pipeline_fixture.h"

namespace quant {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

Recipe MixedRecipe(double average_bits, bool keep_float = false) {
  Recipe recipe;
  recipe.format = OutputFormat::kCompressedTensors;
  recipe.group_size = 128;
  MixedPrecision m;
  m.average_bits = average_bits;
  m.bits = {3, 4, 8};
  m.keep_float = keep_float;
  recipe.mixed_precision = m;
  return recipe;
}

absl::StatusOr<MixedPrecisionSelection> Plan(const ModelConfig& config,
                                             const Recipe& recipe) {
  auto plan = PlanQuantization(config, recipe);
  if (!plan.ok()) return plan.status();
  return PlanMixedPrecision(config, recipe, *plan);
}

TEST(MixedPrecisionSelectionTest, CandidatesAreBitsTimesGroupSizesThenFloat) {
  Recipe recipe = MixedRecipe(4.5, /*keep_float=*/true);
  recipe.mixed_precision->group_sizes = {64, 0};
  const std::vector<PrecisionCandidate> c = PrecisionCandidates(recipe);
  ASSERT_EQ(c.size(), 7u);
  EXPECT_EQ(c[0], (PrecisionCandidate{3, 64, false}));
  EXPECT_EQ(c[1], (PrecisionCandidate{3, 0, false}));
  EXPECT_EQ(c[5], (PrecisionCandidate{8, 0, false}));
  EXPECT_TRUE(c[6].keep_float);
  EXPECT_EQ(DescribeCandidate(c[0]), "3-bit g64");
  EXPECT_EQ(DescribeCandidate(c[1]), "3-bit per-row");
  EXPECT_EQ(DescribeCandidate(c[6]), "kept unquantized");
  EXPECT_TRUE(PrecisionCandidates(Recipe()).empty());
}

TEST(MixedPrecisionSelectionTest, GroupsAreTheFusedLayersWithTheFormatsCosts) {
  const ModelConfig config = testing::TwoBlockConfig();
  const Recipe recipe = MixedRecipe(5.0, /*keep_float=*/true);
  auto selection = Plan(config, recipe);
  ASSERT_TRUE(selection.ok()) << selection.status();
  ASSERT_EQ(selection->groups.size(), 8u);  // 2 blocks x [qkv, o, gu, down]
  const SettingGroupSelection& qkv = selection->groups[0];
  EXPECT_EQ(qkv.group, InputGroup::kAttnIn);
  EXPECT_THAT(qkv.layers,
              ::testing::ElementsAre("model.layers.0.self_attn.q_proj",
                                     "model.layers.0.self_attn.k_proj",
                                     "model.layers.0.self_attn.v_proj"));
  // q [256,256], k and v [128,256] (2 of 4 heads).
  EXPECT_EQ(qkv.weights, 256 * 256 + 2 * 128 * 256);
  // Each candidate's cost is what the format stores for every member.
  LayerSettings s;
  s.bits = 4;
  s.group_size = 128;
  const DType scale = CompressedTensorsScaleDType(config);
  const int64_t expected =
      8 * (PackedLayerBytes(recipe.format, recipe, s, 256, 256, scale) +
           2 * PackedLayerBytes(recipe.format, recipe, s, 128, 256, scale));
  EXPECT_EQ(qkv.candidates[1].setting, (PrecisionCandidate{4, 128, false}));
  EXPECT_EQ(qkv.candidates[1].cost_bits, expected);
  EXPECT_EQ(qkv.candidates[3].cost_bits, 16 * qkv.weights);
  EXPECT_LT(qkv.candidates[0].cost_bits, qkv.candidates[1].cost_bits);
  EXPECT_LT(qkv.candidates[1].cost_bits, qkv.candidates[2].cost_bits);
  const SettingGroupSelection& down = selection->groups[3];
  EXPECT_EQ(down.group, InputGroup::kMlpOut);
  EXPECT_EQ(down.weights, 256 * 512);
  int64_t all = 0;
  for (const auto& g : selection->groups) all += g.weights;
  EXPECT_EQ(selection->quantized_weights, all);
  EXPECT_EQ(selection->budget_bits, 5 * all);
}

TEST(MixedPrecisionSelectionTest, KeptLayersAreNotChosenFor) {
  Recipe recipe = MixedRecipe(5.0);
  recipe.ignore.push_back(".*\\.1\\.mlp\\.down_proj");
  auto selection = Plan(testing::TwoBlockConfig(), recipe);
  ASSERT_TRUE(selection.ok()) << selection.status();
  EXPECT_EQ(selection->groups.size(), 7u);
  for (const auto& g : selection->groups) {
    EXPECT_FALSE(g.block == 1 && g.group == InputGroup::kMlpOut);
  }
}

TEST(MixedPrecisionSelectionTest, AVllmGateLeavesOnlyWhatVllmLoads) {
  Recipe recipe = MixedRecipe(5.0);
  recipe.gates.runtime = "vllm";
  auto selection = Plan(testing::TwoBlockConfig(), recipe);
  ASSERT_TRUE(selection.ok()) << selection.status();
  for (const auto& g : selection->groups) {
    ASSERT_EQ(g.candidates.size(), 2u);  // WNA16: 4 and 8 bits, not 3
    EXPECT_EQ(g.candidates[0].setting.bits, 4);
    EXPECT_EQ(g.candidates[1].setting.bits, 8);
  }
  // GPTQ's legacy kernel takes 3 bits: the candidate stays.
  recipe.format = OutputFormat::kGptq;
  selection = Plan(testing::TwoBlockConfig(), recipe);
  ASSERT_TRUE(selection.ok()) << selection.status();
  EXPECT_EQ(selection->groups[0].candidates.size(), 3u);
}

TEST(MixedPrecisionSelectionTest, AnUnreachableBudgetIsRefusedAtPlanning) {
  // 3 bits with g128 scales stores more than 3 bits per weight.
  auto plan = PlanQuantization(testing::TwoBlockConfig(), MixedRecipe(3.0));
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(plan.status().message(),
              AllOf(HasSubstr("mixed_precision.average_bits"),
                    HasSubstr("cannot be met"), HasSubstr("3.1")));
}

// Errors per candidate: 3-bit 4 units, 4-bit 1, 8-bit 0.01 (per group).
void SetErrors(MixedPrecisionSelection* s) {
  for (auto& g : s->groups) {
    g.candidates[0].error = 4.0;
    g.candidates[1].error = 1.0;
    g.candidates[2].error = 0.01;
    g.sensitivity = 1.0;
  }
}

TEST(MixedPrecisionSelectionTest, TheSolveMeetsTheBudgetAndFavoursSensitive) {
  auto selection = Plan(testing::TwoBlockConfig(), MixedRecipe(4.25));
  ASSERT_TRUE(selection.ok()) << selection.status();
  SetErrors(&*selection);
  // Block 1's down_proj matters 100 times more than the rest.
  selection->groups[7].sensitivity = 100.0;
  ASSERT_TRUE(SolveMixedPrecision(&*selection).ok());
  EXPECT_LE(selection->chosen_bits, selection->budget_bits);
  EXPECT_LE(selection->chosen_average_bits(), 4.25);
  EXPECT_EQ(selection->groups[7].chosen, 2);  // 8 bits
  EXPECT_DOUBLE_EQ(selection->groups[7].candidates[2].weighted_error, 1.0);
  double predicted = 0;
  for (const auto& g : selection->groups) {
    ASSERT_GE(g.chosen, 0);
    predicted += g.candidates[g.chosen].weighted_error;
  }
  EXPECT_DOUBLE_EQ(selection->predicted_kl, predicted);
  // A budget that affords 8 bits everywhere takes it.
  auto rich = Plan(testing::TwoBlockConfig(), MixedRecipe(9.0));
  ASSERT_TRUE(rich.ok());
  SetErrors(&*rich);
  ASSERT_TRUE(SolveMixedPrecision(&*rich).ok());
  for (const auto& g : rich->groups) EXPECT_EQ(g.chosen, 2);
}

TEST(MixedPrecisionSelectionTest, TheChoiceBecomesThePlansSettings) {
  const ModelConfig config = testing::TwoBlockConfig();
  const Recipe recipe = MixedRecipe(6.0, /*keep_float=*/true);
  auto plan = PlanQuantization(config, recipe);
  ASSERT_TRUE(plan.ok());
  auto selection = PlanMixedPrecision(config, recipe, *plan);
  ASSERT_TRUE(selection.ok());
  for (auto& g : selection->groups) g.chosen = 1;  // 4-bit
  selection->groups[0].chosen = 2;                 // block 0 qkv: 8-bit
  selection->groups[5].chosen = 3;                 // block 1 o: kept
  auto chosen = ApplyMixedPrecision(*selection, *plan);
  ASSERT_TRUE(chosen.ok()) << chosen.status();
  for (LayerType t :
       {LayerType::kQProj, LayerType::kKProj, LayerType::kVProj}) {
    EXPECT_EQ(chosen->blocks[0].at(t).bits, 8);
    EXPECT_EQ(chosen->blocks[1].at(t).bits, 4);
  }
  EXPECT_TRUE(chosen->blocks[1].at(LayerType::kOProj).keep_unquantized);
  EXPECT_THAT(chosen->blocks[1].at(LayerType::kOProj).reason,
              HasSubstr("mixed_precision"));
  EXPECT_FALSE(chosen->blocks[0].at(LayerType::kOProj).keep_unquantized);
  selection->groups[2].chosen = -1;
  EXPECT_FALSE(ApplyMixedPrecision(*selection, *plan).ok());
}

TEST(MixedPrecisionSelectionTest, JsonRoundTripsAndNamesBadFields) {
  auto selection = Plan(testing::TwoBlockConfig(), MixedRecipe(4.5));
  ASSERT_TRUE(selection.ok());
  SetErrors(&*selection);
  selection->groups[1].sensitivity = 0.123456789012345;
  selection->probe_windows = 3;
  selection->probe_tokens = 180;
  ASSERT_TRUE(SolveMixedPrecision(&*selection).ok());
  const nlohmann::json json = MixedPrecisionToJson(*selection);
  EXPECT_EQ(json["groups"][0]["group"], "attn_in");
  EXPECT_EQ(json["under_budget_bits"],
            selection->budget_bits - selection->chosen_bits);
  auto back = MixedPrecisionFromJson(nlohmann::json::parse(json.dump()));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(MixedPrecisionToJson(*back), json);
  EXPECT_TRUE(CheckSelectionMatchesPlan(*back, *selection).ok());

  nlohmann::json broken = json;
  broken["groups"][2]["candidates"][1].erase("cost_bits");
  auto refused = MixedPrecisionFromJson(broken);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(),
              HasSubstr("groups[2].candidates[1].cost_bits: missing"));
  broken = json;
  broken["groups"][0]["group"] = "attention";
  EXPECT_THAT(MixedPrecisionFromJson(broken).status().message(),
              HasSubstr("groups[0].group"));
  broken = json;
  broken["groups"][0]["chosen"] = 9;
  EXPECT_FALSE(MixedPrecisionFromJson(broken).ok());

  // A selection for another plan (other costs) does not match.
  auto other = Plan(testing::TwoBlockConfig(), MixedRecipe(5.5));
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(CheckSelectionMatchesPlan(*back, *other).code(),
            absl::StatusCode::kDataLoss);
  const std::string text = FormatMixedPrecision(*selection);
  EXPECT_THAT(text,
              AllOf(HasSubstr("budget of 4.5"), HasSubstr("block 0   attn_in "),
                    HasSubstr("3-bit g128 err 4")));
}

}  // namespace
}  // namespace quant

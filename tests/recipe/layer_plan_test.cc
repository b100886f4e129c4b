// ResolveLayerSettings on stories260K-like layer names (5 blocks x q, k, v,
// o, gate, up, down, plus the embedding and lm_head): defaults, overrides,
// ignore, full-match semantics, no-match warnings and conflicts.
#include "core/recipe/layer_plan.h"

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "core/recipe/recipe.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace quant {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr int kBlocks = 5;

std::vector<std::string> LinearLayerNames() {
  std::vector<std::string> names;
  for (int block = 0; block < kBlocks; ++block) {
    const std::string prefix = absl::StrCat("model.layers.", block, ".");
    for (const char* type : {"q_proj", "k_proj", "v_proj", "o_proj"}) {
      names.push_back(absl::StrCat(prefix, "self_attn.", type));
    }
    for (const char* type : {"gate_proj", "up_proj", "down_proj"}) {
      names.push_back(absl::StrCat(prefix, "mlp.", type));
    }
  }
  return names;
}

std::vector<std::string> AllNames() {
  std::vector<std::string> names = LinearLayerNames();
  names.insert(names.begin(), "model.embed_tokens");
  names.push_back("lm_head");
  return names;
}

std::map<std::string, LayerSettings> ByName(const LayerPlan& plan) {
  std::map<std::string, LayerSettings> layers;
  for (const LayerSettings& layer : plan.layers) layers[layer.name] = layer;
  return layers;
}

LayerOverride Override(std::string match) {
  LayerOverride entry;
  entry.match = std::move(match);
  return entry;
}

TEST(LayerPlanTest, DefaultsQuantizeLinearLayersOnly) {
  const Recipe recipe;
  absl::StatusOr<LayerPlan> plan = ResolveLayerSettings(recipe, AllNames());
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->layers.size(), AllNames().size());
  EXPECT_THAT(plan->warnings, IsEmpty());
  // Same order as the names given.
  for (size_t i = 0; i < plan->layers.size(); ++i) {
    EXPECT_EQ(plan->layers[i].name, AllNames()[i]);
  }
  std::map<std::string, LayerSettings> layers = ByName(*plan);
  for (const std::string& name : LinearLayerNames()) {
    const LayerSettings& layer = layers[name];
    EXPECT_FALSE(layer.keep_unquantized) << name << ": " << layer.reason;
    EXPECT_EQ(layer.method, recipe.method) << name;
    EXPECT_EQ(layer.bits, recipe.bits) << name;
    EXPECT_EQ(layer.group_size, recipe.group_size) << name;
    EXPECT_EQ(layer.grid, recipe.grid) << name;
    EXPECT_EQ(layer.damp.fraction, recipe.damp.fraction) << name;
    EXPECT_TRUE(layer.reason.empty()) << name;
    EXPECT_THAT(layer.overrides, IsEmpty()) << name;
  }
  EXPECT_TRUE(layers["lm_head"].keep_unquantized);
  EXPECT_THAT(layers["lm_head"].reason, HasSubstr("ignore[0] \"lm_head\""));
  EXPECT_TRUE(layers["model.embed_tokens"].keep_unquantized);
  EXPECT_THAT(layers["model.embed_tokens"].reason, HasSubstr("embedding"));
}

TEST(LayerPlanTest, OverrideAppliesToFullMatchesOnly) {
  Recipe recipe;
  LayerOverride down0 = Override("model\\.layers\\.0\\..*down_proj");
  down0.bits = 8;
  LayerOverride attention = Override(".*self_attn\\.(q|k)_proj");
  attention.group_size = 32;
  attention.grid = QuantGrid::kAsym;
  recipe.overrides = {down0, attention};
  absl::StatusOr<LayerPlan> plan = ResolveLayerSettings(recipe, AllNames());
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(plan->warnings, IsEmpty());
  int eight_bit = 0;
  int grouped_32 = 0;
  for (const LayerSettings& layer : plan->layers) {
    if (layer.keep_unquantized) continue;
    const bool is_down0 = layer.name == "model.layers.0.mlp.down_proj";
    EXPECT_EQ(layer.bits, is_down0 ? 8 : 4) << layer.name;
    eight_bit += layer.bits == 8;
    const bool is_qk = layer.name.find("q_proj") != std::string::npos ||
                       layer.name.find("k_proj") != std::string::npos;
    EXPECT_EQ(layer.group_size, is_qk ? 32 : 128) << layer.name;
    EXPECT_EQ(layer.grid, is_qk ? QuantGrid::kAsym : QuantGrid::kSym)
        << layer.name;
    grouped_32 += layer.group_size == 32;
    if (is_down0) {
      EXPECT_THAT(layer.overrides, ElementsAre(0));
    }
    if (is_qk) {
      EXPECT_THAT(layer.overrides, ElementsAre(1));
    }
  }
  EXPECT_EQ(eight_bit, 1);
  EXPECT_EQ(grouped_32, 2 * kBlocks);
}

TEST(LayerPlanTest, PatternsAreFullMatchesNotSubstrings) {
  Recipe recipe;
  LayerOverride partial = Override("down_proj");  // Matches no full name.
  partial.bits = 8;
  LayerOverride prefix = Override("model\\.layers\\.1");  // Nor this.
  prefix.bits = 2;
  recipe.overrides = {partial, prefix};
  absl::StatusOr<LayerPlan> plan = ResolveLayerSettings(recipe, AllNames());
  ASSERT_TRUE(plan.ok()) << plan.status();
  for (const LayerSettings& layer : plan->layers) {
    EXPECT_THAT(layer.overrides, IsEmpty()) << layer.name;
    if (!layer.keep_unquantized) {
      EXPECT_EQ(layer.bits, 4) << layer.name;
    }
  }
  ASSERT_EQ(plan->warnings.size(), 2u);
  EXPECT_THAT(plan->warnings[0],
              HasSubstr("overrides[0]: match \"down_proj\" matches no layer"));
  EXPECT_THAT(plan->warnings[1], HasSubstr("overrides[1]"));
}

TEST(LayerPlanTest, IgnoreWinsOverOverrides) {
  Recipe recipe;
  recipe.ignore = {"lm_head", "model\\.layers\\.4\\..*"};
  LayerOverride everything = Override("model\\.layers\\..*");
  everything.bits = 8;
  LayerOverride block4 = Override("model\\.layers\\.4\\.mlp\\..*");
  block4.method = QuantMethod::kRtn;
  recipe.overrides = {everything, block4};
  absl::StatusOr<LayerPlan> plan = ResolveLayerSettings(recipe, AllNames());
  ASSERT_TRUE(plan.ok()) << plan.status();
  int ignored = 0;
  for (const LayerSettings& layer : plan->layers) {
    if (layer.name.rfind("model.layers.4.", 0) == 0) {
      ++ignored;
      EXPECT_TRUE(layer.keep_unquantized) << layer.name;
      EXPECT_THAT(layer.reason, HasSubstr("ignore[1]")) << layer.name;
      EXPECT_THAT(layer.overrides, IsEmpty()) << layer.name;
    } else if (layer.name.rfind("model.layers.", 0) == 0) {
      EXPECT_FALSE(layer.keep_unquantized) << layer.name;
      EXPECT_EQ(layer.bits, 8) << layer.name;
    }
  }
  EXPECT_EQ(ignored, 7);
  // The block-4 override hit only ignored layers: a warning, not an error.
  ASSERT_EQ(plan->warnings.size(), 1u);
  EXPECT_THAT(plan->warnings[0],
              HasSubstr("overrides[1]: match \"model\\.layers\\.4\\.mlp\\..*\" "
                        "matches only 3 ignored layers"));
}

TEST(LayerPlanTest, ConflictingOverridesAreAnErrorNamingBothAndTheLayer) {
  Recipe recipe;
  LayerOverride down = Override(".*down_proj");
  down.bits = 8;
  LayerOverride block2 = Override("model\\.layers\\.2\\..*");
  block2.bits = 3;
  recipe.overrides = {down, block2};
  absl::StatusOr<LayerPlan> plan = ResolveLayerSettings(recipe, AllNames());
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(plan.status().message(),
              HasSubstr("overrides[0] and overrides[1] both match layer "
                        "\"model.layers.2.mlp.down_proj\" but set bits to 8 "
                        "and 3"));
}

TEST(LayerPlanTest, AgreeingOrDisjointOverridesMerge) {
  Recipe recipe;
  LayerOverride down = Override(".*down_proj");
  down.bits = 8;
  LayerOverride block2 = Override("model\\.layers\\.2\\..*");
  block2.bits = 8;  // Same value: no conflict.
  block2.method = QuantMethod::kRtn;
  recipe.overrides = {down, block2};
  absl::StatusOr<LayerPlan> plan = ResolveLayerSettings(recipe, AllNames());
  ASSERT_TRUE(plan.ok()) << plan.status();
  std::map<std::string, LayerSettings> layers = ByName(*plan);
  const LayerSettings& both = layers["model.layers.2.mlp.down_proj"];
  EXPECT_EQ(both.bits, 8);
  EXPECT_EQ(both.method, QuantMethod::kRtn);
  EXPECT_THAT(both.overrides, ElementsAre(0, 1));
  EXPECT_EQ(layers["model.layers.3.mlp.down_proj"].method, QuantMethod::kGptq);
  EXPECT_EQ(layers["model.layers.2.self_attn.q_proj"].bits, 8);
}

TEST(LayerPlanTest, KeepUnquantizedWinsOverOtherOverrides) {
  Recipe recipe;
  LayerOverride all = Override(".*_proj");
  all.bits = 3;
  LayerOverride keep = Override("model\\.layers\\.0\\.self_attn\\.v_proj");
  keep.keep_unquantized = true;
  recipe.overrides = {all, keep};
  absl::StatusOr<LayerPlan> plan = ResolveLayerSettings(recipe, AllNames());
  ASSERT_TRUE(plan.ok()) << plan.status();
  std::map<std::string, LayerSettings> layers = ByName(*plan);
  const LayerSettings& kept = layers["model.layers.0.self_attn.v_proj"];
  EXPECT_TRUE(kept.keep_unquantized);
  EXPECT_THAT(kept.reason, HasSubstr("overrides[1]"));
  EXPECT_FALSE(layers["model.layers.1.self_attn.v_proj"].keep_unquantized);
}

TEST(LayerPlanTest, EmbeddingAndHeadNeedAnExplicitOverride) {
  Recipe recipe;
  recipe.ignore.clear();
  // Without an override they stay unquantized even when not ignored.
  absl::StatusOr<LayerPlan> plan = ResolveLayerSettings(recipe, AllNames());
  ASSERT_TRUE(plan.ok()) << plan.status();
  std::map<std::string, LayerSettings> layers = ByName(*plan);
  EXPECT_TRUE(layers["lm_head"].keep_unquantized);
  EXPECT_THAT(layers["lm_head"].reason, HasSubstr("output head"));
  EXPECT_TRUE(layers["model.embed_tokens"].keep_unquantized);

  LayerOverride head = Override("lm_head");
  head.bits = 8;
  LayerOverride embedding = Override("model\\.embed_tokens");
  embedding.method = QuantMethod::kRtn;
  recipe.overrides = {head, embedding};
  plan = ResolveLayerSettings(recipe, AllNames());
  ASSERT_TRUE(plan.ok()) << plan.status();
  layers = ByName(*plan);
  EXPECT_FALSE(layers["lm_head"].keep_unquantized);
  EXPECT_EQ(layers["lm_head"].bits, 8);
  EXPECT_FALSE(layers["model.embed_tokens"].keep_unquantized);
  EXPECT_EQ(layers["model.embed_tokens"].method, QuantMethod::kRtn);
  // The default ignore still wins for lm_head.
  recipe.ignore = {"lm_head"};
  plan = ResolveLayerSettings(recipe, AllNames());
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(ByName(*plan)["lm_head"].keep_unquantized);
}

TEST(LayerPlanTest, BadPatternIsAnErrorNamingTheField) {
  Recipe recipe;
  LayerOverride bad = Override("model\\.layers\\.(0");
  bad.bits = 8;
  recipe.overrides = {Override("lm_head"), bad};
  recipe.overrides[0].bits = 8;
  absl::StatusOr<LayerPlan> plan = ResolveLayerSettings(recipe, AllNames());
  ASSERT_FALSE(plan.ok());
  EXPECT_THAT(plan.status().message(), HasSubstr("overrides[1].match"));

  Recipe bad_ignore;
  bad_ignore.ignore = {"[unclosed"};
  plan = ResolveLayerSettings(bad_ignore, AllNames());
  ASSERT_FALSE(plan.ok());
  EXPECT_THAT(plan.status().message(), HasSubstr("ignore[0]"));
}

TEST(LayerPlanTest, DampOverrideAndAuto) {
  Recipe recipe;
  LayerOverride auto_down = Override(".*down_proj");
  auto_down.damp = DampValue{/*automatic=*/true, 0.0};
  LayerOverride fixed_up = Override(".*up_proj");
  fixed_up.damp = DampValue{/*automatic=*/false, 0.05};
  recipe.overrides = {auto_down, fixed_up};
  absl::StatusOr<LayerPlan> plan = ResolveLayerSettings(recipe, AllNames());
  ASSERT_TRUE(plan.ok()) << plan.status();
  std::map<std::string, LayerSettings> layers = ByName(*plan);
  EXPECT_TRUE(layers["model.layers.3.mlp.down_proj"].damp.automatic);
  EXPECT_FALSE(layers["model.layers.3.mlp.up_proj"].damp.automatic);
  EXPECT_EQ(layers["model.layers.3.mlp.up_proj"].damp.fraction, 0.05);
  EXPECT_EQ(layers["model.layers.3.mlp.gate_proj"].damp.fraction,
            recipe.damp.fraction);
}

// A pattern that exhausts the matcher on a layer name used to count as "no
// match", so an ignored layer was quantized. Now it fails planning, naming
// the pattern. (How fast it gives up is bench material, not a test: the
// bounded limit is reached in milliseconds, PCRE2's default took 4.7 s.)
TEST(LayerPlanTest, PatternThatGivesUpIsAnErrorNotANoMatch) {
  // Nested quantifiers over the same characters, then a class no name has:
  // every way of splitting the name is tried before failing.
  const std::string catastrophic = "([a-z_.0-9]|[a-z_.0-9])*[^a-z_.0-9]";
  for (const bool in_ignore : {true, false}) {
    Recipe recipe;
    if (in_ignore) {
      recipe.ignore = {"lm_head", catastrophic};
    } else {
      recipe.overrides = {Override(catastrophic)};
    }
    absl::StatusOr<LayerPlan> plan = ResolveLayerSettings(recipe, AllNames());
    ASSERT_FALSE(plan.ok());
    EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(plan.status().message(),
                HasSubstr(in_ignore ? "ignore[1]: pattern '"
                                    : "overrides[0].match: pattern '"));
    EXPECT_THAT(plan.status().message(), HasSubstr("gave up matching"));
  }
}

TEST(LayerPlanTest, PatternCountAndLengthAreBounded) {
  Recipe recipe;
  recipe.ignore.assign(257, "lm_head");
  absl::Status status = ValidateRecipe(recipe);
  EXPECT_THAT(status.message(), HasSubstr("ignore: 257 patterns; at most 256"));
  recipe.ignore = {std::string(257, 'a')};
  status = ValidateRecipe(recipe);
  EXPECT_THAT(status.message(),
              HasSubstr("ignore[0]: pattern of 257 characters; at most 256"));
  recipe.ignore.clear();
  recipe.overrides.assign(257, Override("lm_head"));
  status = ValidateRecipe(recipe);
  EXPECT_THAT(status.message(),
              HasSubstr("overrides: 257 entries; at most 256"));
}

}  // namespace
}  // namespace quant

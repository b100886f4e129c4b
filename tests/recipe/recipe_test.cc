// Recipe parsing (YAML and JSON), defaults, canonical JSON round trips, and
// the rejection of every bad recipe in tests/fixtures/recipe/bad with a
// message that names the field.
#include "core/recipe/recipe.h"

#include <dirent.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "core/base/file_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/test_env.h"

namespace quant {
namespace {

using ::testing::HasSubstr;

// The example of the recipe documentation, as YAML.
constexpr absl::string_view kExampleYaml = R"(# A full recipe.
method: gptq            # rtn | gptq | awq
bits: 4                 # 2, 3, 4, 8
group_size: 128         # 0 = one group per output row
grid: sym               # sym | sym-restricted | asym
damp: 0.01              # or auto
act_order: true
static_groups: false
propagation: sequential # or independent
calibration:
  samples: 128
  seq_len: 2048
  heldout_fraction: 0.1
  seed: 0
ignore: ["lm_head"]
overrides:
  - match: "layers\\.0\\..*down_proj"
    bits: 8
gates:
  max_ppl_ratio: 1.05
  max_mean_kl: 0.05
  min_top1_agreement: 0.9
format: gptq            # gptq | compressed-tensors
)";

// The same recipe written as JSON.
constexpr absl::string_view kExampleJson = R"({
  "method": "gptq", "bits": 4, "group_size": 128, "grid": "sym",
  "damp": 0.01, "act_order": true, "static_groups": false,
  "propagation": "sequential",
  "calibration": {"samples": 128, "seq_len": 2048,
                  "heldout_fraction": 0.1, "seed": 0},
  "ignore": ["lm_head"],
  "overrides": [{"match": "layers\\.0\\..*down_proj", "bits": 8}],
  "gates": {"max_ppl_ratio": 1.05, "max_mean_kl": 0.05,
            "min_top1_agreement": 0.9},
  "format": "gptq"
})";

// The example, built field by field from its text.
Recipe ExpectedExample() {
  Recipe recipe;
  recipe.method = QuantMethod::kGptq;
  recipe.bits = 4;
  recipe.group_size = 128;
  recipe.grid = QuantGrid::kSym;
  recipe.damp.automatic = false;
  recipe.damp.fraction = 0.01;
  recipe.act_order = true;
  recipe.static_groups = false;
  recipe.propagation = Propagation::kSequential;
  recipe.calibration.samples = 128;
  recipe.calibration.seq_len = 2048;
  recipe.calibration.heldout_fraction = 0.1;
  recipe.calibration.seed = 0;
  recipe.ignore = {"lm_head"};
  LayerOverride down;
  down.match = "layers\\.0\\..*down_proj";
  down.bits = 8;
  recipe.overrides = {down};
  recipe.gates.max_ppl_ratio = 1.05;
  recipe.gates.max_mean_kl = 0.05;
  recipe.gates.min_top1_agreement = 0.9;
  recipe.format = OutputFormat::kGptq;
  return recipe;
}

// A recipe that sets every field away from its default, optionals included.
Recipe EverythingSet() {
  Recipe recipe;
  recipe.method = QuantMethod::kAwq;
  recipe.bits = 3;
  recipe.group_size = 64;
  recipe.grid = QuantGrid::kAsym;
  recipe.damp.automatic = true;
  recipe.damp.auto_grid = {0.003, 0.07, 1.0 / 3.0};
  recipe.act_order = true;
  recipe.static_groups = true;
  recipe.propagation = Propagation::kIndependent;
  recipe.calibration.samples = 17;
  recipe.calibration.seq_len = 333;
  recipe.calibration.heldout_fraction = 0.2;
  recipe.calibration.heldout_count = 5;
  recipe.calibration.heldout_samples = 9;
  recipe.calibration.seed = 18446744073709551615ull;  // Largest uint64.
  recipe.calibration.packing = CalibrationPacking::kPerDocument;
  recipe.calibration.chat_template = "/srv/templates/chatml.jinja";
  recipe.calibration.system_prompt = "You are helpful.";
  recipe.calibration.add_generation_prompt = true;
  recipe.calibration.sources = {{"/srv/calib/chat.jsonl", "", 3.0},
                                {"", std::string(64, 'a'), 0.5}};
  recipe.ignore = {"lm_head", "model\\.layers\\.4\\..*"};
  LayerOverride gptq_attention;
  gptq_attention.match = ".*self_attn\\.(q|k|v)_proj";
  gptq_attention.method = QuantMethod::kGptq;
  gptq_attention.damp = DampValue{/*automatic=*/false, 0.125};
  LayerOverride wide_down;
  wide_down.match = ".*down_proj";
  wide_down.bits = 8;
  wide_down.group_size = 0;
  wide_down.grid = QuantGrid::kSymRestricted;
  wide_down.damp = DampValue{/*automatic=*/true, 0.01};
  LayerOverride kept;
  kept.match = "model\\.layers\\.0\\.mlp\\.gate_proj";
  kept.keep_unquantized = true;
  recipe.overrides = {gptq_attention, wide_down, kept};
  recipe.gates.max_ppl_ratio = 1.5;
  recipe.gates.min_top1_agreement = 0.0;
  recipe.gates.compare_to = "job-000041";
  recipe.gates.max_ppl_ratio_vs_previous = 1.01;
  recipe.gates.tasks = "/srv/tasks/endings.jsonl";
  recipe.gates.min_task_accuracy_ratio = 0.9;
  recipe.format = OutputFormat::kCompressedTensors;
  recipe.awq_alpha_grid = {0.0, 0.3, 1.0};
  recipe.awq_clip_search = true;
  return recipe;
}

TEST(ParseRecipeTest, ExampleYamlGivesTheExpectedRecipe) {
  absl::StatusOr<Recipe> recipe = ParseRecipe(kExampleYaml, "example.yaml");
  ASSERT_TRUE(recipe.ok()) << recipe.status();
  EXPECT_TRUE(*recipe == ExpectedExample()) << RecipeToJson(*recipe);
  // Spot checks that do not go through operator==.
  EXPECT_EQ(recipe->overrides.size(), 1u);
  EXPECT_EQ(recipe->overrides[0].match, "layers\\.0\\..*down_proj");
  EXPECT_EQ(recipe->overrides[0].bits, 8);
  EXPECT_FALSE(recipe->overrides[0].group_size.has_value());
  EXPECT_EQ(recipe->gates.max_mean_kl, 0.05);
}

TEST(ParseRecipeTest, JsonFormParsesEqual) {
  absl::StatusOr<Recipe> from_json = ParseRecipe(kExampleJson, "example.json");
  ASSERT_TRUE(from_json.ok()) << from_json.status();
  absl::StatusOr<Recipe> from_yaml = ParseRecipe(kExampleYaml, "example.yaml");
  ASSERT_TRUE(from_yaml.ok()) << from_yaml.status();
  EXPECT_TRUE(*from_json == *from_yaml);
}

TEST(ParseRecipeTest, EmptyMappingGivesDefaults) {
  absl::StatusOr<Recipe> recipe = ParseRecipe("{}", "defaults.yaml");
  ASSERT_TRUE(recipe.ok()) << recipe.status();
  EXPECT_TRUE(*recipe == Recipe());
  // The documented defaults.
  EXPECT_EQ(recipe->method, QuantMethod::kGptq);
  EXPECT_EQ(recipe->bits, 4);
  EXPECT_EQ(recipe->group_size, 128);
  EXPECT_EQ(recipe->grid, QuantGrid::kSym);
  EXPECT_FALSE(recipe->damp.automatic);
  EXPECT_EQ(recipe->damp.fraction, 0.01);
  EXPECT_FALSE(recipe->act_order);
  EXPECT_FALSE(recipe->static_groups);
  EXPECT_EQ(recipe->propagation, Propagation::kSequential);
  EXPECT_EQ(recipe->calibration.samples, 128);
  EXPECT_EQ(recipe->calibration.seq_len, 2048);
  EXPECT_EQ(recipe->calibration.heldout_fraction, 0.1);
  EXPECT_EQ(recipe->calibration.seed, 0u);
  EXPECT_EQ(recipe->calibration.packing, CalibrationPacking::kConcatenate);
  EXPECT_EQ(recipe->ignore, std::vector<std::string>{"lm_head"});
  EXPECT_TRUE(recipe->overrides.empty());
  EXPECT_FALSE(recipe->gates.max_ppl_ratio.has_value());
  EXPECT_FALSE(recipe->gates.max_mean_kl.has_value());
  EXPECT_FALSE(recipe->gates.min_top1_agreement.has_value());
  EXPECT_EQ(recipe->format, OutputFormat::kGptq);
  EXPECT_FALSE(recipe->awq_clip_search);
  EXPECT_TRUE(ValidateRecipe(Recipe()).ok());
}

TEST(ParseRecipeTest, EmptyListsReplaceDefaults) {
  absl::StatusOr<Recipe> recipe =
      ParseRecipe("ignore: []\noverrides: []\n", "r.yaml");
  ASSERT_TRUE(recipe.ok()) << recipe.status();
  EXPECT_TRUE(recipe->ignore.empty());
}

TEST(ParseRecipeTest, DampAutoAndNullGates) {
  absl::StatusOr<Recipe> recipe = ParseRecipe(
      "damp: auto\ndamp_grid: [0.5, 0.25]\n"
      "gates: {max_ppl_ratio: null, max_mean_kl: 0}\n",
      "r.yaml");
  ASSERT_TRUE(recipe.ok()) << recipe.status();
  EXPECT_TRUE(recipe->damp.automatic);
  EXPECT_EQ(recipe->damp.auto_grid, (std::vector<double>{0.5, 0.25}));
  EXPECT_FALSE(recipe->gates.max_ppl_ratio.has_value());
  EXPECT_EQ(recipe->gates.max_mean_kl, 0.0);
}

TEST(RecipeToJsonTest, RoundTripsExampleDefaultsAndEverythingSet) {
  for (const Recipe& recipe : {ExpectedExample(), Recipe(), EverythingSet()}) {
    ASSERT_TRUE(ValidateRecipe(recipe).ok()) << ValidateRecipe(recipe);
    const std::string json = RecipeToJson(recipe);
    absl::StatusOr<Recipe> parsed = ParseRecipe(json, "canonical.json");
    ASSERT_TRUE(parsed.ok()) << parsed.status() << "\n" << json;
    EXPECT_TRUE(*parsed == recipe) << json;
    // Canonical: the text of an equal recipe is identical.
    EXPECT_EQ(RecipeToJson(*parsed), json);
  }
}

TEST(RecipeToJsonTest, RoundTripsAwkwardPatternCharacters) {
  // Characters that JSON escapes or YAML treats specially inside a string.
  Recipe recipe;
  recipe.ignore = {
      "lm_head",
      std::string("tab\there \"quoted\" back\\\\slash # not a comment: {x}"),
      std::string("nul\0byte", 8),
      "del\x7f c1\xc2\x85 nbsp\xc2\xa0 ls\xe2\x80\xa8 emoji\xf0\x9f\x98\x80",
      "'single' & *star* !tag %percent @at `tick` -dash ?q"};
  ASSERT_TRUE(ValidateRecipe(recipe).ok()) << ValidateRecipe(recipe);
  const std::string json = RecipeToJson(recipe);
  absl::StatusOr<Recipe> parsed = ParseRecipe(json, "canonical.json");
  ASSERT_TRUE(parsed.ok()) << parsed.status() << "\n" << json;
  EXPECT_EQ(parsed->ignore, recipe.ignore);
  EXPECT_EQ(RecipeToJson(*parsed), json);
}

TEST(RecipeToJsonTest, EqualRecipesGiveIdenticalText) {
  // An automatic damping's fraction is unused, and -0.0 == 0.0.
  Recipe a;
  a.damp.automatic = true;
  a.damp.fraction = 0.3;
  a.calibration.heldout_fraction = 0.0;
  a.calibration.heldout_count = 4;
  a.gates.max_mean_kl = 0.0;
  Recipe b = a;
  b.damp.fraction = 0.01;
  b.calibration.heldout_fraction = -0.0;
  b.gates.max_mean_kl = -0.0;
  ASSERT_TRUE(ValidateRecipe(a).ok()) << ValidateRecipe(a);
  EXPECT_TRUE(a == b);
  EXPECT_EQ(RecipeToJson(a), RecipeToJson(b));
  absl::StatusOr<Recipe> parsed = ParseRecipe(RecipeToJson(b), "b.json");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_TRUE(*parsed == a);
}

TEST(RecipeToJsonTest, EqualityNoticesEveryChange) {
  // Guards the round-trip test: a field missing from operator== would make
  // it pass vacuously.
  const Recipe base = EverythingSet();
  std::vector<Recipe> changed(26, base);
  changed[0].method = QuantMethod::kRtn;
  changed[1].bits = 4;
  changed[2].group_size = 128;
  changed[3].grid = QuantGrid::kSym;
  changed[4].damp.auto_grid.pop_back();
  changed[5].act_order = false;
  changed[6].static_groups = false;
  changed[7].propagation = Propagation::kSequential;
  changed[8].calibration.seed = 1;
  changed[9].ignore.pop_back();
  changed[10].overrides[1].damp->automatic = false;
  changed[11].gates.max_mean_kl = 0.1;
  changed[12].format = OutputFormat::kGptq;
  changed[13].awq_alpha_grid[1] = 0.31;
  changed[14].awq_clip_search = false;
  changed[15].calibration.packing = CalibrationPacking::kConcatenate;
  changed[16].gates.compare_to = "/srv/releases/week-48";
  changed[17].gates.max_ppl_ratio_vs_previous = 1.0;
  changed[18].calibration.chat_template = "auto";
  changed[19].calibration.system_prompt.reset();
  changed[20].calibration.add_generation_prompt = false;
  changed[21].gates.tasks = "/srv/tasks/other.jsonl";
  changed[22].gates.min_task_accuracy_ratio = 0.95;
  changed[23].calibration.sources[0].weight = 2.0;
  changed[24].calibration.sources[1].sha256 = std::string(64, 'b');
  changed[25].calibration.sources.pop_back();
  for (size_t i = 0; i < changed.size(); ++i) {
    EXPECT_FALSE(changed[i] == base) << "change " << i;
    EXPECT_NE(RecipeToJson(changed[i]), RecipeToJson(base)) << "change " << i;
  }
}

TEST(RecipeToJsonTest, KeysInSchemaOrderWithNullForUnsetOptionals) {
  const nlohmann::ordered_json json =
      nlohmann::ordered_json::parse(RecipeToJson(ExpectedExample()));
  std::vector<std::string> keys;
  for (auto it = json.begin(); it != json.end(); ++it) keys.push_back(it.key());
  EXPECT_EQ(keys, (std::vector<std::string>{
                      "method", "bits", "group_size", "grid", "damp",
                      "damp_grid", "act_order", "static_groups", "propagation",
                      "calibration", "ignore", "overrides", "gates", "format",
                      "awq_alpha_grid", "awq_clip_search"}));
  EXPECT_EQ(json["method"], "gptq");
  EXPECT_EQ(json["damp"], 0.01);
  EXPECT_TRUE(json["overrides"][0]["group_size"].is_null());
  EXPECT_EQ(json["overrides"][0]["bits"], 8);
  EXPECT_EQ(json["calibration"]["packing"], "concatenate");
  EXPECT_TRUE(nlohmann::ordered_json::parse(
                  RecipeToJson(Recipe()))["gates"]["max_mean_kl"]
                  .is_null());
  // The comparison's fields appear only when set: the recipes (and hashes)
  // from before they existed are unchanged.
  EXPECT_FALSE(json["gates"].contains("compare_to"));
  EXPECT_FALSE(json["gates"].contains("max_ppl_ratio_vs_previous"));
  EXPECT_FALSE(json["gates"].contains("tasks"));
  EXPECT_FALSE(json["gates"].contains("min_task_accuracy_ratio"));
  // So are the chat template's.
  EXPECT_FALSE(json["calibration"].contains("chat_template"));
  EXPECT_FALSE(json["calibration"].contains("system_prompt"));
  EXPECT_FALSE(json["calibration"].contains("add_generation_prompt"));
  EXPECT_FALSE(json["calibration"].contains("sources"));
  const nlohmann::ordered_json everything =
      nlohmann::ordered_json::parse(RecipeToJson(EverythingSet()));
  EXPECT_EQ(everything["calibration"]["chat_template"],
            "/srv/templates/chatml.jinja");
  EXPECT_EQ(everything["calibration"]["system_prompt"], "You are helpful.");
  EXPECT_EQ(everything["calibration"]["add_generation_prompt"], true);
  EXPECT_EQ(nlohmann::ordered_json::parse(
                RecipeToJson(EverythingSet()))["gates"]["compare_to"],
            "job-000041");
}

TEST(ParseRecipeTest, ChatTemplateSettings) {
  absl::StatusOr<Recipe> recipe = ParseRecipe(
      "calibration:\n  chat_template: file:///srv/t.jinja\n"
      "  system_prompt: \"\"\n  add_generation_prompt: true\n",
      "r.yaml");
  ASSERT_TRUE(recipe.ok()) << recipe.status();
  EXPECT_EQ(recipe->calibration.chat_template, "file:///srv/t.jinja");
  // An empty system prompt is a prompt (an empty system turn), not none.
  EXPECT_EQ(recipe->calibration.system_prompt, std::optional<std::string>(""));
  EXPECT_TRUE(recipe->calibration.add_generation_prompt);
  EXPECT_EQ(Recipe().calibration.chat_template, "auto");

  for (const auto& [yaml, says] :
       std::vector<std::pair<std::string, std::string>>{
           {"calibration: {chat_template: chatml.jinja}",
            "calibration.chat_template: \"chatml.jinja\": auto, none, or"},
           {"calibration: {chat_template: \"file://host/t\"}", "no host part"},
           {"calibration: {chat_template: [a]}",
            "calibration.chat_template: expected a string"},
           {"calibration: {chat_template: none, system_prompt: x}",
            "calibration.system_prompt: applies to conversations"},
           {"calibration: {chat_template: none, add_generation_prompt: true}",
            "calibration.add_generation_prompt: applies to conversations"},
           {"calibration: {add_generation_prompt: yes}",
            "expected true or false"},
       }) {
    SCOPED_TRACE(yaml);
    absl::StatusOr<Recipe> bad = ParseRecipe(yaml + "\n", "r.yaml");
    ASSERT_FALSE(bad.ok());
    EXPECT_THAT(bad.status().message(), HasSubstr(says));
  }
  Recipe huge;
  huge.calibration.system_prompt = std::string(70000, 'x');
  EXPECT_THAT(ValidateRecipe(huge).message(),
              HasSubstr("calibration.system_prompt: 70000 bytes"));
}

TEST(ParseRecipeTest, CompareToAndItsGate) {
  absl::StatusOr<Recipe> recipe = ParseRecipe(
      "gates:\n  compare_to: file:///srv/releases/w48\n"
      "  max_ppl_ratio_vs_previous: 1.0\n",
      "r.yaml");
  ASSERT_TRUE(recipe.ok()) << recipe.status();
  EXPECT_EQ(recipe->gates.compare_to, "file:///srv/releases/w48");
  EXPECT_EQ(recipe->gates.max_ppl_ratio_vs_previous, 1.0);

  // The gate needs something to compare with, and a positive ratio.
  absl::StatusOr<Recipe> alone =
      ParseRecipe("gates: {max_ppl_ratio_vs_previous: 1.0}\n", "r.yaml");
  ASSERT_FALSE(alone.ok());
  EXPECT_THAT(alone.status().message(),
              HasSubstr("gates.max_ppl_ratio_vs_previous: needs "
                        "gates.compare_to"));
  absl::StatusOr<Recipe> zero = ParseRecipe(
      "gates: {compare_to: job-1, max_ppl_ratio_vs_previous: 0}\n", "r.yaml");
  ASSERT_FALSE(zero.ok());
  EXPECT_THAT(zero.status().message(),
              HasSubstr("gates.max_ppl_ratio_vs_previous: 0 is out of range"));
  absl::StatusOr<Recipe> number =
      ParseRecipe("gates: {compare_to: [a]}\n", "r.yaml");
  ASSERT_FALSE(number.ok());
  EXPECT_THAT(number.status().message(), HasSubstr("gates.compare_to"));

  Recipe control;
  control.gates.compare_to = "a\nb";
  EXPECT_THAT(ValidateRecipe(control).message(),
              HasSubstr("gates.compare_to: holds a control character"));
  Recipe long_one;
  long_one.gates.compare_to = std::string(4097, 'a');
  EXPECT_THAT(ValidateRecipe(long_one).message(),
              HasSubstr("gates.compare_to: 4097 bytes"));
}

TEST(ParseRecipeTest, ErrorsGiveSourceLineAndColumn) {
  absl::StatusOr<Recipe> recipe =
      ParseRecipe("bits: 4\ncalibration:\n  seq_len: 512\n  smaples: 3\n",
                  "my/recipe.yaml");
  ASSERT_FALSE(recipe.ok());
  EXPECT_EQ(recipe.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(recipe.status().message(),
              HasSubstr("my/recipe.yaml:4:3: calibration.smaples: unknown "
                        "field (known: samples, seq_len, heldout_fraction, "
                        "heldout_count, heldout_samples, seed, packing, "
                        "chat_template, system_prompt, "
                        "add_generation_prompt, sources)"));
}

TEST(ParseRecipeTest, ValidationErrorsPointAtTheField) {
  absl::StatusOr<Recipe> recipe = ParseRecipe(
      "overrides:\n  - match: a\n    bits: 8\n  - match: b\n    bits: 7\n",
      "r.yaml");
  ASSERT_FALSE(recipe.ok());
  EXPECT_THAT(recipe.status().message(),
              HasSubstr("r.yaml:5:11: overrides[1].bits: 7 is not supported"));
}

TEST(ParseRecipeTest, RejectsOversizedText) {
  std::string text = "bits: 4\n";
  text.append(size_t{1} << 20, '#');
  absl::StatusOr<Recipe> recipe = ParseRecipe(text, "big.yaml");
  ASSERT_FALSE(recipe.ok());
  EXPECT_THAT(recipe.status().message(), HasSubstr("big.yaml: recipe is"));
}

TEST(ParseRecipeTest, AcceptsAllValuesOfEachEnum) {
  const std::vector<std::string> texts = {
      "method: rtn",
      "method: awq",
      "grid: sym-restricted",
      "grid: asym",
      "propagation: independent",
      "format: compressed-tensors",
      "calibration: {packing: per-document}",
      "bits: 2",
      "bits: 3",
      "bits: 8",
      "group_size: 0",
      "group_size: 8",
      "damp: 0",
      "calibration: {heldout_fraction: 0, heldout_count: 3}"};
  for (const std::string& text : texts) {
    EXPECT_TRUE(ParseRecipe(text, "r.yaml").ok())
        << text << ": " << ParseRecipe(text, "r.yaml").status();
  }
}

TEST(ParseRecipeTest, OverridesCanEnableGptqOptionsUnderRtn) {
  // act_order is a GPTQ option; it is allowed when some layer uses GPTQ.
  absl::StatusOr<Recipe> recipe = ParseRecipe(
      "method: rtn\nact_order: true\n"
      "overrides: [{match: '.*down_proj', method: gptq}]\n",
      "r.yaml");
  ASSERT_TRUE(recipe.ok()) << recipe.status();
  EXPECT_EQ(recipe->overrides[0].method, QuantMethod::kGptq);
}

TEST(ParseRecipeTest, MixedPrecision) {
  absl::StatusOr<Recipe> recipe = ParseRecipe(
      "mixed_precision:\n  average_bits: 4.5\n  bits: [3, 4, 8]\n"
      "  group_sizes: [64, 128]\n  keep_float: true\n"
      "overrides:\n  - match: 'lm_head'\n    keep_unquantized: true\n",
      "r.yaml");
  ASSERT_TRUE(recipe.ok()) << recipe.status();
  ASSERT_TRUE(recipe->mixed_precision.has_value());
  EXPECT_EQ(recipe->mixed_precision->average_bits, 4.5);
  EXPECT_EQ(recipe->mixed_precision->bits, (std::vector<int>{3, 4, 8}));
  EXPECT_EQ(recipe->mixed_precision->group_sizes, (std::vector<int>{64, 128}));
  EXPECT_TRUE(recipe->mixed_precision->keep_float);
  const nlohmann::ordered_json json =
      nlohmann::ordered_json::parse(RecipeToJson(*recipe));
  EXPECT_EQ(json["mixed_precision"]["bits"].dump(), "[3,4,8]");
  // Unset, it stays out of the canonical form.
  EXPECT_FALSE(nlohmann::ordered_json::parse(RecipeToJson(Recipe()))
                   .contains("mixed_precision"));

  for (const auto& [yaml, says] :
       std::vector<std::pair<std::string, std::string>>{
           {"mixed_precision: {bits: [4]}",
            "mixed_precision: missing field \"average_bits\""},
           {"mixed_precision: {average_bits: 0, bits: [4]}",
            "mixed_precision.average_bits: 0 is out of range (0, 32]"},
           {"mixed_precision: {average_bits: 4, bits: []}",
            "mixed_precision.bits: empty"},
           {"mixed_precision: {average_bits: 4, bits: [4, 5]}",
            "mixed_precision.bits[1]: 5 is not one of 2, 3, 4, 8"},
           {"mixed_precision: {average_bits: 4, bits: [4, 4]}",
            "mixed_precision.bits[1]: 4 is listed twice"},
           {"mixed_precision: {average_bits: 4, bits: [4], group_sizes: "
            "[12]}",
            "mixed_precision.group_sizes[0]: 12 must be 0"},
           {"mixed_precision: {average_bits: 4, bits: [4], bit: 3}",
            "mixed_precision"},
           {"mixed_precision: {average_bits: 4, bits: [4]}\n"
            "overrides: [{match: '.*down_proj', bits: 8}]",
            "overrides[0].bits: mixed_precision chooses bits"},
       }) {
    SCOPED_TRACE(yaml);
    absl::StatusOr<Recipe> bad = ParseRecipe(yaml + "\n", "r.yaml");
    ASSERT_FALSE(bad.ok());
    EXPECT_THAT(bad.status().message(), HasSubstr(says));
  }
}

TEST(ParseRecipeTest, MixtureOfExpertsSection) {
  absl::StatusOr<Recipe> recipe = ParseRecipe(
      "moe:\n  routing: all_experts\n  min_tokens_per_expert: 256\n"
      "  on_starved_expert: damp\n",
      "r.yaml");
  ASSERT_TRUE(recipe.ok()) << recipe.status();
  ASSERT_TRUE(recipe->moe.has_value());
  EXPECT_EQ(recipe->moe->routing, ExpertRouting::kAllExperts);
  EXPECT_EQ(recipe->moe->min_tokens_per_expert, 256);
  EXPECT_EQ(recipe->moe->on_starved_expert, StarvedExpertAction::kDamp);
  // Round trip through the canonical form, which names every field.
  const std::string json = RecipeToJson(*recipe);
  EXPECT_THAT(json, HasSubstr("\"routing\": \"all_experts\""));
  EXPECT_THAT(json, HasSubstr("\"on_starved_expert\": \"damp\""));
  absl::StatusOr<Recipe> again = ParseRecipe(json, "r.json");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, *recipe);
  // The defaults, spelled out, are a different recipe text from an absent
  // section (which keeps older recipes' hashes) but mean the same policy.
  absl::StatusOr<Recipe> defaults = ParseRecipe("moe: {}\n", "r.yaml");
  ASSERT_TRUE(defaults.ok()) << defaults.status();
  EXPECT_EQ(*defaults->moe, MoeCalibration{});
  EXPECT_FALSE(
      nlohmann::ordered_json::parse(RecipeToJson(Recipe())).contains("moe"));
  EXPECT_NE(RecipeSha256(*defaults), RecipeSha256(Recipe()));
  absl::StatusOr<Recipe> gated =
      ParseRecipe("gates: {max_starved_experts: 0.25}\n", "r.yaml");
  ASSERT_TRUE(gated.ok()) << gated.status();
  EXPECT_EQ(gated->gates.max_starved_experts, 0.25);
  EXPECT_EQ(*ParseRecipe(RecipeToJson(*gated), "r.json"), *gated);

  for (const auto& [yaml, says] :
       std::vector<std::pair<std::string, std::string>>{
           {"moe: {routing: forced}",
            "r.yaml:1:16: moe.routing: unknown value \"forced\" (known: "
            "natural, all_experts)"},
           {"moe: {on_starved_expert: skip}",
            "moe.on_starved_expert: unknown value \"skip\" (known: rtn, "
            "damp, fail)"},
           {"moe: {min_tokens_per_expert: -1}",
            "moe.min_tokens_per_expert: -1 is out of range [0, 2^40]"},
           {"moe: {min_tokens_per_expert: 12.5}",
            "moe.min_tokens_per_expert: expected an integer"},
           {"moe: {min_token_per_expert: 8}", "moe.min_token_per_expert: "},
           {"method: rtn\nmoe: {on_starved_expert: damp}",
            "moe.on_starved_expert: damp has no effect"},
           {"moe: [natural]", "moe"},
           {"gates: {max_starved_experts: 1.5}",
            "gates.max_starved_experts: 1.5 is out of range [0, 1]"},
       }) {
    SCOPED_TRACE(yaml);
    absl::StatusOr<Recipe> bad = ParseRecipe(yaml + "\n", "r.yaml");
    ASSERT_FALSE(bad.ok());
    EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(bad.status().message(), HasSubstr(says));
  }
}

TEST(ParseRecipeTest, RuntimeGate) {
  absl::StatusOr<Recipe> recipe =
      ParseRecipe("gates:\n  runtime: vllm\n", "r.yaml");
  ASSERT_TRUE(recipe.ok()) << recipe.status();
  EXPECT_EQ(recipe->gates.runtime, "vllm");
  EXPECT_EQ(
      nlohmann::ordered_json::parse(RecipeToJson(*recipe))["gates"]["runtime"],
      "vllm");
  // Unset, it stays out of the canonical form (older hashes hold).
  EXPECT_FALSE(
      nlohmann::ordered_json::parse(RecipeToJson(Recipe()))["gates"].contains(
          "runtime"));
  EXPECT_TRUE(ParseRecipe("gates: {runtime: transformers}\n", "r.yaml").ok());
  absl::StatusOr<Recipe> bad =
      ParseRecipe("gates: {runtime: sglang}\n", "r.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(),
              HasSubstr("gates.runtime: \"sglang\" is not one of vllm, "
                        "transformers"));
}

TEST(ParseRecipeTest, TaskGate) {
  absl::StatusOr<Recipe> recipe = ParseRecipe(
      "gates:\n  tasks: file:///srv/tasks/t.jsonl\n"
      "  min_task_accuracy_ratio: 0.9\n",
      "r.yaml");
  ASSERT_TRUE(recipe.ok()) << recipe.status();
  EXPECT_EQ(recipe->gates.tasks, "file:///srv/tasks/t.jsonl");
  EXPECT_EQ(recipe->gates.min_task_accuracy_ratio, 0.9);
  const nlohmann::ordered_json json =
      nlohmann::ordered_json::parse(RecipeToJson(*recipe));
  EXPECT_EQ(json["gates"]["tasks"], "file:///srv/tasks/t.jsonl");
  EXPECT_EQ(json["gates"]["min_task_accuracy_ratio"], 0.9);

  for (const auto& [yaml, says] :
       std::vector<std::pair<std::string, std::string>>{
           {"gates: {min_task_accuracy_ratio: 0.9}",
            "gates.min_task_accuracy_ratio: needs gates.tasks"},
           {"gates: {tasks: /t.jsonl, min_task_accuracy_ratio: 1.5}",
            "gates.min_task_accuracy_ratio: 1.5 is out of range [0, 1]"},
           {"gates: {tasks: /t.jsonl, min_task_accuracy_ratio: -0.1}",
            "out of range"},
           // Relative only in a recipe file (LoadRecipe), not in a text.
           {"gates: {tasks: t.jsonl}",
            "gates.tasks: \"t.jsonl\": a task file's absolute path"},
           {"gates: {tasks: \"file://host/t\"}", "no host part"},
           {"gates: {tasks: [a]}", "gates.tasks: expected a string"},
       }) {
    SCOPED_TRACE(yaml);
    absl::StatusOr<Recipe> bad = ParseRecipe(yaml + "\n", "r.yaml");
    ASSERT_FALSE(bad.ok());
    EXPECT_THAT(bad.status().message(), HasSubstr(says));
  }
  Recipe control;
  control.gates.tasks = "/a\tb";
  EXPECT_THAT(ValidateRecipe(control).message(),
              HasSubstr("gates.tasks: holds a control character"));
  Recipe nan_ratio;
  nan_ratio.gates.tasks = "/t.jsonl";
  nan_ratio.gates.min_task_accuracy_ratio = std::nan("");
  EXPECT_THAT(ValidateRecipe(nan_ratio).message(),
              HasSubstr("gates.min_task_accuracy_ratio"));
}

TEST(ParseRecipeTest, CalibrationSources) {
  const std::string sha(64, 'c');
  absl::StatusOr<Recipe> recipe = ParseRecipe(
      "calibration:\n  sources:\n    - {file: /srv/a.jsonl, weight: 3}\n"
      "    - {sha256: " +
          sha +
          "}\n"
          "    - {file: \"file:///srv/b.txt\", sha256: " +
          sha + ", weight: 0.5}\n",
      "r.yaml");
  ASSERT_TRUE(recipe.ok()) << recipe.status();
  ASSERT_EQ(recipe->calibration.sources.size(), 3u);
  EXPECT_EQ(recipe->calibration.sources[0].file, "/srv/a.jsonl");
  EXPECT_EQ(recipe->calibration.sources[0].weight, 3.0);
  EXPECT_EQ(recipe->calibration.sources[1].sha256, sha);
  EXPECT_EQ(recipe->calibration.sources[1].weight, 1.0);  // The default.
  EXPECT_EQ(recipe->calibration.sources[2].file, "file:///srv/b.txt");
  const nlohmann::ordered_json json =
      nlohmann::ordered_json::parse(RecipeToJson(*recipe));
  EXPECT_EQ(
      json["calibration"]["sources"][0],
      nlohmann::ordered_json({{"file", "/srv/a.jsonl"}, {"weight", 3.0}}));
  EXPECT_EQ(json["calibration"]["sources"][1],
            nlohmann::ordered_json({{"sha256", sha}, {"weight", 1.0}}));
  auto again = ParseRecipe(RecipeToJson(*recipe), "canonical");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, *recipe);

  for (const auto& [yaml, says] :
       std::vector<std::pair<std::string, std::string>>{
           {"calibration: {sources: [{weight: 2}]}",
            "calibration.sources[0]: needs file (a path) or sha256"},
           {"calibration: {sources: [{file: a.jsonl}]}",
            "calibration.sources[0].file: \"a.jsonl\": a calibration file's "
            "absolute path"},
           {"calibration: {sources: [{sha256: abc}]}",
            "calibration.sources[0].sha256: \"abc\" is not a sha256"},
           {"calibration: {sources: [{file: /a, weight: 0}]}",
            "calibration.sources[0].weight: 0 is out of range (> 0)"},
           {"calibration: {sources: [{file: /a, wieght: 1}]}",
            "calibration.sources[0].wieght: unknown field (known: file, "
            "sha256, weight)"},
           {"calibration: {sources: {file: /a}}",
            "calibration.sources: expected a list of mappings"},
           {"calibration: {samples: 1, sources: [{file: /a}, {file: /b}]}",
            "calibration.samples: 1 windows cannot give each of 2 sources"},
           {"calibration: {heldout_samples: 1, sources: [{file: /a}, {file: "
            "/b}]}",
            "calibration.heldout_samples: 1 windows"},
       }) {
    SCOPED_TRACE(yaml);
    absl::StatusOr<Recipe> bad = ParseRecipe(yaml + "\n", "r.yaml");
    ASSERT_FALSE(bad.ok());
    EXPECT_THAT(bad.status().message(), HasSubstr(says));
  }
  Recipe many;
  many.calibration.sources.assign(65, CalibrationSource{"/a", "", 1.0});
  EXPECT_THAT(ValidateRecipe(many).message(),
              HasSubstr("calibration.sources: 65 sources; at most 64"));
}

TEST(LoadRecipeTest, TasksRelativeToTheRecipeFile) {
  const std::string dir = testing::MakeTempDir();
  ASSERT_EQ(::mkdir(JoinPath(dir, "sub").c_str(), 0755), 0);
  const std::string path = JoinPath(dir, "sub/r.yaml");
  ASSERT_TRUE(WriteFileAtomically(path,
                                  "gates: {tasks: tasks/t.jsonl}\n"
                                  "calibration: {sources: [{file: c.txt}]}\n")
                  .ok());
  absl::StatusOr<Recipe> recipe = LoadRecipe(path);
  ASSERT_TRUE(recipe.ok()) << recipe.status();
  char real[PATH_MAX];
  ASSERT_NE(::realpath(dir.c_str(), real), nullptr);
  EXPECT_EQ(recipe->gates.tasks, std::string(real) + "/sub/tasks/t.jsonl");
  EXPECT_EQ(recipe->calibration.sources.at(0).file,
            std::string(real) + "/sub/c.txt");
  // Absolute paths and URIs stay as written.
  ASSERT_TRUE(
      WriteFileAtomically(path, "gates: {tasks: \"file:///x/t.jsonl\"}\n")
          .ok());
  recipe = LoadRecipe(path);
  ASSERT_TRUE(recipe.ok()) << recipe.status();
  EXPECT_EQ(recipe->gates.tasks, "file:///x/t.jsonl");
}

TEST(LoadRecipeTest, MissingFileNamesThePath) {
  const std::string path = JoinPath(testing::MakeTempDir(), "absent.yaml");
  absl::StatusOr<Recipe> recipe = LoadRecipe(path);
  ASSERT_FALSE(recipe.ok());
  EXPECT_THAT(recipe.status().message(), HasSubstr(path));
}

TEST(LoadRecipeTest, LoadsAFile) {
  const std::string path = JoinPath(testing::MakeTempDir(), "r.yaml");
  ASSERT_TRUE(WriteFileAtomically(path, kExampleYaml).ok());
  absl::StatusOr<Recipe> recipe = LoadRecipe(path);
  ASSERT_TRUE(recipe.ok()) << recipe.status();
  EXPECT_TRUE(*recipe == ExpectedExample());
}

TEST(ValidateRecipeTest, RejectsCodeBuiltRecipesNamingTheField) {
  Recipe bad_damp;
  bad_damp.damp.fraction = -0.5;
  EXPECT_THAT(ValidateRecipe(bad_damp).message(), HasSubstr("damp: -0.5"));

  Recipe bad_override;
  bad_override.overrides.push_back(LayerOverride{});
  bad_override.overrides[0].match = "(";
  bad_override.overrides[0].bits = 8;
  EXPECT_THAT(ValidateRecipe(bad_override).message(),
              HasSubstr("overrides[0].match: cannot compile regex"));

  Recipe empty_ignore;
  empty_ignore.ignore = {"lm_head", ""};
  EXPECT_THAT(ValidateRecipe(empty_ignore).message(),
              HasSubstr("ignore[1]: empty pattern"));

  Recipe nan_gate;
  nan_gate.gates.min_top1_agreement = std::nan("");
  EXPECT_THAT(ValidateRecipe(nan_gate).message(),
              HasSubstr("gates.min_top1_agreement"));
}

struct BadRecipe {
  std::string file;
  std::string expected_substring;
};

std::vector<BadRecipe> ReadExpectedTsv(const std::string& dir) {
  std::ifstream in(JoinPath(dir, "expected.tsv"));
  std::vector<BadRecipe> cases;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> fields = absl::StrSplit(line, '\t');
    if (fields.size() != 2) {
      ADD_FAILURE() << "expected.tsv: bad line: " << line;
      continue;
    }
    cases.push_back({fields[0], fields[1]});
  }
  return cases;
}

std::set<std::string> RecipeFilesIn(const std::string& dir) {
  std::set<std::string> files;
  DIR* handle = opendir(dir.c_str());
  if (handle == nullptr) return files;
  while (const dirent* entry = readdir(handle)) {
    const std::string name = entry->d_name;
    if (name != "." && name != ".." && name != "expected.tsv") {
      files.insert(name);
    }
  }
  closedir(handle);
  return files;
}

TEST(BadRecipesTest, EachFixtureIsRejectedNamingTheField) {
  const std::string dir = JoinPath(testing::FixturesDir(), "recipe/bad");
  const std::vector<BadRecipe> cases = ReadExpectedTsv(dir);
  ASSERT_GE(cases.size(), 20u);
  std::set<std::string> listed;
  for (const BadRecipe& bad : cases) {
    listed.insert(bad.file);
    const std::string path = JoinPath(dir, bad.file);
    absl::StatusOr<Recipe> recipe = LoadRecipe(path);
    if (recipe.ok()) {
      ADD_FAILURE() << bad.file << " was accepted:\n" << RecipeToJson(*recipe);
      continue;
    }
    EXPECT_EQ(recipe.status().code(), absl::StatusCode::kInvalidArgument)
        << bad.file;
    // Every message starts with the file it is about.
    EXPECT_THAT(recipe.status().message(), HasSubstr(path)) << bad.file;
    EXPECT_THAT(std::string(recipe.status().message()),
                HasSubstr(bad.expected_substring))
        << bad.file;
  }
  // Every fixture is listed, so none goes unchecked.
  for (const std::string& file : RecipeFilesIn(dir)) {
    EXPECT_TRUE(listed.count(file) == 1) << file << " is not in expected.tsv";
  }
}

TEST(GoodRecipesTest, EachFixtureParsesAndRoundTrips) {
  const std::string dir = JoinPath(testing::FixturesDir(), "recipe/good");
  const std::set<std::string> files = RecipeFilesIn(dir);
  ASSERT_GE(files.size(), 3u);
  for (const std::string& file : files) {
    absl::StatusOr<Recipe> recipe = LoadRecipe(JoinPath(dir, file));
    ASSERT_TRUE(recipe.ok()) << recipe.status();
    absl::StatusOr<Recipe> again =
        ParseRecipe(RecipeToJson(*recipe), "canonical.json");
    ASSERT_TRUE(again.ok()) << file << ": " << again.status();
    EXPECT_TRUE(*again == *recipe) << file;
  }
  // The documented example, with the pattern spelled for full matches on
  // Hugging Face names.
  absl::StatusOr<Recipe> example =
      LoadRecipe(JoinPath(dir, "gptq_w4g128.yaml"));
  ASSERT_TRUE(example.ok()) << example.status();
  Recipe expected = ExpectedExample();
  expected.overrides[0].match = "model\\.layers\\.0\\..*down_proj";
  EXPECT_TRUE(*example == expected) << RecipeToJson(*example);
}

}  // namespace
}  // namespace quant

// Runs the built quantctl program: `recipe validate` on good and bad
// recipes (exit codes 0 / 1 / 2, the error on stderr), --json's canonical
// output, and --checkpoint's per-layer plan for stories260K.
#include <sys/wait.h>

#include <cstdio>
#include <string>

#include "core/base/file_util.h"
#include "core/recipe/recipe.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/quantctl_runner.h"
#include "tests/support/test_env.h"

namespace {

using ::nlohmann::json;
using ::quant::JoinPath;
using ::quant::ReadFileToString;
using ::quant::WriteFileAtomically;
using ::testing::HasSubstr;

using ::quant::testing::Quote;
using ::quant::testing::RunQuantctl;
using ::quant::testing::RunResult;

std::string WriteRecipe(const std::string& contents) {
  const std::string path =
      JoinPath(quant::testing::MakeTempDir(), "recipe.yaml");
  EXPECT_TRUE(WriteFileAtomically(path, contents).ok()) << path;
  return path;
}

constexpr char kRecipe[] =
    "method: gptq\nbits: 4\ngroup_size: 32\n"
    "overrides:\n"
    "  - match: 'model\\.layers\\.0\\..*down_proj'\n    bits: 8\n"
    "  - match: 'no_such_layer'\n    bits: 8\n";

TEST(QuantctlRecipeTest, ValidRecipeExitsZero) {
  const std::string path = WriteRecipe(kRecipe);
  const RunResult result = RunQuantctl("recipe validate " + Quote(path));
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_THAT(result.out, HasSubstr("valid recipe"));
}

TEST(QuantctlRecipeTest, JsonIsTheCanonicalForm) {
  const std::string path = WriteRecipe(kRecipe);
  const RunResult result = RunQuantctl("recipe validate --json " + Quote(path));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  absl::StatusOr<quant::Recipe> recipe = quant::LoadRecipe(path);
  ASSERT_TRUE(recipe.ok()) << recipe.status();
  EXPECT_EQ(result.out, quant::RecipeToJson(*recipe) + "\n");
}

TEST(QuantctlRecipeTest, InvalidRecipeExitsOneWithTheFieldOnStderr) {
  const std::string path = WriteRecipe("bits: 4\ncalibration:\n  smaples: 1\n");
  const RunResult result = RunQuantctl("recipe validate " + Quote(path));
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.err, HasSubstr(path + ":3:3: calibration.smaples: "
                                           "unknown field"));
  EXPECT_EQ(result.out, "");
}

TEST(QuantctlRecipeTest, UsageErrorsExitTwo) {
  const std::string path = WriteRecipe(kRecipe);
  EXPECT_EQ(RunQuantctl("recipe " + Quote(path)).exit_code, 2);
  const RunResult wrong = RunQuantctl("recipe check " + Quote(path));
  EXPECT_EQ(wrong.exit_code, 2);
  EXPECT_THAT(wrong.err, HasSubstr("unknown subcommand \"check\""));
  EXPECT_EQ(
      RunQuantctl("recipe validate " + Quote(path) + " --bogus").exit_code, 2);
}

TEST(QuantctlRecipeTest, CheckpointPlanListsEveryLayerAndWarns) {
  const std::string checkpoint =
      quant::testing::SharedPath("models/stories260K/hf-f32");
  QUANT_REQUIRE_SHARED(checkpoint);
  const std::string path = WriteRecipe(kRecipe);
  const RunResult result = RunQuantctl("recipe validate --json --checkpoint " +
                                       Quote(checkpoint) + " " + Quote(path));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const json plan = json::parse(result.out, nullptr, false);
  ASSERT_FALSE(plan.is_discarded()) << result.out;
  // The embedding plus 7 linear layers per block; lm_head is tied in
  // stories260K, so not a layer of its own.
  const json config = json::parse(
      ReadFileToString(JoinPath(checkpoint, "config.json")).value_or(""),
      nullptr, false);
  ASSERT_TRUE(config.contains("num_hidden_layers"));
  const int blocks = config["num_hidden_layers"].get<int>();
  ASSERT_EQ(plan["layers"].size(), 1u + 7u * blocks);
  int eight_bit = 0;
  for (const json& layer : plan["layers"]) {
    if (layer["keep_unquantized"].get<bool>()) {
      EXPECT_EQ(layer["name"], "model.embed_tokens");
      continue;
    }
    EXPECT_EQ(layer["group_size"], 32);
    // Groups of 32 tile hidden_size but not intermediate_size (down_proj's
    // K): the plan notes it, the recipe stays valid.
    const std::string name = layer["name"].get<std::string>();
    const bool is_down = name.find("down_proj") != std::string::npos;
    const int k = config[is_down ? "intermediate_size" : "hidden_size"];
    if (k % 32 == 0) {
      EXPECT_FALSE(layer.contains("note")) << name;
    } else {
      EXPECT_EQ(layer.value("note", ""),
                "group_size 32 does not divide K=" + std::to_string(k))
          << name;
    }
    if (layer["bits"] == 8) {
      ++eight_bit;
      EXPECT_EQ(layer["name"], "model.layers.0.mlp.down_proj");
    }
  }
  EXPECT_EQ(eight_bit, 1);
  ASSERT_EQ(plan["warnings"].size(), 1u);
  EXPECT_THAT(plan["warnings"][0].get<std::string>(),
              HasSubstr("overrides[1]"));
  EXPECT_THAT(result.err, HasSubstr("warning: overrides[1]"));
}

}  // namespace

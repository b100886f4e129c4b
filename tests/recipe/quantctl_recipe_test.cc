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

// --estimate: the job's plan, the packed checkpoint's size as the plan
// predicts it, and a time on this machine's measured rates.
TEST(QuantctlRecipeTest, EstimateGivesThePlanSizeAndTime) {
  const std::string checkpoint =
      quant::testing::SharedPath("models/stories260K/hf-f32");
  QUANT_REQUIRE_SHARED(checkpoint);
  const std::string path = WriteRecipe(
      "method: gptq\nbits: 4\ngroup_size: 32\nformat: compressed-tensors\n"
      "calibration:\n  samples: 8\n  seq_len: 64\n  heldout_samples: 4\n");
  const RunResult result =
      RunQuantctl("recipe validate --json --estimate --checkpoint " +
                  Quote(checkpoint) + " " + Quote(path));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const json plan = json::parse(result.out, nullptr, false);
  ASSERT_TRUE(plan.contains("estimate")) << result.out;
  const json& e = plan["estimate"];
  EXPECT_EQ(e["blocks"], 5);
  EXPECT_EQ(e["tasks"], 6);
  EXPECT_EQ(e["calibration_tokens"], 8 * 64);
  EXPECT_EQ(e["heldout_tokens"], 4 * 64);
  // Groups of 32 do not tile down_proj's K = 172: kept, in every block.
  EXPECT_EQ(e["packed_layers"], 30);
  EXPECT_EQ(e["kept_layers"], 5);
  EXPECT_LT(e["output_bytes"].get<int64_t>(), e["source_bytes"].get<int64_t>());
  ASSERT_TRUE(e["expected_seconds"].is_number()) << e.dump();
  EXPECT_GT(e["expected_seconds"].get<double>(), 0);
  EXPECT_THAT(e["where"].get<std::string>(), HasSubstr("this machine"));

  const RunResult text =
      RunQuantctl("recipe validate --estimate --checkpoint " +
                  Quote(checkpoint) + " " + Quote(path));
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr("plan: 5 blocks + finalize = 6 tasks"));
  EXPECT_THAT(text.out, HasSubstr("30 layers packed, 5 kept unquantized"));
  EXPECT_THAT(text.out, HasSubstr("on this machine"));

  // Without a checkpoint there is nothing to estimate: a usage error.
  EXPECT_EQ(RunQuantctl("recipe validate --estimate " + Quote(path)).exit_code,
            2);
}

}  // namespace

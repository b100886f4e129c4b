// Runs the built quantctl program: `inspect --json` output, help, and exit
// codes (0 ok, 1 error, 2 usage).
#include <sys/wait.h>

#include <cstdio>
#include <string>

#include "core/base/file_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/quantctl_runner.h"
#include "tests/support/test_env.h"

namespace quant {
namespace {

using ::quant::testing::QuantctlPath;
using ::quant::testing::Quote;
using ::quant::testing::RunQuantctl;
using ::quant::testing::RunResult;

using ::testing::HasSubstr;
using ::testing::Not;

class QuantctlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string binary = quant::testing::BinaryDir() + "/client/quantctl";
    ASSERT_TRUE(quant::testing::PathExists(binary))
        << binary << " is not built (target quantctl)";
  }
};

TEST_F(QuantctlTest, InspectJson) {
  const std::string dir =
      quant::testing::SharedPath("models/stories260K/hf-f32");
  QUANT_REQUIRE_SHARED(dir);
  const RunResult result = RunQuantctl("inspect " + Quote(dir) + " --json");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const nlohmann::json report =
      nlohmann::json::parse(result.out, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(report.is_discarded()) << result.out;
  EXPECT_EQ(report["architecture"], "LlamaForCausalLM");
  EXPECT_EQ(report["model_type"], "llama");
  EXPECT_EQ(report["num_blocks"], 5);
  EXPECT_EQ(report["config"]["hidden_size"], 64);
  EXPECT_EQ(report["config"]["intermediate_size"], 172);
  EXPECT_EQ(report["config"]["num_key_value_heads"], 4);
  EXPECT_EQ(report["sharded"], false);
  EXPECT_EQ(report["linear_layers"].size(), 35u);
  EXPECT_EQ(report["tensors"].size(), 47u);
  const nlohmann::json& down = report["linear_layers"][6];
  EXPECT_EQ(down["type"], "down_proj");
  EXPECT_EQ(down["in_features"], 172);
  EXPECT_EQ(down["gptq_v1"]["4"]["qweight_fits"], false);
}

TEST_F(QuantctlTest, InspectTextWithCheckFinite) {
  const std::string dir =
      quant::testing::SharedPath("models/stories260K/hf-bf16");
  QUANT_REQUIRE_SHARED(dir);
  // --nojson: the negated form of a boolean flag.
  const RunResult result =
      RunQuantctl("inspect --check_finite --nojson " + Quote(dir));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_THAT(result.out, HasSubstr("LlamaForCausalLM"));
  EXPECT_THAT(result.out, HasSubstr("BF16"));
}

TEST_F(QuantctlTest, HelpListsCommandsAndFlags) {
  RunResult result = RunQuantctl("--help");
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_THAT(result.out, HasSubstr("inspect"));

  result = RunQuantctl("inspect --help");
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_THAT(result.out, HasSubstr("Usage: quantctl inspect CHECKPOINT_DIR"));
  EXPECT_THAT(result.out, HasSubstr("Example:"));
  EXPECT_THAT(result.out, HasSubstr("--json"));
  EXPECT_THAT(result.out, HasSubstr("--check_finite"));

  result = RunQuantctl("help inspect");
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_THAT(result.out, HasSubstr("--json"));
}

TEST_F(QuantctlTest, UsageErrorsExitTwo) {
  RunResult result = RunQuantctl("frobnicate");
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_THAT(result.err, HasSubstr("unknown command \"frobnicate\""));

  result = RunQuantctl("");
  EXPECT_EQ(result.exit_code, 2);

  result = RunQuantctl("--json inspect /tmp");
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_THAT(result.err, HasSubstr("expected a command before any flag"));

  result = RunQuantctl("inspect");
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_THAT(result.err, HasSubstr("expected 1 argument, got 0"));

  result = RunQuantctl("inspect --no_such_flag /tmp");
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_THAT(result.err, HasSubstr("unknown flag --no_such_flag"));

  result = RunQuantctl("inspect --json=perhaps /tmp");
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_THAT(result.err, HasSubstr("--json"));
}

TEST_F(QuantctlTest, MissingDirectoryExitsOne) {
  const std::string dir = quant::testing::MakeTempDir() + "/no-such-model";
  const RunResult result = RunQuantctl("inspect " + Quote(dir) + " --json");
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.err, HasSubstr(dir));
  EXPECT_TRUE(result.out.empty()) << result.out;
}

// A mixture-of-experts checkpoint: inspect reports the router, recipe
// validate does the tokens-per-expert arithmetic, quantize refuses before
// any work and says why.
TEST_F(QuantctlTest, MixtureOfExpertsIsInspectedAndItsExpertsPlanned) {
  const std::string dir = quant::testing::FixturesDir() + "/forward/qwen3_moe";
  RunResult result = RunQuantctl("inspect " + Quote(dir) + " --json");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const nlohmann::json report =
      nlohmann::json::parse(result.out, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(report.is_discarded()) << result.out;
  EXPECT_EQ(report["architecture"], "Qwen3MoeForCausalLM");
  EXPECT_EQ(report["config"]["moe"]["num_experts"], 8);
  EXPECT_EQ(report["config"]["moe"]["experts_per_token"], 2);
  EXPECT_EQ(report["config"]["moe"]["moe_blocks"], nlohmann::json({0, 2}));
  EXPECT_TRUE(report["unexpected_tensors"].empty());

  const std::string recipe = quant::testing::MakeTempDir() + "/r.yaml";
  ASSERT_TRUE(WriteFileAtomically(recipe,
                                  "method: gptq\ngroup_size: 16\n"
                                  "calibration: {samples: 4, seq_len: 16}\n")
                  .ok());
  result = RunQuantctl("recipe validate " + Quote(recipe) + " --checkpoint " +
                       Quote(dir));
  ASSERT_EQ(result.exit_code, 0) << result.err;
  // 4 x 16 tokens x top-2 / 8 experts = 16 per expert: below gate/up's
  // K = 32, at down's K = 16.
  EXPECT_THAT(result.out, HasSubstr("experts: 64 calibration tokens x top-2 "
                                    "/ 8 experts = 16 tokens per expert"));
  EXPECT_THAT(result.out, HasSubstr("expert gate/up: K = 32, rank-deficient"));
  // The experts' plan, one row per block and layer type, and the policy.
  EXPECT_THAT(result.out,
              HasSubstr("experts (moe: routing natural, min_tokens_per_expert "
                        "0, on_starved_expert rtn), every expert of a block "
                        "alike:"));
  EXPECT_THAT(result.out, HasSubstr("model.layers.2.mlp.experts.*.down_proj  "
                                    "gptq 4-bit group_size 16"));
  EXPECT_THAT(result.out, Not(HasSubstr("model.layers.1.mlp.experts")));

  // An override that would quantize a router is refused, naming it.
  ASSERT_TRUE(WriteFileAtomically(recipe,
                                  "method: gptq\ngroup_size: 16\n"
                                  "calibration: {samples: 4, seq_len: 16}\n"
                                  "overrides: [{match: '.*mlp\\.gate', "
                                  "bits: 8}]\n")
                  .ok());
  result = RunQuantctl("recipe validate " + Quote(recipe) + " --checkpoint " +
                       Quote(dir));
  EXPECT_EQ(result.exit_code, 1) << result.out;
  EXPECT_THAT(result.err,
              HasSubstr("model.layers.0.mlp.gate: overrides[0] would quantize "
                        "this mixture-of-experts router"));
}

}  // namespace
}  // namespace quant

// `quantctl check` and the runtime conformance check every finalize runs,
// end to end on checkpoints this project packs: a synthetic Llama whose
// shapes fit vLLM's Marlin kernel loads in both formats, with a fused
// layer at its own bits too (the writer names the fused layer for vLLM);
// stories260K (hidden size 64) packed one group per row fits no vLLM
// kernel, and the recipe gate runtime: vllm fails its verdict.
#include <string>

#include "absl/strings/str_cat.h"
#include "bench/synth/synth_checkpoint.h"
#include "core/base/file_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/quantctl_runner.h"
#include "tests/support/test_env.h"

namespace quant {
namespace {

using ::quant::testing::Quote;
using ::quant::testing::RunQuantctl;
using ::quant::testing::RunResult;
using ::testing::HasSubstr;

constexpr char kRecipe[] = R"(method: rtn
bits: 4
group_size: 128
calibration:
  samples: 4
  seq_len: 64
  heldout_fraction: 0.1
)";

class CheckCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    stories_ = testing::SharedPath("models/stories260K/hf-f32");
    text_ = testing::SharedPath("data/tinystories_val.txt");
    QUANT_REQUIRE_SHARED(stories_);
    QUANT_REQUIRE_SHARED(text_);
    temp_ = testing::MakeTempDir();
  }

  // hidden 256 (4 heads of 64, 2 KV heads), MLP 512, 2 blocks: every
  // layer's K and N fit Marlin (K % 128, N % 64).
  std::string Synth() {
    synth::SynthOptions options;
    options.out_dir = temp_ + "/synth";
    options.vocab_from = stories_;
    options.hidden = 256;
    options.intermediate = 512;
    options.layers = 2;
    options.heads = 4;
    options.kv_heads = 2;
    options.seed = 7;
    EXPECT_TRUE(synth::WriteSynthCheckpoint(options).ok());
    return options.out_dir;
  }

  RunResult Quantize(const std::string& model, const std::string& recipe_text,
                     const std::string& out) {
    const std::string recipe = absl::StrCat(out, ".yaml");
    EXPECT_TRUE(WriteFileAtomically(recipe, recipe_text).ok());
    return RunQuantctl("quantize --local --checkpoint " + Quote(model) +
                       " --calibration " + Quote(text_) + " --recipe " +
                       Quote(recipe) + " --out " + Quote(out));
  }

  nlohmann::json Audit(const std::string& out) {
    auto text = ReadFileToString(out + "/audit.json");
    EXPECT_TRUE(text.ok()) << text.status();
    return nlohmann::json::parse(text.value_or("{}"));
  }

  std::string stories_;
  std::string text_;
  std::string temp_;
};

TEST_F(CheckCommandTest, SynthLlamaLoadsOnMarlinInBothFormats) {
  const std::string model = Synth();
  // Block 0's q/k/v at 8 bits: vLLM must read the fused qkv_proj at 8
  // bits, which it does only if the config names qkv_proj.
  const std::string mixed = absl::StrCat(
      kRecipe,
      "overrides:\n  - match: 'model\\.layers\\.0\\.self_attn\\.[qkv]_proj'\n"
      "    bits: 8\n");
  for (const char* format : {"gptq", "compressed-tensors"}) {
    SCOPED_TRACE(format);
    const std::string out = absl::StrCat(temp_, "/", format);
    const RunResult run =
        Quantize(model, absl::StrCat(mixed, "format: ", format, "\n"), out);
    ASSERT_EQ(run.exit_code, 0) << run.err;
    EXPECT_THAT(run.out, HasSubstr("runtime vllm ("));
    EXPECT_THAT(run.out, HasSubstr("): loads; layers on marlin 8"));

    RunResult check = RunQuantctl("check " + Quote(out) + " --json");
    ASSERT_EQ(check.exit_code, 0) << check.out << check.err;
    const nlohmann::json j = nlohmann::json::parse(check.out);
    EXPECT_EQ(j["loads"], true) << j["problems"];
    EXPECT_EQ(j["kernels"]["marlin"], 8);
    EXPECT_EQ(j["layers"][0]["name"], "model.layers.0.self_attn.qkv_proj");
    EXPECT_EQ(j["layers"][0]["bits"], 8);
    EXPECT_EQ(j["layers"][4]["bits"], 4);

    check = RunQuantctl("check " + Quote(out) + " --compute_capability 90");
    EXPECT_EQ(check.exit_code, 0) << check.out;
    EXPECT_THAT(check.out, HasSubstr("8 layers on machete"));
    check = RunQuantctl("check " + Quote(out) + " --runtime transformers");
    EXPECT_EQ(check.exit_code, 0) << check.out;
    EXPECT_THAT(check.out, HasSubstr("14 layers on torch"));

    // The finalize put both checks into audit.json.
    const nlohmann::json runtime = Audit(out)["gates"]["runtime"];
    ASSERT_EQ(runtime.size(), 2u);
    EXPECT_EQ(runtime[0]["runtime"], "vllm");
    EXPECT_EQ(runtime[0]["loads"], true);
    EXPECT_EQ(runtime[1]["runtime"], "transformers");
    RunResult report = RunQuantctl("report " + Quote(out));
    EXPECT_EQ(report.exit_code, 0) << report.err;
    EXPECT_THAT(report.out, HasSubstr("runtime transformers ("));
    // A damaged runtime entry is named, not printed.
    nlohmann::json audit = Audit(out);
    audit["gates"]["runtime"][0]["kernels"]["marlin"] = "8";
    ASSERT_TRUE(WriteFileAtomically(out + "/audit.json", audit.dump()).ok());
    report = RunQuantctl("report " + Quote(out));
    EXPECT_EQ(report.exit_code, 1);
    EXPECT_THAT(report.err, HasSubstr("gates.runtime[0].kernels"));
  }
}

TEST_F(CheckCommandTest, DamagedCheckpointIsNamedAndExitsThree) {
  const std::string model = Synth();
  const std::string out = temp_ + "/w4";
  ASSERT_EQ(Quantize(model, kRecipe, out).exit_code, 0);
  // A config that says 8 bits over 4-bit tensors.
  auto text = ReadFileToString(out + "/config.json");
  ASSERT_TRUE(text.ok());
  nlohmann::json config = nlohmann::json::parse(*text);
  config["quantization_config"]["bits"] = 8;
  ASSERT_TRUE(WriteFileAtomically(out + "/config.json", config.dump()).ok());
  const RunResult check = RunQuantctl("check " + Quote(out));
  EXPECT_EQ(check.exit_code, 3) << check.out << check.err;
  EXPECT_THAT(check.out, HasSubstr("vllm: would NOT load"));
  EXPECT_THAT(check.out,
              HasSubstr("model.layers.0.self_attn.q_proj.qweight has shape "
                        "[32, 256]; the loader wants [64, 256]"));
  EXPECT_THAT(check.err, HasSubstr("would not load in vllm"));
}

TEST_F(CheckCommandTest, StoriesDoesNotFitVllmAndTheRuntimeGateFails) {
  // One group per row: stories260K's K = 64 is too narrow for Marlin and
  // Exllama needs groups.
  std::string per_row = kRecipe;
  per_row.replace(per_row.find("group_size: 128"), 15, "group_size: 0");
  const std::string out = temp_ + "/stories";
  const RunResult run = Quantize(
      stories_, absl::StrCat(per_row, "gates:\n  runtime: vllm\n"), out);
  // Checked and written: the verdict is FAIL, not an error.
  EXPECT_EQ(run.exit_code, 3) << run.err;
  EXPECT_THAT(run.out, HasSubstr("runtime vllm (gptq_marlin): would NOT load"));
  EXPECT_THAT(run.out, HasSubstr("gate loads_in_vllm"));
  EXPECT_THAT(run.out, HasSubstr("verdict: FAIL"));
  const nlohmann::json audit = Audit(out);
  EXPECT_EQ(audit["gates"]["runtime"][0]["loads"], false);
  EXPECT_EQ(audit["gates"]["checks"].back()["gate"], "loads_in_vllm");

  const RunResult check = RunQuantctl("check " + Quote(out));
  EXPECT_EQ(check.exit_code, 3) << check.out;
  EXPECT_THAT(check.out,
              HasSubstr("marlin: input_size_per_partition = 64 is not "
                        "divisible by min_thread_k = 128"));
  EXPECT_THAT(check.out, HasSubstr("exllama: needs a group size"));
  // transformers has no kernel constraints: it loads.
  EXPECT_EQ(
      RunQuantctl("check " + Quote(out) + " --runtime transformers").exit_code,
      0);

  // Groups of 32 divide K: Exllama takes q/k/v and o (stories260K is
  // float32, served as float16), and the gate passes.
  std::string grouped = kRecipe;
  grouped.replace(grouped.find("group_size: 128"), 15, "group_size: 32");
  const std::string out32 = temp_ + "/stories32";
  const RunResult run32 = Quantize(
      stories_, absl::StrCat(grouped, "gates:\n  runtime: vllm\n"), out32);
  EXPECT_EQ(run32.exit_code, 0) << run32.out;
  EXPECT_THAT(run32.out, HasSubstr("runtime vllm (gptq_marlin): loads; "
                                   "layers on exllama 10, unquantized 10"));
}

TEST_F(CheckCommandTest, UsageErrors) {
  RunResult run = RunQuantctl("check " + Quote(temp_) + " --runtime sglang");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.err, HasSubstr("--runtime: \"sglang\""));
  run = RunQuantctl("check " + Quote(temp_) + " --compute_capability 7");
  EXPECT_EQ(run.exit_code, 2);
  run = RunQuantctl("check " + Quote(temp_ + "/missing"));
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_THAT(run.err, HasSubstr("config.json"));
}

}  // namespace
}  // namespace quant

// A mixture-of-experts model quantized end to end by `quantctl quantize
// --local`: a synthetic Qwen3-MoE and Mixtral (quant-synth-checkpoint's
// --experts) with the stories260K tokenizer. Every expert is packed under its
// own name; the packed checkpoint reopens (the finalize's gates ran on it
// through the packed reader); routers are kept and listed as unquantized;
// audit.json has a row per expert layer whose calibration tokens add up to
// top-k x the block's tokens under natural routing, and a per-block summary;
// the starved-expert policy is applied and reported.
#include <cstdint>
#include <map>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "bench/synth/synth_checkpoint.h"
#include "core/base/file_util.h"
#include "core/forward/block_weights.h"
#include "core/model/checkpoint.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/quantctl_runner.h"
#include "tests/support/small_moe_model.h"
#include "tests/support/test_env.h"

namespace quant {
namespace {

using ::quant::testing::Quote;
using ::quant::testing::RunQuantctl;
using ::quant::testing::RunResult;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

constexpr int kExperts = quant::testing::kSmallMoeExperts;
constexpr int kTopK = quant::testing::kSmallMoeTopK;
constexpr int kSamples = 8;
constexpr int kSeqLen = 64;

std::string WriteModel(const std::string& family) {
  const synth::SynthOptions options = quant::testing::SmallMoeModel(
      quant::testing::MakeTempDir() + "/" + family,
      quant::testing::SharedPath("models/stories260K/hf-f32"), family);
  absl::StatusOr<int64_t> written = synth::WriteSynthCheckpoint(options);
  EXPECT_TRUE(written.ok()) << written.status();
  return options.out_dir;
}

CheckpointOptions PackedOptions() {
  CheckpointOptions options;
  options.allow_packed = true;
  return options;
}

nlohmann::json ReadJson(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFileToString(path);
  EXPECT_TRUE(text.ok()) << text.status();
  return nlohmann::json::parse(text.ok() ? *text : "", nullptr, false);
}

RunResult Quantize(const std::string& model, const std::string& recipe_text,
                   const std::string& out) {
  const std::string recipe = quant::testing::MakeTempDir() + "/r.yaml";
  EXPECT_TRUE(WriteFileAtomically(recipe, recipe_text).ok());
  return RunQuantctl(
      "quantize --local --checkpoint " + Quote(model) + " --calibration " +
      Quote(quant::testing::SharedPath("data/tinystories_val.txt")) +
      " --recipe " + Quote(recipe) + " --out " + Quote(out));
}

std::string Recipe(const std::string& moe, double max_starved = 1.0) {
  return absl::StrCat(
      "method: gptq\ngroup_size: 32\n"
      "calibration: {samples: ",
      kSamples, ", seq_len: ", kSeqLen,
      ", heldout_count: 20}\n"
      "gates: {max_ppl_ratio: 100, max_starved_experts: ",
      max_starved, "}\n", moe);
}

// The gate check named `gate` in audit.json.
nlohmann::json GateCheck(const nlohmann::json& audit, const std::string& gate) {
  for (const nlohmann::json& check : audit["gates"]["checks"]) {
    if (check["gate"] == gate) return check;
  }
  ADD_FAILURE() << "no gate " << gate << " in " << audit["gates"].dump();
  return nlohmann::json::object();
}

// `quantctl check --json` of a packed checkpoint: the kernel vLLM would run
// each layer named `suffix` on ("" when it would not load).
std::map<std::string, std::string> VllmKernels(const std::string& out,
                                               const std::string& suffix) {
  const RunResult check = RunQuantctl("check --json " + Quote(out));
  EXPECT_EQ(check.exit_code, 0) << check.out << check.err;
  const nlohmann::json result =
      nlohmann::json::parse(check.out, nullptr, false);
  std::map<std::string, std::string> kernels;
  if (!result.is_object()) return kernels;
  for (const nlohmann::json& layer : result["layers"]) {
    const std::string name = layer["name"];
    if (absl::EndsWith(name, suffix)) kernels[name] = layer["kernel"];
  }
  return kernels;
}

TEST(MoeQuantizeTest, QwenMoeIsQuantizedExpertByExpertAndReopens) {
  QUANT_REQUIRE_SHARED(quant::testing::SharedPath("models/stories260K/hf-f32"));
  const std::string model = WriteModel("qwen3_moe");
  const std::string out = quant::testing::MakeTempDir() + "/out";
  // min_tokens_per_expert above any expert's share (kSamples x kSeqLen x
  // top-2 / 4 = 256 on average): every expert is starved and rounded.
  const RunResult run =
      Quantize(model, Recipe("moe: {min_tokens_per_expert: 100000}\n"), out);
  ASSERT_EQ(run.exit_code, 0) << run.err;

  const nlohmann::json audit = ReadJson(out + "/audit.json");
  ASSERT_TRUE(audit.is_object());
  EXPECT_EQ(audit["verdict"], "PASS");
  std::map<int, int64_t> gate_tokens;  // Per block, over experts.
  int expert_rows = 0;
  for (const nlohmann::json& layer : audit["layers"]) {
    if (!layer.contains("expert")) continue;
    ++expert_rows;
    EXPECT_TRUE(layer["packed"].get<bool>()) << layer.dump();
    ASSERT_TRUE(layer.contains("fallback")) << layer.dump();
    EXPECT_EQ(layer["fallback"]["action"], "rtn");
    EXPECT_EQ(layer["method"], "rtn");  // GPTQ planned, RTN as fallback.
    const std::string name = layer["name"];
    const int block = name[13] - '0';
    if (layer["type"] == "gate_proj") {
      gate_tokens[block] += layer["calibration_tokens"].get<int64_t>();
    }
  }
  EXPECT_EQ(expert_rows, 2 * kExperts * 3);
  // Natural routing: each token goes to top-k experts of every block.
  ASSERT_EQ(gate_tokens.size(), 2u);
  for (const auto& [block, tokens] : gate_tokens) {
    EXPECT_EQ(tokens, int64_t{kTopK} * kSamples * kSeqLen) << block;
  }
  const nlohmann::json& summary = audit["summary"]["moe_blocks"];
  ASSERT_EQ(summary.size(), 2u);
  EXPECT_EQ(summary[0]["experts"], kExperts);
  EXPECT_EQ(summary[0]["starved"], kExperts);
  EXPECT_LE(summary[0]["calibration_tokens"]["min"].get<int64_t>(),
            summary[0]["calibration_tokens"]["max"].get<int64_t>());
  // `quantctl report` shows the per-block summary and the worst experts.
  const RunResult report = RunQuantctl("report " + Quote(out));
  ASSERT_EQ(report.exit_code, 0) << report.err;
  EXPECT_THAT(report.out,
              HasSubstr("experts of block 1: 4 experts; calibration tokens "
                        "per expert min "));
  EXPECT_THAT(report.out, HasSubstr("4 starved"));
  EXPECT_THAT(report.out, HasSubstr("worst experts (held-out):\n  "
                                    "model.layers."));
  EXPECT_THAT(report.out, HasSubstr(", fallback rtn"));
  EXPECT_THAT(report.out,
              HasSubstr("gate max_starved_experts       value 1.00000"));
  // Every expert starved: at the gate's threshold of 1, it passes.
  EXPECT_EQ(GateCheck(audit, "max_starved_experts")["value"], 1.0);
  EXPECT_TRUE(GateCheck(audit, "max_starved_experts")["passed"].get<bool>());

  // The router is kept, and the format says so; experts are packed under
  // their own names.
  const nlohmann::json config = ReadJson(out + "/config.json");
  const nlohmann::json& dynamic = config["quantization_config"]["dynamic"];
  EXPECT_TRUE(dynamic.contains("-:^model\\.layers\\.0\\.mlp\\.gate$"))
      << dynamic.dump();
  absl::StatusOr<std::unique_ptr<Checkpoint>> packed =
      Checkpoint::Open(out, PackedOptions());
  ASSERT_TRUE(packed.ok()) << packed.status();
  EXPECT_TRUE((*packed)->IsPacked("model.layers.1.mlp.experts.3.down_proj"));
  EXPECT_FALSE((*packed)->IsPacked("model.layers.1.mlp.gate"));
  // Dequantized experts are close to the source's, not equal to them.
  absl::StatusOr<std::unique_ptr<Checkpoint>> source = Checkpoint::Open(model);
  ASSERT_TRUE(source.ok()) << source.status();
  absl::StatusOr<BlockWeights> theirs = LoadBlockWeights(**packed, 1);
  absl::StatusOr<BlockWeights> ours = LoadBlockWeights(**source, 1);
  ASSERT_TRUE(theirs.ok()) << theirs.status();
  ASSERT_TRUE(ours.ok()) << ours.status();
  const RowMatrixF& a = theirs->moe->experts[2].down.weight;
  const RowMatrixF& b = ours->moe->experts[2].down.weight;
  const double relative = (a - b).norm() / b.norm();
  EXPECT_GT(relative, 1e-4);
  EXPECT_LT(relative, 0.3);
  EXPECT_EQ(theirs->moe->router, ours->moe->router);
  // vLLM would build each block's experts as one FusedMoE layer; hidden 64
  // is too narrow for the MoE Marlin kernel, so MoeWNA16 (group 32 fits).
  EXPECT_THAT(VllmKernels(out, ".experts"),
              ElementsAre(Pair("model.layers.0.mlp.experts", "moe_wna16"),
                          Pair("model.layers.1.mlp.experts", "moe_wna16")));
  EXPECT_THAT(VllmKernels(out, ".gate"),
              ElementsAre(Pair("model.layers.0.mlp.gate", "unquantized"),
                          Pair("model.layers.1.mlp.gate", "unquantized")));
}

TEST(MoeQuantizeTest, MixtralWithCompressedTensorsAndAllExperts) {
  QUANT_REQUIRE_SHARED(quant::testing::SharedPath("models/stories260K/hf-f32"));
  const std::string model = WriteModel("mixtral");
  const std::string out = quant::testing::MakeTempDir() + "/out";
  const RunResult run = Quantize(model,
                                 Recipe("format: compressed-tensors\n"
                                        "moe: {routing: all_experts}\n",
                                        /*max_starved=*/0),
                                 out);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const nlohmann::json audit = ReadJson(out + "/audit.json");
  int expert_rows = 0;
  for (const nlohmann::json& layer : audit["layers"]) {
    if (!layer.contains("expert")) continue;
    ++expert_rows;
    // Every expert calibrated on every token, GPTQ throughout.
    EXPECT_EQ(layer["calibration_tokens"], kSamples * kSeqLen);
    EXPECT_FALSE(layer.contains("fallback")) << layer.dump();
    EXPECT_EQ(layer["hessian"]["tokens"], kSamples * kSeqLen);
  }
  EXPECT_EQ(expert_rows, 2 * kExperts * 3);
  EXPECT_EQ(audit["summary"]["moe_blocks"][1]["starved"], 0);
  EXPECT_EQ(GateCheck(audit, "max_starved_experts")["value"], 0.0);
  EXPECT_EQ(audit["verdict"], "PASS");
  const nlohmann::json config = ReadJson(out + "/config.json");
  const nlohmann::json& ignore = config["quantization_config"]["ignore"];
  EXPECT_THAT(ignore.dump(), HasSubstr("model.layers.1.block_sparse_moe.gate"));
  absl::StatusOr<std::unique_ptr<Checkpoint>> packed =
      Checkpoint::Open(out, PackedOptions());
  ASSERT_TRUE(packed.ok()) << packed.status();
  EXPECT_TRUE(
      (*packed)->IsPacked("model.layers.0.block_sparse_moe.experts.1.w3"));
  // compressed-tensors experts take the "Linear" group's scheme in vLLM,
  // on the Triton WNA16 kernel at this width.
  EXPECT_THAT(
      VllmKernels(out, ".experts"),
      ElementsAre(
          Pair("model.layers.0.block_sparse_moe.experts", "wna16_moe"),
          Pair("model.layers.1.block_sparse_moe.experts", "wna16_moe")));
}

TEST(MoeQuantizeTest, TooManyStarvedExpertsFailTheGate) {
  QUANT_REQUIRE_SHARED(quant::testing::SharedPath("models/stories260K/hf-f32"));
  const std::string model = WriteModel("qwen3_moe");
  const std::string out = quant::testing::MakeTempDir() + "/out";
  const RunResult run = Quantize(model,
                                 Recipe("moe: {min_tokens_per_expert: 100000, "
                                        "on_starved_expert: damp}\n",
                                        /*max_starved=*/0.5),
                                 out);
  EXPECT_EQ(run.exit_code, 3) << run.err;  // Gates failed.
  const nlohmann::json audit = ReadJson(out + "/audit.json");
  EXPECT_EQ(audit["verdict"], "FAIL");
  const nlohmann::json check = GateCheck(audit, "max_starved_experts");
  EXPECT_EQ(check["value"], 1.0);
  EXPECT_FALSE(check["passed"].get<bool>());
  // damp: GPTQ with damping raised by the shortfall, said per layer.
  for (const nlohmann::json& layer : audit["layers"]) {
    if (!layer.contains("expert")) continue;
    EXPECT_EQ(layer["fallback"]["action"], "damp") << layer.dump();
    EXPECT_THAT(layer["fallback"]["reason"].get<std::string>(),
                HasSubstr("damping raised from 0.01 to"));
    EXPECT_GT(layer["damp"]["used"].get<double>(), 0.01);
  }
}

TEST(MoeQuantizeTest, StarvedExpertWithPolicyFailStopsTheJobNamingIt) {
  QUANT_REQUIRE_SHARED(quant::testing::SharedPath("models/stories260K/hf-f32"));
  const std::string model = WriteModel("qwen3_moe");
  const std::string out = quant::testing::MakeTempDir() + "/out";
  const RunResult run =
      Quantize(model,
               Recipe("moe: {min_tokens_per_expert: 100000, on_starved_expert: "
                      "fail}\n"),
               out);
  EXPECT_EQ(run.exit_code, 1) << run.err;
  EXPECT_THAT(run.err, HasSubstr("moe.on_starved_expert is fail"));
  EXPECT_THAT(run.err, HasSubstr("block 0 expert "));
  EXPECT_FALSE(FileExists(out));
}

}  // namespace
}  // namespace quant

// Tests of the synthetic checkpoint generator: its output opens with the
// project's checkpoint loader with the configured shapes, weights have the
// intended scale, the seed decides the bytes, and the quant-synth-checkpoint
// and `quantctl inspect` programs accept it.
#include "bench/synth/synth_checkpoint.h"

#include <cmath>
#include <cstdio>
#include <memory>
#include <string>

#include "core/base/file_util.h"
#include "core/model/checkpoint.h"
#include "core/model/model_config.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/quantctl_runner.h"
#include "tests/support/test_env.h"

namespace quant::synth {
namespace {

using ::quant::testing::Quote;
using ::quant::testing::RunQuantctl;
using ::quant::testing::RunResult;
using ::testing::HasSubstr;

std::string VocabDir() {
  return quant::testing::SharedPath("models/stories260K/hf-f32");
}

// hidden 64, MLP 128, 2 blocks, 4 heads over 2 KV heads.
SynthOptions Small(const std::string& out, uint64_t seed) {
  SynthOptions options;
  options.out_dir = out;
  options.vocab_from = VocabDir();
  options.hidden = 64;
  options.intermediate = 128;
  options.layers = 2;
  options.heads = 4;
  options.kv_heads = 2;
  options.seed = seed;
  return options;
}

// Counted by hand from the shapes, independently of ListExpectedTensors.
constexpr int64_t kSmallParameters =
    512 * 64 +                              // tied embeddings (vocab 512)
    2 * (64 + 64 +                          // input and post-attention norms
         64 * 64 + 2 * 32 * 64 + 64 * 64 +  // q, k, v (2 heads of 16), o
         3 * 128 * 64) +                    // gate, up, down
    64;                                     // final norm

std::string ReadBytes(const std::string& path) {
  absl::StatusOr<std::string> bytes = ReadFileToString(path);
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  return bytes.ok() ? *bytes : "";
}

TEST(SynthCheckpointTest, LoadsWithConfiguredShapesAndScale) {
  QUANT_REQUIRE_SHARED(VocabDir());
  const std::string dir = quant::testing::MakeTempDir() + "/m";
  absl::StatusOr<int64_t> parameters = WriteSynthCheckpoint(Small(dir, 7));
  ASSERT_TRUE(parameters.ok()) << parameters.status();
  EXPECT_EQ(*parameters, kSmallParameters);

  CheckpointOptions options;
  options.check_finite = true;
  absl::StatusOr<std::unique_ptr<Checkpoint>> checkpoint =
      Checkpoint::Open(dir, options);
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  const ModelConfig& config = (*checkpoint)->config();
  EXPECT_EQ(config.hidden_size, 64);
  EXPECT_EQ(config.intermediate_size, 128);
  EXPECT_EQ(config.num_hidden_layers, 2);
  EXPECT_EQ(config.num_attention_heads, 4);
  EXPECT_EQ(config.num_key_value_heads, 2);
  EXPECT_EQ(config.head_dim, 16);
  EXPECT_EQ(config.vocab_size, 512);
  EXPECT_TRUE((*checkpoint)->unexpected_tensors().empty());
  EXPECT_TRUE(FileExists(dir + "/tokenizer.json"));
  EXPECT_EQ(ReadBytes(dir + "/tokenizer.json"),
            ReadBytes(VocabDir() + "/tokenizer.json"));

  absl::StatusOr<FloatTensor> k =
      (*checkpoint)->ReadFloat("model.layers.1.self_attn.k_proj.weight");
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_THAT(k->shape, ::testing::ElementsAre(32, 64));
  double sum = 0, sum_squares = 0;
  for (float v : k->data) {
    sum += v;
    sum_squares += static_cast<double>(v) * v;
  }
  const double n = static_cast<double>(k->data.size());
  // N(0, 1/64): standard deviation 0.125; 2048 samples pin it within ~3%.
  EXPECT_NEAR(std::sqrt(sum_squares / n), 0.125, 0.01);
  EXPECT_NEAR(sum / n, 0.0, 0.01);

  absl::StatusOr<FloatTensor> down =
      (*checkpoint)->ReadFloat("model.layers.0.mlp.down_proj.weight");
  ASSERT_TRUE(down.ok()) << down.status();
  EXPECT_THAT(down->shape, ::testing::ElementsAre(64, 128));
  double down_squares = 0;
  for (float v : down->data) down_squares += static_cast<double>(v) * v;
  // fan_in 128: standard deviation 1/sqrt(128).
  EXPECT_NEAR(std::sqrt(down_squares / down->data.size()),
              1.0 / std::sqrt(128.0), 0.005);

  absl::StatusOr<FloatTensor> norm =
      (*checkpoint)->ReadFloat("model.layers.0.input_layernorm.weight");
  ASSERT_TRUE(norm.ok()) << norm.status();
  for (float v : norm->data) ASSERT_EQ(v, 1.0f);
}

// The context length comes from the vocabulary's model unless set: a real
// model's 2048-token calibration windows need a longer one.
TEST(SynthCheckpointTest, MaxPositionsDefaultsToTheVocabularySource) {
  QUANT_REQUIRE_SHARED(VocabDir());
  const std::string root = quant::testing::MakeTempDir();
  absl::StatusOr<ModelConfig> source = LoadModelConfig(VocabDir());
  ASSERT_TRUE(source.ok()) << source.status();
  SynthOptions options = Small(root + "/default", 0);
  ASSERT_TRUE(WriteSynthCheckpoint(options).ok());
  absl::StatusOr<ModelConfig> written = LoadModelConfig(root + "/default");
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_EQ(written->max_position_embeddings, source->max_position_embeddings);

  options = Small(root + "/long", 0);
  options.max_positions = 2048;
  ASSERT_TRUE(WriteSynthCheckpoint(options).ok());
  written = LoadModelConfig(root + "/long");
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_EQ(written->max_position_embeddings, 2048);
  EXPECT_NE(source->max_position_embeddings, 2048);
}

TEST(SynthCheckpointTest, SeedDecidesTheBytes) {
  QUANT_REQUIRE_SHARED(VocabDir());
  const std::string root = quant::testing::MakeTempDir();
  ASSERT_TRUE(WriteSynthCheckpoint(Small(root + "/a", 1)).ok());
  ASSERT_TRUE(WriteSynthCheckpoint(Small(root + "/b", 1)).ok());
  ASSERT_TRUE(WriteSynthCheckpoint(Small(root + "/c", 2)).ok());
  const std::string a = ReadBytes(root + "/a/model.safetensors");
  ASSERT_FALSE(a.empty());
  EXPECT_TRUE(a == ReadBytes(root + "/b/model.safetensors"));
  const std::string c = ReadBytes(root + "/c/model.safetensors");
  ASSERT_EQ(a.size(), c.size());  // Same shapes, same header.
  EXPECT_FALSE(a == c);
  EXPECT_EQ(ReadBytes(root + "/a/config.json").size(),
            ReadBytes(root + "/c/config.json").size());
}

TEST(SynthCheckpointTest, Bf16HalvesTheWeights) {
  QUANT_REQUIRE_SHARED(VocabDir());
  const std::string root = quant::testing::MakeTempDir();
  SynthOptions options = Small(root + "/bf16", 3);
  options.dtype = DType::kBF16;
  ASSERT_TRUE(WriteSynthCheckpoint(options).ok());
  absl::StatusOr<std::unique_ptr<Checkpoint>> checkpoint =
      Checkpoint::Open(root + "/bf16");
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  EXPECT_EQ((*checkpoint)->config().torch_dtype, "bfloat16");
  const std::string bytes = ReadBytes(root + "/bf16/model.safetensors");
  // Header aside, two bytes per parameter.
  EXPECT_GE(bytes.size(), 2u * kSmallParameters);
  EXPECT_LT(bytes.size(), 2u * kSmallParameters + 8192);
}

TEST(SynthCheckpointTest, BadShapesNameTheFlag) {
  QUANT_REQUIRE_SHARED(VocabDir());
  const std::string root = quant::testing::MakeTempDir();
  SynthOptions options = Small(root + "/bad", 0);
  options.heads = 3;
  absl::StatusOr<int64_t> result = WriteSynthCheckpoint(options);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(result.status().message(), HasSubstr("--heads (3)"));
  options = Small(root + "/bad", 0);
  options.kv_heads = 3;
  result = WriteSynthCheckpoint(options);
  EXPECT_THAT(result.status().message(), HasSubstr("--kv_heads (3)"));
  options = Small(root + "/bad", 0);
  options.layers = 0;
  result = WriteSynthCheckpoint(options);
  EXPECT_THAT(result.status().message(), HasSubstr("--layers"));
  options = Small(root + "/bad", 0);
  options.max_positions = -1;
  result = WriteSynthCheckpoint(options);
  EXPECT_THAT(result.status().message(), HasSubstr("--max_positions"));
  options = Small(root + "/bad", 0);
  options.experts = 4;
  options.experts_per_token = 5;
  result = WriteSynthCheckpoint(options);
  EXPECT_THAT(result.status().message(),
              HasSubstr("--experts_per_token must be in 1..--experts (4), "
                        "got 5"));
  options.experts_per_token = 2;
  options.moe_family = "qwen2_moe";
  result = WriteSynthCheckpoint(options);
  EXPECT_THAT(result.status().message(),
              HasSubstr("--moe_family must be qwen3_moe or mixtral"));
  options = Small(root + "/bad", 0);
  options.vocab_from = root;  // No config.json there.
  EXPECT_FALSE(WriteSynthCheckpoint(options).ok());
  EXPECT_FALSE(FileExists(root + "/bad/config.json"));
}

TEST(SynthCheckpointTest, ExpertsMakeAMixtureOfExpertsModel) {
  QUANT_REQUIRE_SHARED(VocabDir());
  const std::string root = quant::testing::MakeTempDir();
  for (const char* family : {"qwen3_moe", "mixtral"}) {
    SCOPED_TRACE(family);
    SynthOptions options = Small(root + "/" + family, 0);
    options.experts = 8;
    options.experts_per_token = 2;
    options.expert_intermediate = 32;
    options.moe_family = family;
    absl::StatusOr<int64_t> written = WriteSynthCheckpoint(options);
    ASSERT_TRUE(written.ok()) << written.status();
    absl::StatusOr<std::unique_ptr<Checkpoint>> checkpoint =
        Checkpoint::Open(options.out_dir);
    ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
    const ModelConfig& config = (*checkpoint)->config();
    ASSERT_TRUE(config.moe.has_value());
    EXPECT_EQ(config.moe->num_experts, 8);
    EXPECT_EQ(config.moe->experts_per_token, 2);
    // Mixtral's experts are --intermediate wide.
    EXPECT_EQ(config.moe->expert_intermediate_size,
              std::string(family) == "mixtral" ? 128 : 32);
    EXPECT_TRUE(config.IsMoeBlock(0) && config.IsMoeBlock(1));
  }
}

// The programs, as scripts/bench.sh runs them: the generator prints the
// parameter count and `quantctl inspect` accepts its output.
TEST(SynthCheckpointTest, ProgramOutputPassesQuantctlInspect) {
  QUANT_REQUIRE_SHARED(VocabDir());
  const std::string dir = quant::testing::MakeTempDir() + "/prog";
  const std::string program =
      quant::testing::BinaryDir() + "/bench/synth/quant-synth-checkpoint";
  const std::string command =
      Quote(program) + " --out " + Quote(dir) + " --vocab_from " +
      Quote(VocabDir()) +
      " --hidden 64 --intermediate 128 --layers 2 --heads 4 --kv_heads 2"
      " --seed 5 --dtype bf16 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string out;
  char buffer[256];
  while (fgets(buffer, sizeof(buffer), pipe) != nullptr) out += buffer;
  ASSERT_EQ(pclose(pipe), 0) << out;
  EXPECT_THAT(out, HasSubstr(std::to_string(kSmallParameters) + " parameters"));

  const RunResult inspect =
      RunQuantctl("inspect --check_finite --json " + Quote(dir));
  ASSERT_EQ(inspect.exit_code, 0) << inspect.err;
  const nlohmann::json report =
      nlohmann::json::parse(inspect.out, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(report.is_discarded()) << inspect.out;
  EXPECT_EQ(report["architecture"], "LlamaForCausalLM");
  EXPECT_EQ(report["num_blocks"], 2);
  EXPECT_EQ(report["config"]["hidden_size"], 64);
  EXPECT_EQ(report["linear_layers"].size(), 14u);

  const RunResult bad = RunQuantctl("inspect " + Quote(dir + "/none"));
  EXPECT_NE(bad.exit_code, 0);
}

}  // namespace
}  // namespace quant::synth

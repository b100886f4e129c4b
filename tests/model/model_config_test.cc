// Tests of config.json parsing: real configs of each family, defaults, and
// errors that name the field.
#include "core/model/model_config.h"

#include <string>
#include <vector>

#include "core/base/file_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/test_env.h"

namespace quant {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string ReadFixture(const std::string& name) {
  absl::StatusOr<std::string> text = ReadFileToString(
      JoinPath(quant::testing::FixturesDir(), "model/configs/" + name));
  EXPECT_TRUE(text.ok()) << text.status();
  return text.value_or("");
}

// A minimal valid llama config with one field replaced or added.
std::string LlamaWith(const std::string& extra_fields) {
  std::string text = R"({"architectures": ["LlamaForCausalLM"],
    "model_type": "llama", "hidden_size": 64, "intermediate_size": 172,
    "num_hidden_layers": 5, "num_attention_heads": 8, "vocab_size": 512)";
  if (!extra_fields.empty()) text += ", " + extra_fields;
  return text + "}";
}

std::string ErrorOf(const std::string& text) {
  absl::StatusOr<ModelConfig> config = ParseModelConfig(text);
  EXPECT_FALSE(config.ok()) << text;
  return config.ok() ? "" : std::string(config.status().message());
}

TEST(ModelConfigTest, Stories260K) {
  const std::string dir =
      quant::testing::SharedPath("models/stories260K/hf-f32");
  QUANT_REQUIRE_SHARED(dir);
  absl::StatusOr<ModelConfig> config = LoadModelConfig(dir);
  ASSERT_TRUE(config.ok()) << config.status();
  // The figures of ../shared/models/stories260K/README.md.
  EXPECT_EQ(config->architecture, Architecture::kLlama);
  EXPECT_EQ(config->hidden_size, 64);
  EXPECT_EQ(config->intermediate_size, 172);
  EXPECT_EQ(config->num_hidden_layers, 5);
  EXPECT_EQ(config->num_attention_heads, 8);
  EXPECT_EQ(config->num_key_value_heads, 4);
  EXPECT_EQ(config->head_dim, 8);
  EXPECT_EQ(config->vocab_size, 512);
  EXPECT_EQ(config->max_position_embeddings, 512);
  EXPECT_TRUE(config->tie_word_embeddings);
  EXPECT_DOUBLE_EQ(config->rms_norm_eps, 1e-5);
  EXPECT_DOUBLE_EQ(config->rope_theta, 10000.0);
  EXPECT_FALSE(config->rope_scaling.has_value());
  EXPECT_EQ(config->torch_dtype, "float32");
  EXPECT_FALSE(config->attention_bias);
  EXPECT_FALSE(config->qk_norm);
}

TEST(ModelConfigTest, Llama32WithLlama3RopeScaling) {
  absl::StatusOr<ModelConfig> config =
      ParseModelConfig(ReadFixture("llama-3.2-1b-instruct.json"));
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->architecture, Architecture::kLlama);
  EXPECT_EQ(config->model_type, "llama");
  EXPECT_EQ(config->hidden_size, 2048);
  EXPECT_EQ(config->num_key_value_heads, 8);
  EXPECT_EQ(config->head_dim, 64);
  EXPECT_EQ(config->q_size(), 2048);
  EXPECT_EQ(config->kv_size(), 512);
  EXPECT_DOUBLE_EQ(config->rope_theta, 500000.0);
  ASSERT_TRUE(config->rope_scaling.has_value());
  EXPECT_DOUBLE_EQ(config->rope_scaling->factor, 32.0);
  EXPECT_DOUBLE_EQ(config->rope_scaling->low_freq_factor, 1.0);
  EXPECT_DOUBLE_EQ(config->rope_scaling->high_freq_factor, 4.0);
  EXPECT_EQ(config->rope_scaling->original_max_position_embeddings, 8192);
  EXPECT_EQ(config->bos_token_id, 128000);
  EXPECT_THAT(config->eos_token_ids, ElementsAre(128001, 128008, 128009));
  EXPECT_TRUE(config->tie_word_embeddings);
  EXPECT_FALSE(config->sliding_window.has_value());
}

TEST(ModelConfigTest, MistralRecordsSlidingWindowAndDerivesHeadDim) {
  absl::StatusOr<ModelConfig> config =
      ParseModelConfig(ReadFixture("mistral-7b-v0.1.json"));
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->architecture, Architecture::kMistral);
  EXPECT_EQ(config->head_dim, 4096 / 32);
  EXPECT_EQ(config->num_key_value_heads, 8);
  EXPECT_EQ(config->sliding_window, 4096);
  EXPECT_FALSE(config->attention_bias);
  EXPECT_FALSE(config->tie_word_embeddings);
  EXPECT_THAT(config->eos_token_ids, ElementsAre(2));
}

TEST(ModelConfigTest, Qwen2HasQkvBiasButNoOProjBias) {
  absl::StatusOr<ModelConfig> config =
      ParseModelConfig(ReadFixture("qwen2.5-0.5b.json"));
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->architecture, Architecture::kQwen2);
  EXPECT_TRUE(config->attention_bias);
  EXPECT_FALSE(config->o_proj_bias);
  EXPECT_EQ(config->head_dim, 896 / 14);
  EXPECT_EQ(config->num_key_value_heads, 2);
  EXPECT_DOUBLE_EQ(config->rms_norm_eps, 1e-6);
  // "use_sliding_window": false, so the window does not apply.
  EXPECT_FALSE(config->sliding_window.has_value());
}

// Every field that changes the forward pass is applied or refused: Qwen's
// sliding window (layers from max_window_layers on) is not modelled, so a
// config that turns it on is refused rather than run with full attention;
// llama has no sliding window in transformers, so there the fields are
// ignored as transformers ignores them.
TEST(ModelConfigTest, SlidingWindowIsAppliedOrRefused) {
  const std::string qwen = R"({
    "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2",
    "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
    "num_attention_heads": 4, "vocab_size": 100, "sliding_window": 32,
    "max_window_layers": 1, "use_sliding_window": true})";
  absl::StatusOr<ModelConfig> refused = ParseModelConfig(qwen);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(),
              HasSubstr("\"use_sliding_window\" (true) is not supported"));

  absl::StatusOr<ModelConfig> llama = ParseModelConfig(
      LlamaWith(R"("sliding_window": 8, "use_sliding_window": true)"));
  ASSERT_TRUE(llama.ok()) << llama.status();
  EXPECT_FALSE(llama->sliding_window.has_value());

  absl::StatusOr<ModelConfig> mixed = ParseModelConfig(LlamaWith(
      R"("layer_types": ["full_attention", "sliding_attention", "full_attention",
                         "full_attention", "full_attention"])"));
  ASSERT_FALSE(mixed.ok());
  EXPECT_THAT(mixed.status().message(),
              HasSubstr("\"layer_types[1]\" (\"sliding_attention\") is not "
                        "supported"));
  EXPECT_TRUE(
      ParseModelConfig(LlamaWith(R"("layer_types": ["full_attention"])")).ok());

  absl::StatusOr<ModelConfig> partial =
      ParseModelConfig(LlamaWith(R"("partial_rotary_factor": 0.5)"));
  ASSERT_FALSE(partial.ok());
  EXPECT_THAT(partial.status().message(),
              HasSubstr("\"partial_rotary_factor\" (0.5) is not supported"));
  EXPECT_TRUE(
      ParseModelConfig(LlamaWith(R"("partial_rotary_factor": 1.0)")).ok());
}

TEST(ModelConfigTest, Qwen2ForcesBiasEvenWhenFileSaysFalse) {
  absl::StatusOr<ModelConfig> config = ParseModelConfig(R"({
    "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2",
    "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 1,
    "num_attention_heads": 4, "vocab_size": 100, "attention_bias": false})");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->attention_bias);
}

TEST(ModelConfigTest, Qwen3HasQkNormAndExplicitHeadDim) {
  absl::StatusOr<ModelConfig> config =
      ParseModelConfig(ReadFixture("qwen3-0.6b.json"));
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->architecture, Architecture::kQwen3);
  EXPECT_TRUE(config->qk_norm);
  EXPECT_FALSE(config->attention_bias);
  EXPECT_EQ(config->head_dim, 128);  // Not 1024 / 16.
  EXPECT_EQ(config->q_size(), 16 * 128);
  EXPECT_DOUBLE_EQ(config->rope_theta, 1e6);  // Written as an integer.
}

TEST(ModelConfigTest, DefaultsFollowHuggingFace) {
  absl::StatusOr<ModelConfig> config = ParseModelConfig(LlamaWith(""));
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->num_key_value_heads, 8);
  EXPECT_EQ(config->head_dim, 8);
  EXPECT_DOUBLE_EQ(config->rope_theta, 10000.0);
  EXPECT_FALSE(config->tie_word_embeddings);
  EXPECT_FALSE(config->bos_token_id.has_value());
  EXPECT_TRUE(config->eos_token_ids.empty());
  EXPECT_EQ(config->torch_dtype, "");
}

TEST(ModelConfigTest, ModelTypeAloneIsEnough) {
  absl::StatusOr<ModelConfig> config = ParseModelConfig(R"({
    "model_type": "mistral", "hidden_size": 64, "intermediate_size": 128,
    "num_hidden_layers": 1, "num_attention_heads": 4, "vocab_size": 100})");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->architecture, Architecture::kMistral);
}

TEST(ModelConfigTest, DefaultRopeTypeMeansNoScaling) {
  absl::StatusOr<ModelConfig> config = ParseModelConfig(
      LlamaWith(R"("rope_scaling": {"rope_type": "default"})"));
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_FALSE(config->rope_scaling.has_value());
}

TEST(ModelConfigTest, OldStyleRopeScalingTypeKey) {
  absl::StatusOr<ModelConfig> config = ParseModelConfig(LlamaWith(
      R"("rope_scaling": {"type": "llama3", "factor": 8, "low_freq_factor": 1,
          "high_freq_factor": 4, "original_max_position_embeddings": 8192})"));
  ASSERT_TRUE(config.ok()) << config.status();
  ASSERT_TRUE(config->rope_scaling.has_value());
  EXPECT_DOUBLE_EQ(config->rope_scaling->factor, 8.0);
}

TEST(ModelConfigTest, RecordsQuantizationConfig) {
  absl::StatusOr<ModelConfig> config = ParseModelConfig(LlamaWith(
      R"("quantization_config": {"quant_method": "gptq", "bits": 4})"));
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->quantization_method, "gptq");
}

TEST(ModelConfigTest, UnsupportedArchitectureListsSupportedOnes) {
  const std::string message = ErrorOf(R"({
    "architectures": ["GPT2LMHeadModel"], "model_type": "gpt2",
    "hidden_size": 64})");
  EXPECT_THAT(message, HasSubstr("\"architectures\""));
  EXPECT_THAT(message, HasSubstr("GPT2LMHeadModel"));
  EXPECT_THAT(message, HasSubstr("LlamaForCausalLM"));
  EXPECT_THAT(message, HasSubstr("MistralForCausalLM"));
  EXPECT_THAT(message, HasSubstr("Qwen2ForCausalLM"));
  EXPECT_THAT(message, HasSubstr("Qwen3ForCausalLM"));

  const std::string by_type = ErrorOf(R"({"model_type": "phi3"})");
  EXPECT_THAT(by_type, HasSubstr("\"model_type\" (\"phi3\")"));
  EXPECT_THAT(by_type, HasSubstr("LlamaForCausalLM"));

  EXPECT_THAT(ErrorOf(R"({"hidden_size": 64})"),
              HasSubstr("\"architectures\" and \"model_type\" are both "
                        "missing"));
}

TEST(ModelConfigTest, ArchitectureAndModelTypeMustAgree) {
  EXPECT_THAT(ErrorOf(R"({"architectures": ["LlamaForCausalLM"],
                           "model_type": "qwen2"})"),
              HasSubstr("\"model_type\" (\"qwen2\") does not match"));
}

TEST(ModelConfigTest, KvHeadsMustDivideHeads) {
  EXPECT_EQ(ErrorOf(LlamaWith(R"("num_key_value_heads": 3)")),
            "config.json: \"num_key_value_heads\" (3) must divide "
            "\"num_attention_heads\" (8)");
}

TEST(ModelConfigTest, ErrorsStartWithTheSourceName) {
  absl::StatusOr<ModelConfig> config = ParseModelConfig(
      LlamaWith(R"("num_key_value_heads": 3)"), "/models/x/config.json");
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(std::string(config.status().message()),
              ::testing::StartsWith("/models/x/config.json: "));
}

TEST(ModelConfigTest, FieldErrorsNameTheField) {
  struct Case {
    std::string text;
    std::string expected;
  };
  const Case cases[] = {
      {R"({"model_type": "llama", "intermediate_size": 172,
           "num_hidden_layers": 5, "num_attention_heads": 8,
           "vocab_size": 512})",
       "\"hidden_size\" is missing"},
      {LlamaWith(R"("hidden_size": -64)"),  // Later duplicate key wins.
       "\"hidden_size\" must be a positive integer in 1..131072, got -64"},
      {LlamaWith(R"("vocab_size": 0)"),
       "\"vocab_size\" must be a positive integer in 1..16777216, got 0"},
      // Out of range: refused with the range, never truncated (2^32 + 64
      // was once read as 64, 2^31 - 1 sized a RoPE table of 2^31 rows).
      {LlamaWith(R"("max_position_embeddings": 4294967360)"),
       "\"max_position_embeddings\" must be a positive integer in "
       "1..16777216, got 4294967360"},
      {LlamaWith(R"("max_position_embeddings": 4611686018427387904)"),
       "got 4611686018427387904"},
      {LlamaWith(R"("max_position_embeddings": 2147483647)"),
       "in 1..16777216, got 2147483647"},
      {LlamaWith(R"("max_position_embeddings": 18446744073709551615)"),
       "is too large for a 64-bit integer"},
      {LlamaWith(R"("sliding_window": 4294967296, "use_sliding_window": true)"),
       "\"sliding_window\" must be a positive integer in 1..16777216"},
      {LlamaWith(R"("hidden_size": 4294967360)"),
       "\"hidden_size\" must be a positive integer in 1..131072"},
      {LlamaWith(R"("num_hidden_layers": 4294967297)"),
       "\"num_hidden_layers\" must be a positive integer in 1..65536"},
      {LlamaWith(R"("intermediate_size": "172")"),
       "\"intermediate_size\" must be an integer"},
      {LlamaWith(R"("num_hidden_layers": 5.5)"),
       "\"num_hidden_layers\" must be an integer"},
      {LlamaWith(R"("num_attention_heads": 6)"),
       "\"num_attention_heads\" (6) must divide \"hidden_size\" (64)"},
      {LlamaWith(R"("head_dim": 7)"), "\"head_dim\" (7) must be even"},
      {LlamaWith(R"("rms_norm_eps": 0)"),
       "\"rms_norm_eps\" must be a positive"},
      {LlamaWith(R"("rope_theta": "big")"), "\"rope_theta\" must be a number"},
      {LlamaWith(R"("hidden_act": "gelu")"),
       "\"hidden_act\" (\"gelu\") is not supported"},
      {LlamaWith(R"("mlp_bias": true)"),
       "\"mlp_bias\" (true) is not supported"},
      {LlamaWith(R"("tie_word_embeddings": 1)"),
       "\"tie_word_embeddings\" must be true or false"},
      {LlamaWith(R"("eos_token_id": [2, "x"])"),
       "\"eos_token_id\" must be an integer or a list of integers"},
      {LlamaWith(R"("rope_scaling": {"rope_type": "yarn", "factor": 4})"),
       "\"rope_scaling.rope_type\" (\"yarn\") is not supported"},
      {LlamaWith(R"("rope_scaling": {"type": "linear", "factor": 4})"),
       "\"rope_scaling.type\" (\"linear\") is not supported"},
      {LlamaWith(R"("rope_scaling": {"rope_type": "llama3", "factor": 8,
                     "low_freq_factor": 1, "high_freq_factor": 4})"),
       "\"rope_scaling.original_max_position_embeddings\" is missing"},
      {LlamaWith(R"("rope_scaling": {"rope_type": "llama3", "factor": 8,
                     "low_freq_factor": 4, "high_freq_factor": 1,
                     "original_max_position_embeddings": 8192})"),
       "\"rope_scaling.high_freq_factor\" (1) must be greater than"},
      {LlamaWith(R"("rope_scaling": 3)"), "\"rope_scaling\" must be null or"},
      {LlamaWith(R"("max_position_embeddings": -1)"),
       "\"max_position_embeddings\" must be a positive integer"},
      {"[1, 2]", "must hold a JSON object"},
      {"{\"model_type\": ", "not valid JSON"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    const std::string message = ErrorOf(c.text);
    EXPECT_THAT(message, HasSubstr(c.expected));
    EXPECT_THAT(message, ::testing::StartsWith("config.json: "));
  }
}

TEST(ModelConfigTest, DeepNestingIsRefusedAtTheLimit) {
  std::string nested;
  for (int i = 0; i < 20000; ++i) nested += "{\"a\": ";
  nested += "1" + std::string(20000, '}');
  const std::string message = ErrorOf(LlamaWith("\"extra\": " + nested));
  EXPECT_THAT(message, ::testing::StartsWith("config.json: not valid JSON: "
                                             "nested deeper than 64 levels"));
  // Real files nest a few levels; 60 is accepted.
  std::string shallow;
  for (int i = 0; i < 60; ++i) shallow += "[";
  shallow += std::string(60, ']');
  EXPECT_TRUE(ParseModelConfig(LlamaWith("\"extra\": " + shallow)).ok());
}

TEST(ModelConfigTest, Qwen3MoeReadsTheRouterFields) {
  absl::StatusOr<ModelConfig> config =
      ParseModelConfig(ReadFixture("qwen3-30b-a3b.json"));
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->architecture, Architecture::kQwen3Moe);
  EXPECT_EQ(config->model_type, "qwen3_moe");
  EXPECT_TRUE(config->qk_norm);
  EXPECT_EQ(config->head_dim, 128);
  ASSERT_TRUE(config->moe.has_value());
  EXPECT_EQ(config->moe->num_experts, 128);
  EXPECT_EQ(config->moe->experts_per_token, 8);
  EXPECT_EQ(config->moe->expert_intermediate_size, 768);
  EXPECT_TRUE(config->moe->norm_topk_prob);
  EXPECT_EQ(config->intermediate_size, 6144);
  for (int b = 0; b < 48; ++b) EXPECT_TRUE(config->IsMoeBlock(b)) << b;
}

TEST(ModelConfigTest, MixtralExpertsUseIntermediateSizeAndRenormalise) {
  absl::StatusOr<ModelConfig> config =
      ParseModelConfig(ReadFixture("mixtral-8x7b-v0.1.json"));
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->architecture, Architecture::kMixtral);
  EXPECT_FALSE(config->qk_norm);
  EXPECT_FALSE(config->attention_bias);
  EXPECT_FALSE(config->sliding_window.has_value());
  ASSERT_TRUE(config->moe.has_value());
  EXPECT_EQ(config->moe->num_experts, 8);
  EXPECT_EQ(config->moe->experts_per_token, 2);
  EXPECT_EQ(config->moe->expert_intermediate_size, 14336);
  EXPECT_TRUE(config->moe->norm_topk_prob);
  EXPECT_TRUE(config->IsMoeBlock(31));
  // Dense families have none.
  absl::StatusOr<ModelConfig> dense = ParseModelConfig(LlamaWith(""));
  ASSERT_TRUE(dense.ok());
  EXPECT_FALSE(dense->moe.has_value());
  EXPECT_FALSE(dense->IsMoeBlock(0));
}

// Fields left out take transformers' defaults; decoder_sparse_step and
// mlp_only_layers choose the dense blocks.
TEST(ModelConfigTest, MoeDefaultsAndDenseBlocks) {
  const std::string base = R"({"model_type": "qwen3_moe", "hidden_size": 64,
    "intermediate_size": 128, "num_hidden_layers": 6,
    "num_attention_heads": 4, "vocab_size": 100)";
  absl::StatusOr<ModelConfig> defaults = ParseModelConfig(base + "}");
  ASSERT_TRUE(defaults.ok()) << defaults.status();
  EXPECT_EQ(defaults->moe->num_experts, 128);
  EXPECT_EQ(defaults->moe->experts_per_token, 8);
  EXPECT_EQ(defaults->moe->expert_intermediate_size, 768);
  EXPECT_FALSE(defaults->moe->norm_topk_prob);

  absl::StatusOr<ModelConfig> stepped = ParseModelConfig(
      base + R"(, "decoder_sparse_step": 2, "mlp_only_layers": [3]})");
  ASSERT_TRUE(stepped.ok()) << stepped.status();
  std::vector<bool> sparse;
  for (int b = 0; b < 6; ++b) sparse.push_back(stepped->IsMoeBlock(b));
  // (b + 1) % 2 == 0 gives 1, 3, 5; mlp_only_layers takes 3 out.
  EXPECT_THAT(sparse, ElementsAre(false, true, false, false, false, true));

  absl::StatusOr<ModelConfig> mixtral = ParseModelConfig(
      R"({"model_type": "mixtral", "hidden_size": 64,
          "intermediate_size": 96, "num_hidden_layers": 2,
          "num_attention_heads": 4, "vocab_size": 100})");
  ASSERT_TRUE(mixtral.ok()) << mixtral.status();
  EXPECT_EQ(mixtral->moe->num_experts, 8);
  EXPECT_EQ(mixtral->moe->experts_per_token, 2);
}

TEST(ModelConfigTest, MoeFieldErrorsNameTheField) {
  const std::string base = R"({"model_type": "qwen3_moe", "hidden_size": 64,
    "intermediate_size": 128, "num_hidden_layers": 6,
    "num_attention_heads": 4, "vocab_size": 100, )";
  EXPECT_EQ(ErrorOf(base + R"("num_experts": 4, "num_experts_per_tok": 5})"),
            "config.json: \"num_experts_per_tok\" (5) must not exceed "
            "\"num_experts\" (4)");
  EXPECT_THAT(ErrorOf(base + R"("num_experts": 0})"),
              HasSubstr("\"num_experts\" must be a positive integer in "
                        "1..4096, got 0"));
  EXPECT_THAT(ErrorOf(base + R"("moe_intermediate_size": "768"})"),
              HasSubstr("\"moe_intermediate_size\" must be an integer"));
  EXPECT_THAT(ErrorOf(base + R"("norm_topk_prob": 1})"),
              HasSubstr("\"norm_topk_prob\" must be true or false"));
  EXPECT_THAT(ErrorOf(base + R"("decoder_sparse_step": 0})"),
              HasSubstr("\"decoder_sparse_step\" must be a positive integer"));
  EXPECT_THAT(ErrorOf(base + R"("mlp_only_layers": [0, 6]})"),
              HasSubstr("\"mlp_only_layers[1]\" must be a layer index in "
                        "0..5, got 6"));
  EXPECT_THAT(ErrorOf(base + R"("mlp_only_layers": 3})"),
              HasSubstr("\"mlp_only_layers\" must be a list of layer "
                        "indices"));
  EXPECT_THAT(ErrorOf(R"({"model_type": "mixtral", "hidden_size": 64,
          "intermediate_size": 96, "num_hidden_layers": 2,
          "num_attention_heads": 4, "vocab_size": 100,
          "num_local_experts": -1})"),
              HasSubstr("\"num_local_experts\" must be a positive integer"));
}

TEST(ModelConfigTest, MissingConfigFileNamesThePath) {
  const std::string dir = quant::testing::MakeTempDir();
  absl::StatusOr<ModelConfig> config = LoadModelConfig(dir);
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(config.status().message(), HasSubstr(dir + "/config.json"));
}

}  // namespace
}  // namespace quant

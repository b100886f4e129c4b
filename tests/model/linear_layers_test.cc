// Tests of the linear layer and expected tensor listings.
#include "core/model/linear_layers.h"

#include <map>
#include <set>
#include <string>

#include "core/base/file_util.h"
#include "core/io/safetensors.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/test_env.h"

namespace quant {
namespace {

using ::testing::ElementsAre;

// The stories260K config as documented in its README: dim 64, hidden 172,
// 5 layers, 8 heads, 4 KV heads, vocab 512, tied embeddings.
ModelConfig Stories260KConfig() {
  absl::StatusOr<ModelConfig> config = ParseModelConfig(R"({
    "architectures": ["LlamaForCausalLM"], "model_type": "llama",
    "hidden_size": 64, "intermediate_size": 172, "num_hidden_layers": 5,
    "num_attention_heads": 8, "num_key_value_heads": 4, "vocab_size": 512,
    "tie_word_embeddings": true})");
  EXPECT_TRUE(config.ok()) << config.status();
  return config.value_or(ModelConfig());
}

TEST(LinearLayersTest, Stories260KBlockInPipelineOrder) {
  const std::vector<LinearLayerSpec> layers =
      ListLinearLayers(Stories260KConfig(), 3);
  ASSERT_EQ(layers.size(), 7u);
  std::vector<std::string> types;
  for (const LinearLayerSpec& spec : layers) {
    types.push_back(spec.type_name());
    EXPECT_EQ(spec.block, 3);
    EXPECT_FALSE(spec.has_bias);
  }
  EXPECT_THAT(types, ElementsAre("q_proj", "k_proj", "v_proj", "o_proj",
                                 "gate_proj", "up_proj", "down_proj"));
  EXPECT_EQ(layers[0].name, "model.layers.3.self_attn.q_proj");
  EXPECT_EQ(layers[0].weight_name(), "model.layers.3.self_attn.q_proj.weight");
  EXPECT_EQ(layers[6].name, "model.layers.3.mlp.down_proj");

  // [N, K] = [out, in]: 8 heads * 8, 4 KV heads * 8, hidden 64, MLP 172.
  const std::pair<int64_t, int64_t> shapes[] = {
      {64, 64}, {32, 64}, {32, 64}, {64, 64}, {172, 64}, {172, 64}, {64, 172}};
  const char* groups[] = {"attn_in", "attn_in", "attn_in", "attn_out",
                          "mlp_in",  "mlp_in",  "mlp_out"};
  for (size_t i = 0; i < layers.size(); ++i) {
    SCOPED_TRACE(layers[i].name);
    EXPECT_EQ(layers[i].out_features, shapes[i].first);
    EXPECT_EQ(layers[i].in_features, shapes[i].second);
    EXPECT_EQ(InputGroupName(layers[i].input_group), groups[i]);
  }
}

// The names are what files and the audit carry: each parses back to its
// enum, and nothing else parses.
TEST(LinearLayersTest, TypeAndGroupNamesRoundTrip) {
  for (const LayerType type : kAllLayerTypes) {
    EXPECT_EQ(LayerTypeFromName(LayerTypeName(type)), type);
  }
  for (const InputGroup group : kAllInputGroups) {
    EXPECT_EQ(InputGroupFromName(InputGroupName(group)), group);
  }
  EXPECT_EQ(LayerTypeFromName("qkv_proj"), std::nullopt);
  EXPECT_EQ(LayerTypeFromName("Q_PROJ"), std::nullopt);
  EXPECT_EQ(InputGroupFromName("attn"), std::nullopt);
  EXPECT_EQ(LayerModuleName(LayerType::kOProj), "self_attn");
  EXPECT_EQ(LayerModuleName(LayerType::kGateProj), "mlp");
}

TEST(LinearLayersTest, AllBlocksFiveTimesSeven) {
  const std::vector<LinearLayerSpec> all =
      ListAllLinearLayers(Stories260KConfig());
  ASSERT_EQ(all.size(), 35u);
  std::set<std::string> names;
  for (size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(all[i].block, static_cast<int>(i / 7));
    names.insert(all[i].name);
  }
  EXPECT_EQ(names.size(), 35u);
}

// The expected tensors of stories260K are exactly those in the real file.
TEST(LinearLayersTest, ExpectedTensorsMatchStories260KFile) {
  const std::string path =
      quant::testing::SharedPath("models/stories260K/hf-f32/model.safetensors");
  QUANT_REQUIRE_SHARED(path);
  absl::StatusOr<std::unique_ptr<SafetensorsFile>> file =
      SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  std::map<std::string, std::vector<int64_t>> in_file;
  for (const TensorInfo& info : (*file)->tensors()) {
    in_file[info.name] = info.shape;
  }
  std::map<std::string, std::vector<int64_t>> expected;
  for (const ExpectedTensor& tensor :
       ListExpectedTensors(Stories260KConfig())) {
    EXPECT_TRUE(expected.emplace(tensor.name, tensor.shape).second)
        << "listed twice: " << tensor.name;
  }
  EXPECT_EQ(expected, in_file);
}

TEST(LinearLayersTest, UntiedModelExpectsLmHead) {
  ModelConfig config = Stories260KConfig();
  config.tie_word_embeddings = false;
  const std::vector<ExpectedTensor> tensors = ListExpectedTensors(config);
  ASSERT_FALSE(tensors.empty());
  EXPECT_EQ(tensors.back().name, "lm_head.weight");
  EXPECT_THAT(tensors.back().shape, ElementsAre(512, 64));
}

TEST(LinearLayersTest, Qwen2BiasesOnQkvOnly) {
  absl::StatusOr<ModelConfig> config = ParseModelConfig(R"({
    "architectures": ["Qwen2ForCausalLM"], "hidden_size": 32,
    "intermediate_size": 48, "num_hidden_layers": 1,
    "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 10})");
  ASSERT_TRUE(config.ok()) << config.status();
  std::map<std::string, std::vector<int64_t>> tensors;
  for (const ExpectedTensor& tensor : ListExpectedTensors(*config)) {
    tensors[tensor.name] = tensor.shape;
  }
  EXPECT_THAT(tensors["model.layers.0.self_attn.q_proj.bias"], ElementsAre(32));
  EXPECT_THAT(tensors["model.layers.0.self_attn.k_proj.bias"], ElementsAre(16));
  EXPECT_THAT(tensors["model.layers.0.self_attn.v_proj.bias"], ElementsAre(16));
  EXPECT_EQ(tensors.count("model.layers.0.self_attn.o_proj.bias"), 0u);
  EXPECT_EQ(tensors.count("model.layers.0.mlp.down_proj.bias"), 0u);
  // 1 embed + (2 norms + 7 weights + 3 biases) + final norm + lm_head.
  EXPECT_EQ(tensors.size(), 1u + 12u + 1u + 1u);
}

TEST(LinearLayersTest, Qwen3QkNormPerHead) {
  absl::StatusOr<ModelConfig> config = ParseModelConfig(R"({
    "architectures": ["Qwen3ForCausalLM"], "hidden_size": 32, "head_dim": 16,
    "intermediate_size": 48, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 10,
    "tie_word_embeddings": true})");
  ASSERT_TRUE(config.ok()) << config.status();
  std::map<std::string, std::vector<int64_t>> tensors;
  for (const ExpectedTensor& tensor : ListExpectedTensors(*config)) {
    tensors[tensor.name] = tensor.shape;
  }
  EXPECT_THAT(tensors["model.layers.1.self_attn.q_norm.weight"],
              ElementsAre(16));
  EXPECT_THAT(tensors["model.layers.1.self_attn.k_norm.weight"],
              ElementsAre(16));
  // q_proj is [heads * head_dim, hidden] = [64, 32]; o_proj the transpose.
  EXPECT_THAT(tensors["model.layers.0.self_attn.q_proj.weight"],
              ElementsAre(64, 32));
  EXPECT_THAT(tensors["model.layers.0.self_attn.o_proj.weight"],
              ElementsAre(32, 64));
  EXPECT_EQ(tensors.count("model.layers.0.self_attn.q_proj.bias"), 0u);
  EXPECT_EQ(tensors.count("lm_head.weight"), 0u);
}

}  // namespace
}  // namespace quant

// Linear layer and tensor listings for Llama-family checkpoints.
#include "core/model/linear_layers.h"

#include "absl/strings/str_cat.h"

namespace quant {

std::string BlockPrefix(int block) {
  return absl::StrCat("model.layers.", block, ".");
}

std::vector<LinearLayerSpec> ListLinearLayers(const ModelConfig& config,
                                              int block) {
  const std::string prefix = BlockPrefix(block);
  auto layer = [&](absl::string_view module, absl::string_view type,
                   int64_t out_features, int64_t in_features, bool has_bias,
                   absl::string_view input_group) {
    LinearLayerSpec spec;
    spec.block = block;
    spec.name = absl::StrCat(prefix, module, ".", type);
    spec.type = std::string(type);
    spec.out_features = out_features;
    spec.in_features = in_features;
    spec.has_bias = has_bias;
    spec.input_group = std::string(input_group);
    return spec;
  };
  const int64_t hidden = config.hidden_size;
  const int64_t inter = config.intermediate_size;
  const bool qkv_bias = config.attention_bias;
  return {
      layer("self_attn", "q_proj", config.q_size(), hidden, qkv_bias, kAttnIn),
      layer("self_attn", "k_proj", config.kv_size(), hidden, qkv_bias, kAttnIn),
      layer("self_attn", "v_proj", config.kv_size(), hidden, qkv_bias, kAttnIn),
      layer("self_attn", "o_proj", hidden, config.q_size(), config.o_proj_bias,
            kAttnOut),
      layer("mlp", "gate_proj", inter, hidden, false, kMlpIn),
      layer("mlp", "up_proj", inter, hidden, false, kMlpIn),
      layer("mlp", "down_proj", hidden, inter, false, kMlpOut),
  };
}

std::vector<LinearLayerSpec> ListAllLinearLayers(const ModelConfig& config) {
  std::vector<LinearLayerSpec> all;
  for (int block = 0; block < config.num_hidden_layers; ++block) {
    for (LinearLayerSpec& spec : ListLinearLayers(config, block)) {
      all.push_back(std::move(spec));
    }
  }
  return all;
}

std::vector<ExpectedTensor> ListExpectedTensors(const ModelConfig& config) {
  const int64_t hidden = config.hidden_size;
  std::vector<ExpectedTensor> tensors;
  tensors.push_back({"model.embed_tokens.weight", {config.vocab_size, hidden}});
  for (int block = 0; block < config.num_hidden_layers; ++block) {
    const std::string prefix = BlockPrefix(block);
    tensors.push_back({prefix + "input_layernorm.weight", {hidden}});
    for (const LinearLayerSpec& spec : ListLinearLayers(config, block)) {
      if (spec.type == "o_proj" && config.qk_norm) {
        // Qwen3 normalizes each query/key head before the rotary embedding.
        tensors.push_back({prefix + "self_attn.q_norm.weight",
                           {static_cast<int64_t>(config.head_dim)}});
        tensors.push_back({prefix + "self_attn.k_norm.weight",
                           {static_cast<int64_t>(config.head_dim)}});
      }
      if (spec.type == "gate_proj") {
        tensors.push_back(
            {prefix + "post_attention_layernorm.weight", {hidden}});
      }
      tensors.push_back(
          {spec.weight_name(), {spec.out_features, spec.in_features}});
      if (spec.has_bias) {
        tensors.push_back({spec.bias_name(), {spec.out_features}});
      }
    }
  }
  tensors.push_back({"model.norm.weight", {hidden}});
  if (!config.tie_word_embeddings) {
    tensors.push_back({"lm_head.weight", {config.vocab_size, hidden}});
  }
  return tensors;
}

}  // namespace quant

// Linear layer and tensor listings for Llama-family checkpoints.
#include "core/model/linear_layers.h"

#include "absl/strings/str_cat.h"

namespace quant {

absl::string_view InputGroupName(InputGroup group) {
  switch (group) {
    case InputGroup::kAttnIn:
      return "attn_in";
    case InputGroup::kAttnOut:
      return "attn_out";
    case InputGroup::kMlpIn:
      return "mlp_in";
    case InputGroup::kMlpOut:
      return "mlp_out";
  }
  return "unknown";
}

absl::string_view LayerTypeName(LayerType type) {
  switch (type) {
    case LayerType::kQProj:
      return "q_proj";
    case LayerType::kKProj:
      return "k_proj";
    case LayerType::kVProj:
      return "v_proj";
    case LayerType::kOProj:
      return "o_proj";
    case LayerType::kGateProj:
      return "gate_proj";
    case LayerType::kUpProj:
      return "up_proj";
    case LayerType::kDownProj:
      return "down_proj";
  }
  return "unknown";
}

std::optional<InputGroup> InputGroupFromName(absl::string_view name) {
  for (InputGroup group : kAllInputGroups) {
    if (InputGroupName(group) == name) return group;
  }
  return std::nullopt;
}

std::optional<LayerType> LayerTypeFromName(absl::string_view name) {
  for (LayerType type : kAllLayerTypes) {
    if (LayerTypeName(type) == name) return type;
  }
  return std::nullopt;
}

InputGroup InputGroupOf(LayerType type) {
  switch (type) {
    case LayerType::kQProj:
    case LayerType::kKProj:
    case LayerType::kVProj:
      return InputGroup::kAttnIn;
    case LayerType::kOProj:
      return InputGroup::kAttnOut;
    case LayerType::kGateProj:
    case LayerType::kUpProj:
      return InputGroup::kMlpIn;
    case LayerType::kDownProj:
      return InputGroup::kMlpOut;
  }
  return InputGroup::kAttnIn;
}

absl::string_view LayerModuleName(LayerType type) {
  return InputGroupOf(type) == InputGroup::kAttnIn ||
                 InputGroupOf(type) == InputGroup::kAttnOut
             ? "self_attn"
             : "mlp";
}

absl::string_view FusedLayerName(LayerType type) {
  switch (type) {
    case LayerType::kQProj:
    case LayerType::kKProj:
    case LayerType::kVProj:
      return "qkv_proj";
    case LayerType::kGateProj:
    case LayerType::kUpProj:
      return "gate_up_proj";
    default:
      return LayerTypeName(type);
  }
}

std::vector<LayerType> FusedLayerMembers(LayerType type) {
  std::vector<LayerType> members;
  for (LayerType other : kAllLayerTypes) {
    if (FusedLayerName(other) == FusedLayerName(type)) members.push_back(other);
  }
  return members;
}

std::string BlockPrefix(int block) {
  return absl::StrCat("model.layers.", block, ".");
}

std::vector<LinearLayerSpec> ListLinearLayers(const ModelConfig& config,
                                              int block) {
  const std::string prefix = BlockPrefix(block);
  auto layer = [&](LayerType type, int64_t out_features, int64_t in_features,
                   bool has_bias) {
    LinearLayerSpec spec;
    spec.block = block;
    spec.name =
        absl::StrCat(prefix, LayerModuleName(type), ".", LayerTypeName(type));
    spec.type = type;
    spec.out_features = out_features;
    spec.in_features = in_features;
    spec.has_bias = has_bias;
    spec.input_group = InputGroupOf(type);
    return spec;
  };
  const int64_t hidden = config.hidden_size;
  const int64_t inter = config.intermediate_size;
  const bool qkv_bias = config.attention_bias;
  std::vector<LinearLayerSpec> layers = {
      layer(LayerType::kQProj, config.q_size(), hidden, qkv_bias),
      layer(LayerType::kKProj, config.kv_size(), hidden, qkv_bias),
      layer(LayerType::kVProj, config.kv_size(), hidden, qkv_bias),
      layer(LayerType::kOProj, hidden, config.q_size(), config.o_proj_bias),
  };
  if (!config.IsMoeBlock(block)) {
    layers.push_back(layer(LayerType::kGateProj, inter, hidden, false));
    layers.push_back(layer(LayerType::kUpProj, inter, hidden, false));
    layers.push_back(layer(LayerType::kDownProj, hidden, inter, false));
  }
  return layers;
}

namespace {

bool IsMixtral(const ModelConfig& config) {
  return config.architecture == Architecture::kMixtral;
}

// "model.layers.N.mlp." or "model.layers.N.block_sparse_moe.".
std::string MoeModulePrefix(const ModelConfig& config, int block) {
  return absl::StrCat(BlockPrefix(block),
                      IsMixtral(config) ? "block_sparse_moe." : "mlp.");
}

}  // namespace

std::string RouterName(const ModelConfig& config, int block) {
  return MoeModulePrefix(config, block) + "gate";
}

std::string ExpertsModuleName(const ModelConfig& config, int block) {
  return MoeModulePrefix(config, block) + "experts";
}

std::vector<LinearLayerSpec> ListExpertLayers(const ModelConfig& config,
                                              int block) {
  std::vector<LinearLayerSpec> layers;
  if (!config.IsMoeBlock(block)) return layers;
  const int64_t hidden = config.hidden_size;
  const int64_t inter = config.moe->expert_intermediate_size;
  // Mixtral's w1 / w3 / w2 are SwiGLU's gate / up / down.
  struct Part {
    LayerType type;
    absl::string_view mixtral_name;
    int64_t out_features;
    int64_t in_features;
  };
  const Part parts[] = {{LayerType::kGateProj, "w1", inter, hidden},
                        {LayerType::kUpProj, "w3", inter, hidden},
                        {LayerType::kDownProj, "w2", hidden, inter}};
  const std::string prefix = MoeModulePrefix(config, block);
  for (int expert = 0; expert < config.moe->num_experts; ++expert) {
    for (const Part& part : parts) {
      LinearLayerSpec spec;
      spec.block = block;
      spec.name = absl::StrCat(
          prefix, "experts.", expert, ".",
          IsMixtral(config) ? part.mixtral_name : LayerTypeName(part.type));
      spec.type = part.type;
      spec.out_features = part.out_features;
      spec.in_features = part.in_features;
      spec.input_group = InputGroupOf(part.type);
      spec.expert = expert;
      layers.push_back(std::move(spec));
    }
  }
  return layers;
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
      if (spec.type == LayerType::kOProj && config.qk_norm) {
        // Qwen3 normalizes each query/key head before the rotary embedding.
        tensors.push_back({prefix + "self_attn.q_norm.weight",
                           {static_cast<int64_t>(config.head_dim)}});
        tensors.push_back({prefix + "self_attn.k_norm.weight",
                           {static_cast<int64_t>(config.head_dim)}});
      }
      if (spec.type == LayerType::kGateProj) {
        tensors.push_back(
            {prefix + "post_attention_layernorm.weight", {hidden}});
      }
      tensors.push_back(
          {spec.weight_name(), {spec.out_features, spec.in_features}});
      if (spec.has_bias) {
        tensors.push_back({spec.bias_name(), {spec.out_features}});
      }
    }
    if (config.IsMoeBlock(block)) {
      tensors.push_back({prefix + "post_attention_layernorm.weight", {hidden}});
      tensors.push_back(
          {RouterName(config, block) + ".weight",
           {static_cast<int64_t>(config.moe->num_experts), hidden}});
      for (const LinearLayerSpec& spec : ListExpertLayers(config, block)) {
        tensors.push_back(
            {spec.weight_name(), {spec.out_features, spec.in_features}});
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

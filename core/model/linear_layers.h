// The linear layers of a Llama-family model and every tensor its checkpoint
// must hold, derived from the config alone: what the quantizer iterates over
// (in calibration order) and what a checkpoint is validated against.
#ifndef QUANT_CORE_MODEL_LINEAR_LAYERS_H_
#define QUANT_CORE_MODEL_LINEAR_LAYERS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "core/model/model_config.h"

namespace quant {

// Input groups: layers in one group read the same activations, so they share
// one Hessian / activation statistic during calibration.
enum class InputGroup {
  kAttnIn,   // q, k, v
  kAttnOut,  // o
  kMlpIn,    // gate, up
  kMlpOut,   // down
};
inline constexpr InputGroup kAllInputGroups[] = {
    InputGroup::kAttnIn, InputGroup::kAttnOut, InputGroup::kMlpIn,
    InputGroup::kMlpOut};

// The linear layers of a block, in pipeline order.
enum class LayerType {
  kQProj,
  kKProj,
  kVProj,
  kOProj,
  kGateProj,
  kUpProj,
  kDownProj,
};
inline constexpr LayerType kAllLayerTypes[] = {
    LayerType::kQProj,   LayerType::kKProj,    LayerType::kVProj,
    LayerType::kOProj,   LayerType::kGateProj, LayerType::kUpProj,
    LayerType::kDownProj};

// The names files, recipes and the audit use: "attn_in", "attn_out",
// "mlp_in", "mlp_out"; "q_proj" ... "down_proj" (the checkpoint's module
// names).
absl::string_view InputGroupName(InputGroup group);
absl::string_view LayerTypeName(LayerType type);
// The inverse; nullopt for a name that is none of them.
std::optional<InputGroup> InputGroupFromName(absl::string_view name);
std::optional<LayerType> LayerTypeFromName(absl::string_view name);
// The group a layer type reads its input from.
InputGroup InputGroupOf(LayerType type);
// The module holding it in a checkpoint: "self_attn" or "mlp".
absl::string_view LayerModuleName(LayerType type);

// The layer runtimes build it into: vLLM's Llama-family models fuse q, k and
// v into one "qkv_proj" and gate and up into one "gate_up_proj" (their
// packed_modules_mapping), whose weight is packed with one setting; o and
// down stay as they are ("o_proj", "down_proj").
absl::string_view FusedLayerName(LayerType type);
// The layer types fused into `type`'s fused layer, in checkpoint order
// ({type} itself when it is not fused).
std::vector<LayerType> FusedLayerMembers(LayerType type);

struct LinearLayerSpec {
  int block = 0;
  std::string name;  // "model.layers.3.self_attn.q_proj"
  LayerType type = LayerType::kQProj;
  int64_t out_features = 0;  // N: rows of the weight.
  int64_t in_features = 0;   // K: columns of the weight.
  bool has_bias = false;
  InputGroup input_group = InputGroup::kAttnIn;
  // The expert this layer belongs to in a mixture-of-experts block (its
  // type is then kGateProj, kUpProj or kDownProj); -1 for every other layer.
  int expert = -1;

  std::string type_name() const { return std::string(LayerTypeName(type)); }
  std::string weight_name() const { return name + ".weight"; }
  std::string bias_name() const { return name + ".bias"; }
};

// The linear layers of `block` outside any expert, in pipeline order q, k,
// v, o, gate, up, down; a mixture-of-experts block (config.IsMoeBlock) has
// only q, k, v and o here, its experts are ListExpertLayers. `block` must be
// in [0, num_hidden_layers).
std::vector<LinearLayerSpec> ListLinearLayers(const ModelConfig& config,
                                              int block);

// The experts' layers of a mixture-of-experts block, expert by expert, each
// as gate, up, down (qwen3_moe: "model.layers.N.mlp.experts.E.gate_proj",
// mixtral: "model.layers.N.block_sparse_moe.experts.E.w1", w3, w2). Empty
// for a block that is not one.
std::vector<LinearLayerSpec> ListExpertLayers(const ModelConfig& config,
                                              int block);

// The router of a mixture-of-experts block: "model.layers.N.mlp.gate"
// (qwen3_moe) or "model.layers.N.block_sparse_moe.gate" (mixtral), weight
// [num_experts, hidden], no bias.
std::string RouterName(const ModelConfig& config, int block);
// The module holding a mixture-of-experts block's experts, which vLLM builds
// as one fused-MoE layer under this name: "model.layers.N.mlp.experts" or
// "model.layers.N.block_sparse_moe.experts".
std::string ExpertsModuleName(const ModelConfig& config, int block);
// ListLinearLayers for every block, block by block.
std::vector<LinearLayerSpec> ListAllLinearLayers(const ModelConfig& config);

// "model.layers.3." for block 3.
std::string BlockPrefix(int block);

struct ExpectedTensor {
  std::string name;
  std::vector<int64_t> shape;
};

// Every tensor the architecture's checkpoint holds, in model order:
// model.embed_tokens.weight; per block input_layernorm, q/k/v (with biases
// where the config says so), qwen3's q_norm/k_norm, o_proj,
// post_attention_layernorm, gate/up/down (or the router and every expert's
// layers); model.norm.weight; lm_head.weight unless the embeddings are tied.
std::vector<ExpectedTensor> ListExpectedTensors(const ModelConfig& config);

}  // namespace quant

#endif  // QUANT_CORE_MODEL_LINEAR_LAYERS_H_

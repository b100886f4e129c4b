// The linear layers of a Llama-family model and every tensor its checkpoint
// must hold, derived from the config alone: what the quantizer iterates over
// (in calibration order) and what a checkpoint is validated against.
#ifndef QUANT_CORE_MODEL_LINEAR_LAYERS_H_
#define QUANT_CORE_MODEL_LINEAR_LAYERS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "core/model/model_config.h"

namespace quant {

// Input groups: layers in one group read the same activations, so they share
// one Hessian / activation statistic during calibration.
inline constexpr absl::string_view kAttnIn = "attn_in";    // q, k, v
inline constexpr absl::string_view kAttnOut = "attn_out";  // o
inline constexpr absl::string_view kMlpIn = "mlp_in";      // gate, up
inline constexpr absl::string_view kMlpOut = "mlp_out";    // down

struct LinearLayerSpec {
  int block = 0;
  std::string name;          // "model.layers.3.self_attn.q_proj"
  std::string type;          // "q_proj"
  int64_t out_features = 0;  // N: rows of the weight.
  int64_t in_features = 0;   // K: columns of the weight.
  bool has_bias = false;
  std::string input_group;  // One of kAttnIn, kAttnOut, kMlpIn, kMlpOut.

  std::string weight_name() const { return name + ".weight"; }
  std::string bias_name() const { return name + ".bias"; }
};

// The seven linear layers of `block`, in pipeline order q, k, v, o, gate,
// up, down. `block` must be in [0, num_hidden_layers).
std::vector<LinearLayerSpec> ListLinearLayers(const ModelConfig& config,
                                              int block);
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
// post_attention_layernorm, gate/up/down; model.norm.weight; lm_head.weight
// unless the embeddings are tied.
std::vector<ExpectedTensor> ListExpectedTensors(const ModelConfig& config);

}  // namespace quant

#endif  // QUANT_CORE_MODEL_LINEAR_LAYERS_H_

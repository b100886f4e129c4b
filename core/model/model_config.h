// The architecture of a Llama-family checkpoint, parsed and checked from its
// Hugging Face config.json: everything the forward pass, the layer listing
// and the packer need to know about shapes, norms and rotary embeddings.
#ifndef QUANT_CORE_MODEL_MODEL_CONFIG_H_
#define QUANT_CORE_MODEL_MODEL_CONFIG_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/base/file_system.h"

namespace quant {

// The supported decoder families. They share the Llama block (RMSNorm,
// rotary attention with grouped KV heads, SwiGLU MLP) and differ in biases
// and norms.
enum class Architecture {
  kLlama,    // LlamaForCausalLM
  kMistral,  // MistralForCausalLM (may record a sliding window)
  kQwen2,    // Qwen2ForCausalLM: q/k/v projections carry a bias
  kQwen3,    // Qwen3ForCausalLM: RMSNorm of each query/key head (q_norm/k_norm)
  // Mixture-of-experts: the MLP of (some) blocks is a router over experts.
  kQwen3Moe,  // Qwen3MoeForCausalLM: qwen3 attention, mlp.experts.E.*_proj
  kMixtral,   // MixtralForCausalLM: mistral attention,
              // block_sparse_moe.experts.E.{w1,w2,w3}
};

// "LlamaForCausalLM", ...
absl::string_view ArchitectureName(Architecture architecture);
// "llama", "mistral", "qwen2", "qwen3".
absl::string_view ArchitectureModelType(Architecture architecture);
// "LlamaForCausalLM, MistralForCausalLM, ..." for error messages and help.
std::string SupportedArchitecturesList();

// Llama 3's frequency-dependent stretch of the rotary wavelengths.
struct Llama3RopeScaling {
  double factor = 8.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 8192;
};

// The router and experts of a mixture-of-experts model, as transformers'
// Qwen3MoeConfig and MixtralConfig define them.
struct MoeConfig {
  int num_experts = 0;                   // num_experts / num_local_experts
  int experts_per_token = 0;             // num_experts_per_tok (top-k)
  int64_t expert_intermediate_size = 0;  // moe_intermediate_size (qwen3_moe)
                                         // or intermediate_size (mixtral)
  // The k routing weights are renormalised to sum to 1 (always for
  // mixtral; qwen3_moe's norm_topk_prob, default false).
  bool norm_topk_prob = false;
  // qwen3_moe: block b is sparse when b is not in mlp_only_layers and
  // (b + 1) % decoder_sparse_step == 0; the others have a dense MLP of
  // intermediate_size.
  int decoder_sparse_step = 1;
  std::vector<int> mlp_only_layers;
};

struct ModelConfig {
  Architecture architecture = Architecture::kLlama;
  std::string model_type;  // As written in config.json ("llama", ...).

  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int num_hidden_layers = 0;
  int num_attention_heads = 0;
  int num_key_value_heads = 0;  // Defaults to num_attention_heads.
  int head_dim = 0;             // Defaults to hidden_size / heads.
  int64_t vocab_size = 0;

  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  std::optional<Llama3RopeScaling> rope_scaling;  // Empty: plain RoPE.
  int64_t max_position_embeddings = 0;

  bool tie_word_embeddings = false;
  // q/k/v projections carry a bias (always for qwen2).
  bool attention_bias = false;
  // o_proj carries a bias: follows attention_bias for llama and qwen3, never
  // for qwen2 (whose o_proj has none), never for mistral.
  bool o_proj_bias = false;
  // qwen3: per-head RMSNorm of queries and keys before rotary embedding,
  // weights model.layers.N.self_attn.{q,k}_norm.weight of size head_dim.
  bool qk_norm = false;

  std::optional<int64_t> bos_token_id;
  std::vector<int64_t> eos_token_ids;  // A single id or a list in the file.
  std::string torch_dtype;             // "float32", "bfloat16", ... or "".
  // Recorded, not applied: attention beyond this many positions is masked by
  // mistral (and by qwen2 only when "use_sliding_window" is true).
  std::optional<int64_t> sliding_window;
  // Set when config.json has a "quantization_config" (its "quant_method",
  // or "unknown"): the checkpoint is already quantized.
  std::optional<std::string> quantization_method;

  // Set for the mixture-of-experts architectures.
  std::optional<MoeConfig> moe;

  // True when block `block`'s MLP is a routed mixture of experts.
  bool IsMoeBlock(int block) const;

  // Output width of q_proj (heads * head_dim) and of k_proj/v_proj.
  int64_t q_size() const {
    return static_cast<int64_t>(num_attention_heads) * head_dim;
  }
  int64_t kv_size() const {
    return static_cast<int64_t>(num_key_value_heads) * head_dim;
  }
};

// Parses and checks config.json text. Every error starts with `source` (the
// file's name or path) and names the field, e.g.
//   config.json: "num_key_value_heads" (3) must divide "num_attention_heads"
//   (8)
absl::StatusOr<ModelConfig> ParseModelConfig(
    absl::string_view json_text, absl::string_view source = "config.json");

// Reads `checkpoint_dir`/config.json through `fs` (not owned) and parses it.
absl::StatusOr<ModelConfig> LoadModelConfig(
    const std::string& checkpoint_dir, FileSystem* fs = FileSystem::Default());

}  // namespace quant

#endif  // QUANT_CORE_MODEL_MODEL_CONFIG_H_

// GPTQ v1 checkpoints ("gptq" checkpoint_format, as AutoGPTQ/GPTQModel write
// them and transformers/optimum and vLLM read them).
//
// Per linear layer <name> with N outputs, K inputs, b bits, G groups:
//   <name>.qweight  int32 [K*b/32, N]  codes packed along K: column n of
//                   qweight is the bit stream of codes[n, 0..K-1], code j at
//                   stream bits [j*b, j*b+b), LSB first (bit_packing.h
//                   kBitstream; 3-bit codes straddle words, 32 codes per 3
//                   words).
//   <name>.qzeros   int32 [G, N*b/32]  zero-1 packed along N the same way.
//   <name>.scales   fp16  [G, N]
//   <name>.g_idx    int32 [K]          group of each input column.
//   <name>.bias     kept as a float tensor (fp16) by the caller.
// Dequantization: W[n,k] = scales[g,n] * (q[n,k] - (qzeros_val[g,n] + 1)),
// g = g_idx[k].
//
// Worked example, b = 4: codes 1,2,...,8 of one column pack into the word
// 0x87654321; a symmetric zero of 8 is stored as 7, so eight of them make
// qzeros words 0x77777777.
//
// What v1 cannot hold, and the packer refuses (FailedPrecondition naming the
// layer, so the caller keeps it unquantized and the audit says why):
//   - K*b or N*b not a multiple of 32 (e.g. K = 172 at 4 bits);
//   - an asymmetric zero of 0 (stored -1 would set every bit of its word and
//     corrupt its neighbours; readers would see zero 2^b);
//   - by default a partial last group (K % group_size != 0): vLLM sizes scales
//     as K / group_size and refuses such layers.
// Our grids map directly: sym and sym-restricted have zero 2^(b-1) (stored
// 2^(b-1)-1), asym keeps its per-group zeros (sym: false in the config).
#ifndef QUANT_CORE_PACK_GPTQ_FORMAT_H_
#define QUANT_CORE_PACK_GPTQ_FORMAT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/pack/packed_tensor.h"
#include "core/quant/quantized_layer.h"
#include "nlohmann/json.hpp"

namespace quant {

struct GptqShapeFit {
  bool fits = false;
  std::string reason;  // Why not, when !fits; empty otherwise.
};

// Whether a [N, K] weight at `bits` fits GPTQ v1's int32 packing.
GptqShapeFit CanPackGptq(int64_t n, int64_t k, int bits);

struct GptqPackOptions {
  // AutoGPTQ/optimum accept ceil(K/group_size) groups; vLLM does not.
  bool allow_partial_group = false;
};

struct PackedGptqLayer {
  std::string name;
  int bits = 4;
  int64_t rows = 0;               // N
  int64_t cols = 0;               // K
  int64_t group_size = -1;        // -1: one group per row (the config's value).
  int64_t num_groups = 0;         // G
  bool symmetric = true;          // Zeros are all 2^(b-1).
  bool act_order = false;         // g_idx is not i / group_size.
  std::vector<uint32_t> qweight;  // [K*b/32, N]
  std::vector<uint32_t> qzeros;   // [G, N*b/32]
  std::vector<float> scales;      // [G, N], the fp16 values stored.
  std::vector<int32_t> g_idx;     // [K]
  // max |fp16(s) - s| / s over the layer's scales: the packed checkpoint
  // dequantizes to scales[g,n]*(q-z) with the fp16 scale, not the float one.
  float max_scale_rounding = 0.0f;
};

// Packs one layer. InvalidArgument for an inconsistent layer;
// FailedPrecondition ("cannot pack <name> as GPTQ v1: ...") for what the
// format cannot hold; OutOfRange for a scale outside fp16.
absl::StatusOr<PackedGptqLayer> PackGptqV1(const QuantizedLayer& layer,
                                           absl::string_view layer_name,
                                           const GptqPackOptions& options = {});

// <name>.qweight, .qzeros, .scales (F16), .g_idx, ready for WriteSafetensors.
std::vector<PackedTensor> GptqLayerTensors(const PackedGptqLayer& layer);

// A layer quantized differently from the config's defaults, written as a
// GPTQModel/vLLM "dynamic" positive rule ("+:^name$": {bits, group_size,
// sym, desc_act}).
struct GptqLayerScheme {
  std::string layer;  // Full module name.
  int bits = 4;
  int64_t group_size = 0;  // 0: per row (written as -1).
  bool sym = true;
  bool desc_act = false;
  // Also every module whose name starts with `layer` ("+:^name" without
  // "$"): a mixture-of-experts block's experts, which vLLM looks up under
  // the fused-MoE module's name and this project per expert.
  bool prefix = false;
};

struct GptqConfigOptions {
  int bits = 4;
  int64_t group_size = 0;  // 0: per row (written as -1).
  bool sym = true;
  // Must be true when any packed layer has act_order: vLLM ignores g_idx
  // otherwise.
  bool desc_act = false;
  bool static_groups = false;
  double damp_percent = 0.01;  // The damping used; readers need (0, 1).
  bool true_sequential = true;
  // Full module names of linear layers kept unquantized (e.g.
  // "model.layers.0.mlp.down_proj"); written as GPTQModel/vLLM "dynamic"
  // negative rules. lm_head is never quantized ("lm_head": false).
  std::vector<std::string> unquantized_layers;
  // Module names whose every submodule is kept unquantized ("-:^name"
  // without "$"): a mixture-of-experts block's experts module.
  std::vector<std::string> unquantized_prefixes;
  // Layers whose bits, group size or symmetry differ from the above.
  std::vector<GptqLayerScheme> layer_schemes;
  std::string quantizer;  // Tool and version, recorded in "meta".
};

// The `quantization_config` block of config.json. InvalidArgument names a bad
// option.
absl::StatusOr<nlohmann::json> GptqQuantizationConfig(
    const GptqConfigOptions& options);

// quantize_config.json (AutoGPTQ's file; the same keys, for older readers).
absl::StatusOr<nlohmann::json> GptqQuantizeConfigFile(
    const GptqConfigOptions& options);

// FailedPrecondition when a packed layer disagrees with the config (bits,
// group size, symmetry, act-order without desc_act), taking its entry in
// layer_schemes into account.
absl::Status CheckGptqLayerMatchesConfig(const PackedGptqLayer& layer,
                                         const GptqConfigOptions& options);

}  // namespace quant

#endif  // QUANT_CORE_PACK_GPTQ_FORMAT_H_

// compressed-tensors "pack-quantized" checkpoints (llm-compressor writes
// them; vLLM's CompressedTensorsWNA16 and the compressed-tensors library read
// them).
//
// Per linear layer <name> with N outputs, K inputs, b bits, G groups:
//   <name>.weight_packed      int32 [N, ceil(K*b/32)]  each row packed along
//                             K densely (compressed-tensors 0.18, PR 715):
//                             code j at bits [j*b, j*b+b) of the row's
//                             little-endian bit stream, codes straddling words
//                             where b does not divide 32 (3 bits: 32 codes in
//                             3 words), the tail of the last word zero, so
//                             any K packs (e.g. K = 172 -> 22 words at 4 bits).
//                             0.17 and earlier put floor(32/b) codes in a word
//                             with the high bits zero; for 2, 4 and 8 bits the
//                             two layouts are the same words. The config's
//                             "version" says which (ParsePackedFormatConfig).
//   <name>.weight_scale       [N, G] float (F16 by default; llm-compressor
//                             writes the model's dtype, vLLM converts).
//   <name>.weight_zero_point  int32 [ceil(N*b/32), G], asymmetric only: zero
//                             points packed along N (dimension 0) the same way.
//   <name>.weight_shape       int64 [2] = {N, K}.
//   <name>.weight_g_idx       int32 [K], only with actorder "group".
// Signedness: the library quantizes to signed q in -2^(b-1)..2^(b-1)-1 (and
// signed zero points) and stores q + 2^(b-1), so a stored value u means
// q = u - 2^(b-1); dequantization is scale * (q - zp) = scale * (u - zp_u)
// where zp_u is the stored zero point (asym) or 2^(b-1) (symmetric: zp = 0).
// That is exactly our unsigned code and zero: codes are stored as they are,
// sym and sym-restricted map to symmetric: true (zero 2^(b-1)), asym stores
// its zeros (0 included). Symmetric scale = amax / ((2^b-1)/2), our sym
// grid's scale.
//
// Worked example, b = 4: a row with codes 1,2,...,8 packs into the word
// 0x87654321 (q = -7..0); K = 9 adds a second word holding code 9 in its low
// 4 bits.
//
// Refused (FailedPrecondition naming the layer): group strategy with K not a
// multiple of group_size (the library's dequantize raises, vLLM sizes scales
// as K/group_size); per-row (channel) layers fit any K.
#ifndef QUANT_CORE_PACK_COMPRESSED_TENSORS_FORMAT_H_
#define QUANT_CORE_PACK_COMPRESSED_TENSORS_FORMAT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/base/dtype.h"
#include "core/pack/packed_tensor.h"
#include "core/quant/quantized_layer.h"
#include "nlohmann/json.hpp"

namespace quant {

// Written as quantization_config.version: the first release with the dense
// layout.
inline constexpr char kCompressedTensorsVersion[] = "0.18.0";

struct CompressedTensorsShapeFit {
  bool fits = false;
  std::string reason;  // Why not, when !fits; empty otherwise.
};

// group_size 0 means per row ("channel").
CompressedTensorsShapeFit CanPackCompressedTensors(int64_t n, int64_t k,
                                                   int bits,
                                                   int64_t group_size);

// compressed-tensors' ActivationOrdering as stored in the config.
enum class CompressedTensorsActOrder {
  kNone,    // actorder: null; g_idx must be i / group_size.
  kWeight,  // "weight" (static groups): columns quantized in activation
            // order, groups still i / group_size; no g_idx stored.
  kGroup,   // "group": weight_g_idx stored for every layer.
};

struct CompressedTensorsPackOptions {
  DType scale_dtype = DType::kF16;  // F16, BF16 or F32.
  CompressedTensorsActOrder actorder = CompressedTensorsActOrder::kNone;
};

struct PackedCompressedTensorsLayer {
  std::string name;
  int bits = 4;
  int64_t rows = 0;        // N
  int64_t cols = 0;        // K
  int64_t group_size = 0;  // 0: channel strategy.
  int64_t num_groups = 0;  // G
  bool symmetric = true;
  DType scale_dtype = DType::kF16;
  int64_t words_per_row = 0;
  std::vector<uint32_t> weight_packed;      // [N, words_per_row]
  std::vector<float> weight_scale;          // [N, G], values as stored.
  std::vector<uint32_t> weight_zero_point;  // [ceil(N/p), G]; asym only.
  std::vector<int32_t> weight_g_idx;        // [K]; actorder kGroup only.
  float max_scale_rounding = 0.0f;          // max |stored(s) - s| / s.
};

// InvalidArgument for an inconsistent layer or options; FailedPrecondition
// ("cannot pack <name> as compressed-tensors: ...") for what the format
// cannot hold; OutOfRange for a scale outside scale_dtype.
absl::StatusOr<PackedCompressedTensorsLayer> PackCompressedTensors(
    const QuantizedLayer& layer, absl::string_view layer_name,
    const CompressedTensorsPackOptions& options = {});

// <name>.weight_packed, .weight_scale, .weight_shape, and .weight_zero_point
// / .weight_g_idx when present.
std::vector<PackedTensor> CompressedTensorsLayerTensors(
    const PackedCompressedTensorsLayer& layer);

// Layers quantized differently from the main scheme: each distinct scheme
// becomes another config group ("group_1", ...) whose targets are the exact
// module names (readers match names before the "Linear" class target).
struct CompressedTensorsLayerScheme {
  std::string layer;  // Full module name.
  int bits = 4;
  int64_t group_size = 0;  // 0: "channel" strategy.
  bool symmetric = true;
  CompressedTensorsActOrder actorder = CompressedTensorsActOrder::kNone;
};

struct CompressedTensorsConfigOptions {
  int bits = 4;
  int64_t group_size = 0;  // 0: "channel" strategy.
  bool symmetric = true;
  CompressedTensorsActOrder actorder = CompressedTensorsActOrder::kNone;
  // Module names kept unquantized. "lm_head" is always added (the scheme
  // targets every Linear, and lm_head is one).
  std::vector<std::string> ignore;
  std::vector<CompressedTensorsLayerScheme> layer_schemes;
};

// The `quantization_config` block of config.json. InvalidArgument names a bad
// option.
absl::StatusOr<nlohmann::json> CompressedTensorsQuantizationConfig(
    const CompressedTensorsConfigOptions& options);

// FailedPrecondition when a packed layer disagrees with the config.
absl::Status CheckCompressedTensorsLayerMatchesConfig(
    const PackedCompressedTensorsLayer& layer,
    const CompressedTensorsConfigOptions& options);

}  // namespace quant

#endif  // QUANT_CORE_PACK_COMPRESSED_TENSORS_FORMAT_H_

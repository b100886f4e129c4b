// Reading packed linear layers back: given a checkpoint's tensors and its
// config.json `quantization_config` (GPTQ v1 or compressed-tensors
// pack-quantized, as gptq_format.h and compressed_tensors_format.h describe
// them), tells whether a linear layer is stored packed or as a plain
// `<layer>.weight`, and dequantizes a packed one to float32 [N, K] exactly as
// a runtime does:
//   GPTQ v1:            W[n,k] = scales[g,n] * (q[n,k] - (qzeros[g,n] + 1)),
//                       g = g_idx[k];
//   compressed-tensors: W[n,k] = weight_scale[n,g] * (u[n,k] - zp_u[g,n]),
//                       zp_u = 2^(b-1) when symmetric, g = weight_g_idx[k]
//                       or k / group_size (0 per row).
// Every tensor is validated strictly against the config and the expected
// [N, K] and the layer's scheme (the config's default or a per-layer rule:
// dtype, shape, group count, g_idx range) before it is used; errors name the
// tensor. Independent of core/model: callers pass N and K.
#ifndef QUANT_CORE_PACK_PACKED_LAYER_READER_H_
#define QUANT_CORE_PACK_PACKED_LAYER_READER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/base/tensor.h"
#include "core/io/tensor_collection.h"
#include "core/pack/packed_format_config.h"
#include "nlohmann/json.hpp"

namespace quant {

// Whether a linear layer is stored packed or as `<layer>.weight`.
enum class LinearStorage { kPlain, kPacked };

class PackedLayerReader {
 public:
  // `tensors` must outlive the reader. Errors as ParsePackedFormatConfig
  // (packed_format_config.h).
  static absl::StatusOr<PackedLayerReader> Create(
      const TensorCollection* tensors,
      const nlohmann::json& quantization_config);

  const PackedFormatConfig& config() const { return config_; }

  // kPacked when the layer's main packed tensor (.qweight, .weight_packed) is
  // present, kPlain when `<layer>.weight` is; InvalidArgument when both are,
  // or when the storage contradicts the config (a packed layer the config
  // leaves unquantized, a plain one it quantizes); NotFound (naming both)
  // when neither is.
  absl::StatusOr<LinearStorage> Storage(absl::string_view layer) const;

  // Names of the packed tensors the layer must have under its scheme (the
  // optional ones of compressed-tensors included when the scheme implies
  // them). FailedPrecondition when the config leaves the layer unquantized.
  absl::StatusOr<std::vector<std::string>> PackedTensorNames(
      absl::string_view layer) const;

  // The packed layer dequantized to float32, shape {n, k}. Errors name the
  // tensor that is missing, has the wrong dtype or shape, or holds a value
  // out of range.
  absl::StatusOr<FloatTensor> Dequantize(absl::string_view layer, int64_t n,
                                         int64_t k) const;

 private:
  PackedLayerReader(const TensorCollection* tensors, PackedFormatConfig config)
      : tensors_(tensors), config_(config) {}

  // The layer's scheme; FailedPrecondition when it is unquantized.
  absl::StatusOr<PackedScheme> QuantizedScheme(absl::string_view layer) const;
  absl::StatusOr<FloatTensor> DequantizeGptq(const std::string& layer,
                                             const PackedScheme& scheme,
                                             int64_t n, int64_t k) const;
  absl::StatusOr<FloatTensor> DequantizeCompressedTensors(
      const std::string& layer, const PackedScheme& scheme, int64_t n,
      int64_t k) const;

  const TensorCollection* tensors_;
  PackedFormatConfig config_;
};

}  // namespace quant

#endif  // QUANT_CORE_PACK_PACKED_LAYER_READER_H_

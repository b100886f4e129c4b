// Packing one quantized linear layer in the recipe's output format, and
// deciding up front which layers a format cannot hold (those stay
// unquantized, and the audit says why).
#ifndef QUANT_CORE_PIPELINE_LAYER_PACKING_H_
#define QUANT_CORE_PIPELINE_LAYER_PACKING_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/base/dtype.h"
#include "core/model/model_config.h"
#include "core/pack/compressed_tensors_format.h"
#include "core/pack/packed_tensor.h"
#include "core/quant/quantized_layer.h"
#include "core/recipe/recipe.h"

namespace quant {

// Why `format` cannot store an [n, k] layer at `bits` and `group_size`
// (0 = per row); empty when it can. Shape rules only: values (an asymmetric
// zero of 0 in GPTQ v1) are checked by PackLayer.
std::string FormatRefusal(OutputFormat format, int64_t n, int64_t k, int bits,
                          int64_t group_size);

// How compressed-tensors records act-order for a layer quantized with
// `group_size` under `recipe` (none, "weight" for static groups, "group"
// with a stored g_idx; none for per-row layers, whose one group makes the
// order invisible in storage).
CompressedTensorsActOrder ActOrderFor(const Recipe& recipe, int64_t group_size);

// The dtype compressed-tensors scales are stored in: the model's own
// (config.json torch_dtype), as llm-compressor stores them; F16 when the
// config names none (or one scales cannot take). GPTQ's are always F16.
DType CompressedTensorsScaleDType(const ModelConfig& config);

// The layer's tensors in the recipe's format (<name>.qweight ... or
// <name>.weight_packed ...). FailedPrecondition when the format cannot hold
// it; other errors for an inconsistent layer.
absl::StatusOr<std::vector<PackedTensor>> PackLayer(const QuantizedLayer& layer,
                                                    absl::string_view name,
                                                    const Recipe& recipe,
                                                    const ModelConfig& config);

}  // namespace quant

#endif  // QUANT_CORE_PIPELINE_LAYER_PACKING_H_

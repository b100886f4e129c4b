// Format fit and per-layer packing for the pipeline.
#include "core/pipeline/layer_packing.h"

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/pack/gptq_format.h"

namespace quant {

std::string FormatRefusal(OutputFormat format, int64_t n, int64_t k, int bits,
                          int64_t group_size) {
  if (format == OutputFormat::kCompressedTensors) {
    const CompressedTensorsShapeFit fit =
        CanPackCompressedTensors(n, k, bits, group_size);
    return fit.fits ? "" : fit.reason;
  }
  const GptqShapeFit fit = CanPackGptq(n, k, bits);
  if (!fit.fits) return fit.reason;
  if (group_size > 0 && k % group_size != 0) {
    return absl::StrCat("GPTQ v1 needs K = ", k,
                        " to be a multiple of group_size ", group_size,
                        " (runtimes size scales as K / group_size)");
  }
  return "";
}

CompressedTensorsActOrder ActOrderFor(const Recipe& recipe,
                                      int64_t group_size) {
  if (!recipe.act_order || group_size == 0) {
    return CompressedTensorsActOrder::kNone;
  }
  return recipe.static_groups ? CompressedTensorsActOrder::kWeight
                              : CompressedTensorsActOrder::kGroup;
}

DType CompressedTensorsScaleDType(const ModelConfig& config) {
  if (config.torch_dtype == "bfloat16") return DType::kBF16;
  if (config.torch_dtype == "float32") return DType::kF32;
  return DType::kF16;
}

absl::StatusOr<std::vector<PackedTensor>> PackLayer(const QuantizedLayer& layer,
                                                    absl::string_view name,
                                                    const Recipe& recipe,
                                                    const ModelConfig& config) {
  if (recipe.format == OutputFormat::kCompressedTensors) {
    CompressedTensorsPackOptions options;
    options.scale_dtype = CompressedTensorsScaleDType(config);
    options.actorder = ActOrderFor(recipe, layer.grid.group_size);
    QUANT_ASSIGN_OR_RETURN(PackedCompressedTensorsLayer packed,
                           PackCompressedTensors(layer, name, options));
    return CompressedTensorsLayerTensors(packed);
  }
  QUANT_ASSIGN_OR_RETURN(PackedGptqLayer packed, PackGptqV1(layer, name));
  return GptqLayerTensors(packed);
}

}  // namespace quant

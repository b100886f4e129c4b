// compressed-tensors pack-quantized packing and its config block.
#include "core/pack/compressed_tensors_format.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/pack/bit_packing.h"
#include "core/pack/pack_validation.h"

namespace quant {
namespace {

absl::Status CannotPack(absl::string_view layer_name,
                        absl::string_view reason) {
  return absl::FailedPreconditionError(absl::StrCat(
      "cannot pack ", layer_name, " as compressed-tensors: ", reason,
      "; keep the layer unquantized"));
}

const char* ActOrderName(CompressedTensorsActOrder actorder) {
  switch (actorder) {
    case CompressedTensorsActOrder::kWeight:
      return "weight";
    case CompressedTensorsActOrder::kGroup:
      return "group";
    default:
      return "";
  }
}

}  // namespace

CompressedTensorsShapeFit CanPackCompressedTensors(int64_t n, int64_t k,
                                                   int bits,
                                                   int64_t group_size) {
  CompressedTensorsShapeFit fit;
  if (!IsPackableBits(bits)) {
    fit.reason = absl::StrCat("bits = ", bits, " (packs 2, 3, 4, 8)");
  } else if (n <= 0 || k <= 0) {
    fit.reason = absl::StrCat("empty weight [", n, ", ", k, "]");
  } else if (group_size < 0) {
    fit.reason = absl::StrCat("group_size = ", group_size, " is negative");
  } else if (group_size > 0 && k % group_size != 0) {
    fit.reason = absl::StrCat(
        "K=", k, " is not a multiple of group_size=", group_size,
        " (the group strategy needs whole groups; per-row fits any K)");
  } else {
    fit.fits = true;
  }
  return fit;
}

absl::StatusOr<PackedCompressedTensorsLayer> PackCompressedTensors(
    const QuantizedLayer& layer, absl::string_view layer_name,
    const CompressedTensorsPackOptions& options) {
  QUANT_RETURN_IF_ERROR(ValidateLayerForPacking(layer, layer_name));
  const int bits = layer.grid.bits;
  const int64_t n = layer.rows;
  const int64_t k = layer.cols;
  const CompressedTensorsShapeFit fit =
      CanPackCompressedTensors(n, k, bits, layer.grid.group_size);
  if (!fit.fits) return CannotPack(layer_name, fit.reason);
  const bool store_g_idx =
      options.actorder == CompressedTensorsActOrder::kGroup;
  if (store_g_idx && layer.grid.group_size == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "layer ", layer_name,
        ": actorder \"group\" needs a group strategy, the grid is per row"));
  }
  if (!store_g_idx && !HasSequentialGroups(layer)) {
    return CannotPack(layer_name,
                      "its g_idx is an act-order permutation, which only "
                      "actorder \"group\" stores");
  }

  PackedCompressedTensorsLayer packed;
  packed.name = std::string(layer_name);
  packed.bits = bits;
  packed.rows = n;
  packed.cols = k;
  packed.group_size = layer.grid.group_size;
  packed.num_groups = PackGroupCount(layer.grid, k);
  packed.symmetric = layer.grid.kind != GridKind::kAsym;
  packed.scale_dtype = options.scale_dtype;
  if (options.scale_dtype != DType::kF16 &&
      options.scale_dtype != DType::kBF16 &&
      options.scale_dtype != DType::kF32) {
    return absl::InvalidArgumentError(
        absl::StrCat("layer ", layer_name, ": scale_dtype ",
                     DTypeName(options.scale_dtype), " is not F16/BF16/F32"));
  }
  QUANT_ASSIGN_OR_RETURN(
      StoredScales scales,
      RoundScalesForStorage(layer, layer_name, options.scale_dtype,
                            /*transpose_to_rows=*/true));
  packed.weight_scale = std::move(scales.values);
  packed.max_scale_rounding = scales.max_relative_change;

  packed.words_per_row = PackedWordCount(k, bits, PackLayout::kBitstream);
  packed.weight_packed =
      PackRows(layer.codes.data(), n, k, bits, PackLayout::kBitstream);
  if (!packed.symmetric) {
    // Zero points as [N, G], packed along N.
    std::vector<uint8_t> zeros(static_cast<size_t>(n * packed.num_groups));
    for (int64_t r = 0; r < n; ++r) {
      for (int64_t g = 0; g < packed.num_groups; ++g) {
        zeros[static_cast<size_t>(r * packed.num_groups + g)] =
            static_cast<uint8_t>(layer.zeros(g, r));
      }
    }
    packed.weight_zero_point = PackColumns(zeros.data(), n, packed.num_groups,
                                           bits, PackLayout::kBitstream);
  }
  if (store_g_idx) packed.weight_g_idx = layer.g_idx;
  return packed;
}

std::vector<PackedTensor> CompressedTensorsLayerTensors(
    const PackedCompressedTensorsLayer& layer) {
  std::vector<PackedTensor> tensors;
  tensors.push_back(WordTensor(layer.name + ".weight_packed",
                               {layer.rows, layer.words_per_row},
                               layer.weight_packed));
  // PackCompressedTensors admits only F16, BF16 and F32 scales.
  tensors.push_back({layer.name + ".weight_scale", layer.scale_dtype,
                     std::vector<int64_t>{layer.rows, layer.num_groups},
                     FloatsToBytes(layer.weight_scale, layer.scale_dtype)});
  tensors.push_back(
      Int64Tensor(layer.name + ".weight_shape", {2}, {layer.rows, layer.cols}));
  if (!layer.weight_zero_point.empty()) {
    const int64_t zero_rows =
        PackedWordCount(layer.rows, layer.bits, PackLayout::kBitstream);
    tensors.push_back(WordTensor(layer.name + ".weight_zero_point",
                                 {zero_rows, layer.num_groups},
                                 layer.weight_zero_point));
  }
  if (!layer.weight_g_idx.empty()) {
    tensors.push_back(Int32Tensor(layer.name + ".weight_g_idx", {layer.cols},
                                  layer.weight_g_idx));
  }
  return tensors;
}

namespace {

// One config group's "weights" block.
absl::StatusOr<nlohmann::json> WeightsScheme(
    int bits, int64_t group_size, bool symmetric,
    CompressedTensorsActOrder actorder) {
  if (!IsPackableBits(bits)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "compressed-tensors config: bits = ", bits, " is not 2, 3, 4 or 8"));
  }
  if (group_size < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("compressed-tensors config: group_size = ", group_size,
                     " is negative (0 means per row)"));
  }
  const bool grouped = group_size > 0;
  if (!grouped && actorder != CompressedTensorsActOrder::kNone) {
    return absl::InvalidArgumentError(
        "compressed-tensors config: actorder needs the group strategy "
        "(group_size > 0)");
  }
  return nlohmann::json{
      {"num_bits", bits},
      {"type", "int"},
      {"symmetric", symmetric},
      {"strategy", grouped ? "group" : "channel"},
      {"group_size",
       grouped ? nlohmann::json(group_size) : nlohmann::json(nullptr)},
      {"block_structure", nullptr},
      {"dynamic", false},
      {"actorder", actorder == CompressedTensorsActOrder::kNone
                       ? nlohmann::json(nullptr)
                       : nlohmann::json(ActOrderName(actorder))},
      {"observer", "minmax"},
      {"observer_kwargs", nlohmann::json::object()},
  };
}

}  // namespace

absl::StatusOr<nlohmann::json> CompressedTensorsQuantizationConfig(
    const CompressedTensorsConfigOptions& options) {
  QUANT_ASSIGN_OR_RETURN(nlohmann::json weights,
                         WeightsScheme(options.bits, options.group_size,
                                       options.symmetric, options.actorder));
  // Layers with another scheme, grouped by scheme in first-seen order.
  nlohmann::json groups = nlohmann::json::object();
  groups["group_0"] = {{"targets", nlohmann::json::array({"Linear"})},
                       {"weights", std::move(weights)},
                       {"input_activations", nullptr},
                       {"output_activations", nullptr}};
  std::vector<nlohmann::json> schemes;
  std::vector<nlohmann::json> targets;
  for (const CompressedTensorsLayerScheme& layer : options.layer_schemes) {
    QUANT_ASSIGN_OR_RETURN(nlohmann::json scheme,
                           WeightsScheme(layer.bits, layer.group_size,
                                         layer.symmetric, layer.actorder));
    size_t i = 0;
    while (i < schemes.size() && schemes[i] != scheme) ++i;
    if (i == schemes.size()) {
      schemes.push_back(std::move(scheme));
      targets.push_back(nlohmann::json::array());
    }
    targets[i].push_back(layer.layer);
  }
  for (size_t i = 0; i < schemes.size(); ++i) {
    groups[absl::StrCat("group_", i + 1)] = {{"targets", std::move(targets[i])},
                                             {"weights", std::move(schemes[i])},
                                             {"input_activations", nullptr},
                                             {"output_activations", nullptr}};
  }
  std::vector<std::string> ignore = options.ignore;
  if (std::find(ignore.begin(), ignore.end(), "lm_head") == ignore.end()) {
    ignore.push_back("lm_head");
  }
  nlohmann::json config = {
      {"quant_method", "compressed-tensors"},
      // The library version whose layout the packed words follow: readers
      // tell the dense layout (0.18) from the 0.17 one by it.
      {"version", kCompressedTensorsVersion},
      {"format", "pack-quantized"},
      {"quantization_status", "compressed"},
      {"config_groups", std::move(groups)},
      {"ignore", ignore},
      {"kv_cache_scheme", nullptr},
      {"global_compression_ratio", nullptr},
  };
  return config;
}

absl::Status CheckCompressedTensorsLayerMatchesConfig(
    const PackedCompressedTensorsLayer& layer,
    const CompressedTensorsConfigOptions& defaults) {
  CompressedTensorsConfigOptions options = defaults;
  for (const CompressedTensorsLayerScheme& scheme : defaults.layer_schemes) {
    if (scheme.layer != layer.name) continue;
    options.bits = scheme.bits;
    options.group_size = scheme.group_size;
    options.symmetric = scheme.symmetric;
    options.actorder = scheme.actorder;
  }
  std::string problem;
  const bool wants_g_idx =
      options.actorder == CompressedTensorsActOrder::kGroup;
  if (layer.bits != options.bits) {
    problem = absl::StrCat("bits ", layer.bits, " vs config ", options.bits);
  } else if (layer.group_size != options.group_size) {
    problem = absl::StrCat("group_size ", layer.group_size, " vs config ",
                           options.group_size);
  } else if (layer.symmetric != options.symmetric) {
    problem = layer.symmetric ? "no zero points under symmetric: false"
                              : "zero points under symmetric: true";
  } else if (wants_g_idx != !layer.weight_g_idx.empty()) {
    problem = wants_g_idx ? "no weight_g_idx under actorder \"group\""
                          : "weight_g_idx without actorder \"group\"";
  }
  if (problem.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("compressed-tensors layer ", layer.name,
                   " does not match the config: ", problem));
}

}  // namespace quant

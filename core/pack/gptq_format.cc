// GPTQ v1 packing and its config files.
#include "core/pack/gptq_format.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/pack/bit_packing.h"
#include "core/pack/pack_validation.h"

namespace quant {
namespace {

constexpr int kWordBits = 32;

// Why `count` codes along `what` cannot be packed, or "" when they can.
std::string PackingMisfit(absl::string_view what, int64_t count, int bits) {
  if (count * bits % kWordBits == 0) return "";
  if (bits == 3) {
    return absl::StrCat(what, " at 3 bits: 32 codes share 3 int32 words, so ",
                        what, " must be a multiple of 32");
  }
  return absl::StrCat(what, " at ", bits, " bits: ", kWordBits / bits,
                      " codes share an int32 word and ", count,
                      " is not a multiple of ", kWordBits / bits);
}

absl::Status CannotPack(absl::string_view layer_name,
                        absl::string_view reason) {
  return absl::FailedPreconditionError(
      absl::StrCat("cannot pack ", layer_name, " as GPTQ v1: ", reason,
                   "; keep the layer unquantized"));
}

// A Python regular expression matching exactly `name`, or with `prefix`
// every name starting with it (GPTQModel/vLLM "dynamic" keys are re.match
// patterns).
std::string ExactPattern(absl::string_view name, bool prefix = false) {
  std::string pattern = "^";
  for (char c : name) {
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                       (c >= '0' && c <= '9') || c == '_';
    if (!plain) pattern += '\\';
    pattern += c;
  }
  if (!prefix) pattern += '$';
  return pattern;
}

}  // namespace

GptqShapeFit CanPackGptq(int64_t n, int64_t k, int bits) {
  GptqShapeFit fit;
  if (!IsPackableBits(bits)) {
    fit.reason = absl::StrCat("bits = ", bits, " (GPTQ packs 2, 3, 4, 8)");
    return fit;
  }
  if (n <= 0 || k <= 0) {
    fit.reason = absl::StrCat("empty weight [", n, ", ", k, "]");
    return fit;
  }
  std::string k_misfit = PackingMisfit(absl::StrCat("K=", k), k, bits);
  if (!k_misfit.empty()) {
    fit.reason = absl::StrCat("qweight packs input columns: ", k_misfit);
    return fit;
  }
  std::string n_misfit = PackingMisfit(absl::StrCat("N=", n), n, bits);
  if (!n_misfit.empty()) {
    fit.reason = absl::StrCat("qzeros packs output rows: ", n_misfit);
    return fit;
  }
  fit.fits = true;
  return fit;
}

absl::StatusOr<PackedGptqLayer> PackGptqV1(const QuantizedLayer& layer,
                                           absl::string_view layer_name,
                                           const GptqPackOptions& options) {
  QUANT_RETURN_IF_ERROR(ValidateLayerForPacking(layer, layer_name));
  const int bits = layer.grid.bits;
  const int64_t n = layer.rows;
  const int64_t k = layer.cols;
  const GptqShapeFit fit = CanPackGptq(n, k, bits);
  if (!fit.fits) return CannotPack(layer_name, fit.reason);
  const int64_t group_size = layer.grid.group_size;
  if (group_size > 0 && k % group_size != 0 && !options.allow_partial_group) {
    return CannotPack(
        layer_name,
        absl::StrCat("K=", k, " is not a multiple of group_size=", group_size,
                     " (vLLM sizes scales as K/group_size)"));
  }

  PackedGptqLayer packed;
  packed.name = std::string(layer_name);
  packed.bits = bits;
  packed.rows = n;
  packed.cols = k;
  packed.group_size = group_size > 0 ? group_size : -1;
  packed.num_groups = PackGroupCount(layer.grid, k);
  packed.symmetric = layer.grid.kind != GridKind::kAsym;
  packed.act_order = !HasSequentialGroups(layer);

  // v1 stores zero-1 in b bits, so a zero of 0 has no encoding.
  std::vector<uint8_t> stored_zeros(static_cast<size_t>(packed.num_groups * n));
  for (int64_t g = 0; g < packed.num_groups; ++g) {
    for (int64_t r = 0; r < n; ++r) {
      const int zero = static_cast<int>(layer.zeros(g, r));
      if (zero == 0) {
        return CannotPack(
            layer_name,
            absl::StrCat("asymmetric zero point 0 at [group ", g, ", row ", r,
                         "] has no v1 encoding (it stores zero-1, and -1 "
                         "would corrupt the neighbouring zeros)"));
      }
      stored_zeros[static_cast<size_t>(g * n + r)] =
          static_cast<uint8_t>(zero - 1);
    }
  }

  QUANT_ASSIGN_OR_RETURN(StoredScales scales,
                         RoundScalesForStorage(layer, layer_name, DType::kF16,
                                               /*transpose_to_rows=*/false));
  packed.scales = std::move(scales.values);
  packed.max_scale_rounding = scales.max_relative_change;

  // Column n of qweight is row n of the codes, packed along K.
  packed.qweight = PackRowsTransposed(layer.codes.data(), n, k, bits,
                                      PackLayout::kBitstream);
  packed.qzeros = PackRows(stored_zeros.data(), packed.num_groups, n, bits,
                           PackLayout::kBitstream);
  packed.g_idx = layer.g_idx;
  return packed;
}

std::vector<PackedTensor> GptqLayerTensors(const PackedGptqLayer& layer) {
  const int64_t word_rows =
      PackedWordCount(layer.cols, layer.bits, PackLayout::kBitstream);
  const int64_t zero_words =
      PackedWordCount(layer.rows, layer.bits, PackLayout::kBitstream);
  std::vector<PackedTensor> tensors;
  tensors.push_back(WordTensor(layer.name + ".qweight", {word_rows, layer.rows},
                               layer.qweight));
  tensors.push_back(WordTensor(layer.name + ".qzeros",
                               {layer.num_groups, zero_words}, layer.qzeros));
  PackedTensor scales{layer.name + ".scales",
                      DType::kF16,
                      {layer.num_groups, layer.rows},
                      FloatsToBytes(layer.scales, DType::kF16)};
  tensors.push_back(std::move(scales));
  tensors.push_back(
      Int32Tensor(layer.name + ".g_idx", {layer.cols}, layer.g_idx));
  return tensors;
}

absl::StatusOr<nlohmann::json> GptqQuantizationConfig(
    const GptqConfigOptions& options) {
  if (!IsPackableBits(options.bits)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "GPTQ config: bits = ", options.bits, " is not 2, 3, 4 or 8"));
  }
  if (options.group_size < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("GPTQ config: group_size = ", options.group_size,
                     " is negative (0 means per row)"));
  }
  if (!(options.damp_percent > 0.0 && options.damp_percent < 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("GPTQ config: damp_percent = ", options.damp_percent,
                     " must be in (0, 1) (transformers refuses others)"));
  }
  nlohmann::json config = {
      {"quant_method", "gptq"},
      {"checkpoint_format", "gptq"},
      {"bits", options.bits},
      {"group_size", options.group_size > 0 ? options.group_size : -1},
      {"desc_act", options.desc_act},
      {"sym", options.sym},
      {"static_groups", options.static_groups},
      {"damp_percent", options.damp_percent},
      {"true_sequential", options.true_sequential},
      {"lm_head", false},
  };
  if (!options.unquantized_layers.empty() ||
      !options.unquantized_prefixes.empty() || !options.layer_schemes.empty()) {
    nlohmann::json dynamic = nlohmann::json::object();
    for (const std::string& name : options.unquantized_layers) {
      dynamic["-:" + ExactPattern(name)] = nlohmann::json::object();
    }
    for (const std::string& name : options.unquantized_prefixes) {
      dynamic["-:" + ExactPattern(name, /*prefix=*/true)] =
          nlohmann::json::object();
    }
    for (const GptqLayerScheme& scheme : options.layer_schemes) {
      if (!IsPackableBits(scheme.bits) || scheme.group_size < 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "GPTQ config: layer_schemes for ", scheme.layer, ": bits ",
            scheme.bits, ", group_size ", scheme.group_size));
      }
      dynamic["+:" + ExactPattern(scheme.layer, scheme.prefix)] = {
          {"bits", scheme.bits},
          {"group_size", scheme.group_size > 0 ? scheme.group_size : -1},
          {"sym", scheme.sym},
          {"desc_act", scheme.desc_act}};
    }
    config["dynamic"] = std::move(dynamic);
  }
  if (!options.quantizer.empty()) {
    config["meta"] = {
        {"quantizer", nlohmann::json::array({options.quantizer})}};
  }
  return config;
}

absl::StatusOr<nlohmann::json> GptqQuantizeConfigFile(
    const GptqConfigOptions& options) {
  QUANT_ASSIGN_OR_RETURN(nlohmann::json config,
                         GptqQuantizationConfig(options));
  config["model_file_base_name"] = "model";
  return config;
}

absl::Status CheckGptqLayerMatchesConfig(const PackedGptqLayer& layer,
                                         const GptqConfigOptions& defaults) {
  GptqConfigOptions options = defaults;
  for (const GptqLayerScheme& scheme : defaults.layer_schemes) {
    if (scheme.prefix ? !absl::StartsWith(layer.name, scheme.layer)
                      : scheme.layer != layer.name) {
      continue;
    }
    options.bits = scheme.bits;
    options.group_size = scheme.group_size;
    options.sym = scheme.sym;
    options.desc_act = scheme.desc_act;
  }
  const int64_t config_group = options.group_size > 0 ? options.group_size : -1;
  std::string problem;
  if (layer.bits != options.bits) {
    problem = absl::StrCat("bits ", layer.bits, " vs config ", options.bits);
  } else if (layer.group_size != config_group) {
    problem = absl::StrCat("group_size ", layer.group_size, " vs config ",
                           config_group);
  } else if (layer.symmetric != options.sym && options.sym) {
    // An asymmetric config reads stored zeros, so symmetric layers fit it;
    // a symmetric config ignores them.
    problem = "asymmetric zeros under sym: true";
  } else if (layer.act_order && !options.desc_act) {
    problem = "act-order g_idx under desc_act: false (readers ignore g_idx)";
  }
  if (problem.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "GPTQ layer ", layer.name, " does not match the config: ", problem));
}

}  // namespace quant

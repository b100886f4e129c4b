// Building and rendering the `quantctl inspect` report.
#include "core/model/inspect.h"

#include <algorithm>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/base/dtype.h"

namespace quant {
namespace {

using json = nlohmann::json;

// `path` relative to `dir` when it lies inside it, else unchanged.
std::string RelativeTo(const std::string& dir, const std::string& path) {
  std::string prefix = dir;
  if (!prefix.empty() && prefix.back() != '/') prefix += '/';
  if (absl::StartsWith(path, prefix)) return path.substr(prefix.size());
  return path;
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

// 1234567 -> "1.23M"; small counts stay exact.
std::string Abbreviate(double value, absl::string_view unit_suffix) {
  static constexpr const char* kUnits[] = {"", "K", "M", "G", "T"};
  int unit = 0;
  while (value >= 1000.0 && unit < 4) {
    value /= 1000.0;
    ++unit;
  }
  if (unit == 0) return absl::StrCat(static_cast<int64_t>(value), unit_suffix);
  return absl::StrFormat("%.2f%s%s", value, kUnits[unit], unit_suffix);
}

std::string YesNo(bool value) { return value ? "yes" : "no"; }

// "yes", or "no (K)" / "no (N)" / "no (N, K)" saying which dimension fails.
std::string FitText(const GptqPackingFit& fit) {
  if (fit.fits()) return "yes";
  std::vector<std::string> failing;
  if (!fit.qzeros_fits) failing.push_back("N");
  if (!fit.qweight_fits) failing.push_back("K");
  return absl::StrCat("no (", absl::StrJoin(failing, ","), ")");
}

std::string GroupSizesText(const std::vector<int>& sizes) {
  if (sizes.empty()) return "none (per-channel only)";
  return absl::StrJoin(sizes, " ");
}

json ConfigToJson(const ModelConfig& config) {
  json out;
  out["hidden_size"] = config.hidden_size;
  out["intermediate_size"] = config.intermediate_size;
  out["num_hidden_layers"] = config.num_hidden_layers;
  out["num_attention_heads"] = config.num_attention_heads;
  out["num_key_value_heads"] = config.num_key_value_heads;
  out["head_dim"] = config.head_dim;
  out["vocab_size"] = config.vocab_size;
  out["max_position_embeddings"] = config.max_position_embeddings;
  out["rms_norm_eps"] = config.rms_norm_eps;
  out["rope_theta"] = config.rope_theta;
  if (config.rope_scaling.has_value()) {
    const Llama3RopeScaling& scaling = *config.rope_scaling;
    out["rope_scaling"] = {{"rope_type", "llama3"},
                           {"factor", scaling.factor},
                           {"low_freq_factor", scaling.low_freq_factor},
                           {"high_freq_factor", scaling.high_freq_factor},
                           {"original_max_position_embeddings",
                            scaling.original_max_position_embeddings}};
  } else {
    out["rope_scaling"] = nullptr;
  }
  out["tie_word_embeddings"] = config.tie_word_embeddings;
  out["attention_bias"] = config.attention_bias;
  out["o_proj_bias"] = config.o_proj_bias;
  out["qk_norm"] = config.qk_norm;
  out["torch_dtype"] = config.torch_dtype;
  if (config.bos_token_id.has_value()) {
    out["bos_token_id"] = *config.bos_token_id;
  } else {
    out["bos_token_id"] = nullptr;
  }
  out["eos_token_ids"] = config.eos_token_ids;
  if (config.sliding_window.has_value()) {
    out["sliding_window"] = *config.sliding_window;
  } else {
    out["sliding_window"] = nullptr;
  }
  if (config.moe.has_value()) {
    const MoeConfig& moe = *config.moe;
    std::vector<int> moe_blocks;
    for (int b = 0; b < config.num_hidden_layers; ++b) {
      if (config.IsMoeBlock(b)) moe_blocks.push_back(b);
    }
    out["moe"] = {{"num_experts", moe.num_experts},
                  {"experts_per_token", moe.experts_per_token},
                  {"expert_intermediate_size", moe.expert_intermediate_size},
                  {"norm_topk_prob", moe.norm_topk_prob},
                  {"moe_blocks", moe_blocks}};
  } else {
    out["moe"] = nullptr;
  }
  return out;
}

}  // namespace

GptqPackingFit CheckGptqPacking(int64_t out_features, int64_t in_features,
                                int bits) {
  GptqPackingFit fit;
  fit.bits = bits;
  fit.qweight_fits = (in_features * bits) % 32 == 0;
  fit.qzeros_fits = (out_features * bits) % 32 == 0;
  return fit;
}

InspectReport BuildInspectReport(const Checkpoint& checkpoint) {
  InspectReport report;
  const ModelConfig& config = checkpoint.config();
  report.directory = checkpoint.directory();
  report.architecture = std::string(ArchitectureName(config.architecture));
  report.config = config;
  report.num_blocks = config.num_hidden_layers;
  report.sharded = checkpoint.tensors().sharded();
  for (const auto& file : checkpoint.tensors().files()) {
    report.files.push_back(
        {RelativeTo(checkpoint.directory(), file->path()), file->file_size()});
    report.size_on_disk_bytes += file->file_size();
  }
  std::sort(report.files.begin(), report.files.end(),
            [](const InspectFile& a, const InspectFile& b) {
              return a.name < b.name;
            });

  const std::set<std::string> unexpected(
      checkpoint.unexpected_tensors().begin(),
      checkpoint.unexpected_tensors().end());
  report.unexpected_tensors = checkpoint.unexpected_tensors();
  report.quantization = config.quantization_method.value_or("");
  report.packed_layers = checkpoint.packed_layers();
  for (const TensorCollection::Entry& entry : checkpoint.tensors().Entries()) {
    InspectTensor tensor;
    tensor.name = entry.info->name;
    tensor.dtype = std::string(DTypeName(entry.info->dtype));
    tensor.shape = entry.info->shape;
    tensor.num_elements = entry.info->NumElements();
    tensor.expected = unexpected.count(tensor.name) == 0;
    if (tensor.expected) report.num_parameters += tensor.num_elements;
    ++report.tensors_by_dtype[tensor.dtype];
    report.tensors.push_back(std::move(tensor));
  }

  for (LinearLayerSpec& spec : ListAllLinearLayers(config)) {
    InspectLinearLayer layer;
    for (int bits : kInspectBitWidths) {
      layer.gptq.push_back(
          CheckGptqPacking(spec.out_features, spec.in_features, bits));
    }
    for (int group_size : kInspectGroupSizes) {
      if (spec.in_features % group_size == 0) {
        layer.group_sizes_dividing_k.push_back(group_size);
      }
    }
    layer.spec = std::move(spec);
    report.linear_layers.push_back(std::move(layer));
  }
  return report;
}

std::string RenderInspectText(const InspectReport& report) {
  const ModelConfig& config = report.config;
  std::string out;
  absl::StrAppend(&out, "checkpoint    ", report.directory, "\n");
  absl::StrAppend(&out, "architecture  ", report.architecture,
                  " (model_type \"", config.model_type, "\", torch_dtype ",
                  config.torch_dtype.empty() ? "unset" : config.torch_dtype,
                  ")\n");
  absl::StrAppend(&out, "dims          hidden ", config.hidden_size,
                  ", intermediate ", config.intermediate_size, ", heads ",
                  config.num_attention_heads, ", kv heads ",
                  config.num_key_value_heads, ", head_dim ", config.head_dim,
                  ", vocab ", config.vocab_size, ", layers ",
                  config.num_hidden_layers, "\n");
  std::string rope = absl::StrCat("rope_theta ", config.rope_theta);
  if (config.rope_scaling.has_value()) {
    absl::StrAppend(&rope, ", llama3 scaling x", config.rope_scaling->factor);
  }
  absl::StrAppend(&out, "attention     ", rope, ", rms_norm_eps ",
                  config.rms_norm_eps, ", qkv bias ",
                  YesNo(config.attention_bias), ", qk norm ",
                  YesNo(config.qk_norm), ", tied embeddings ",
                  YesNo(config.tie_word_embeddings), "\n");
  absl::StrAppend(&out, "blocks        ", report.num_blocks, "\n");
  if (config.moe.has_value()) {
    int moe_blocks = 0;
    for (int b = 0; b < config.num_hidden_layers; ++b) {
      moe_blocks += config.IsMoeBlock(b) ? 1 : 0;
    }
    absl::StrAppend(&out, "experts       ", config.moe->num_experts,
                    " per MoE block, top-", config.moe->experts_per_token,
                    config.moe->norm_topk_prob ? " renormalised" : "",
                    ", expert intermediate ",
                    config.moe->expert_intermediate_size, "; ", moe_blocks,
                    " of ", report.num_blocks,
                    " blocks routed (their experts are not in the linear "
                    "layer table)\n");
  }
  absl::StrAppend(&out, "parameters    ", report.num_parameters, " (",
                  Abbreviate(static_cast<double>(report.num_parameters), ""),
                  ")\n");
  absl::StrAppend(
      &out, "on disk       ", report.size_on_disk_bytes, " bytes (",
      Abbreviate(static_cast<double>(report.size_on_disk_bytes), "B"), ") in ",
      report.files.size(), report.files.size() == 1 ? " file" : " files",
      report.sharded ? ", sharded" : ", not sharded", "\n");
  std::vector<std::string> by_dtype;
  for (const auto& [dtype, count] : report.tensors_by_dtype) {
    by_dtype.push_back(absl::StrCat(dtype, ": ", count));
  }
  absl::StrAppend(&out, "tensors       ", report.tensors.size(), " (",
                  absl::StrJoin(by_dtype, ", "), ")\n");
  if (!report.quantization.empty()) {
    absl::StrAppend(&out, "quantization  ", report.quantization, ", ",
                    report.packed_layers.size(), " of ",
                    report.linear_layers.size(),
                    " linear layers packed (tensor counts below are stored "
                    "elements)\n");
  }
  absl::StrAppend(&out, "unexpected    ",
                  report.unexpected_tensors.empty()
                      ? "none"
                      : absl::StrJoin(report.unexpected_tensors, ", "),
                  "\n");

  // Every block has the same layer shapes, so one row per layer type with
  // the number of blocks it covers.
  absl::StrAppend(&out, "\nlinear layers (", report.linear_layers.size(),
                  "): GPTQ v1 packing fit per bit width (no (N/K): that "
                  "dimension does not pack into int32 words)\n");
  std::string header = absl::StrFormat("  %-10s %6s %6s %-5s %-9s %-6s", "type",
                                       "N", "K", "bias", "input", "blocks");
  for (int bits : kInspectBitWidths) {
    absl::StrAppend(&header,
                    absl::StrFormat(" %-10s", absl::StrCat(bits, "-bit")));
  }
  absl::StrAppend(&out, header, " groups dividing K\n");
  struct Row {
    const InspectLinearLayer* layer;
    int count;
  };
  std::vector<Row> rows;
  for (const InspectLinearLayer& layer : report.linear_layers) {
    bool merged = false;
    for (Row& row : rows) {
      const LinearLayerSpec& a = row.layer->spec;
      const LinearLayerSpec& b = layer.spec;
      if (a.type == b.type && a.out_features == b.out_features &&
          a.in_features == b.in_features && a.has_bias == b.has_bias) {
        ++row.count;
        merged = true;
        break;
      }
    }
    if (!merged) rows.push_back({&layer, 1});
  }
  for (const Row& row : rows) {
    const LinearLayerSpec& spec = row.layer->spec;
    std::string line = absl::StrFormat(
        "  %-10s %6d %6d %-5s %-9s %-6d", LayerTypeName(spec.type),
        spec.out_features, spec.in_features, YesNo(spec.has_bias),
        InputGroupName(spec.input_group), row.count);
    for (const GptqPackingFit& fit : row.layer->gptq) {
      absl::StrAppend(&line, absl::StrFormat(" %-10s", FitText(fit)));
    }
    absl::StrAppend(&out, line, " ",
                    GroupSizesText(row.layer->group_sizes_dividing_k), "\n");
  }

  absl::StrAppend(&out, "\ntensors:\n");
  for (const InspectTensor& tensor : report.tensors) {
    absl::StrAppend(
        &out, absl::StrFormat("  %-52s %-5s %s%s\n", tensor.name, tensor.dtype,
                              ShapeText(tensor.shape),
                              tensor.expected ? "" : "  (unexpected)"));
  }
  return out;
}

json InspectToJson(const InspectReport& report) {
  json out;
  out["directory"] = report.directory;
  out["architecture"] = report.architecture;
  out["model_type"] = report.config.model_type;
  out["config"] = ConfigToJson(report.config);
  out["num_blocks"] = report.num_blocks;
  out["num_parameters"] = report.num_parameters;
  out["size_on_disk_bytes"] = report.size_on_disk_bytes;
  out["sharded"] = report.sharded;
  json files = json::array();
  for (const InspectFile& file : report.files) {
    files.push_back({{"name", file.name}, {"size_bytes", file.size_bytes}});
  }
  out["files"] = files;
  out["tensors_by_dtype"] = report.tensors_by_dtype;
  json tensors = json::array();
  for (const InspectTensor& tensor : report.tensors) {
    tensors.push_back({{"name", tensor.name},
                       {"dtype", tensor.dtype},
                       {"shape", tensor.shape},
                       {"num_elements", tensor.num_elements},
                       {"expected", tensor.expected}});
  }
  out["tensors"] = tensors;
  out["unexpected_tensors"] = report.unexpected_tensors;
  out["quantization"] = report.quantization.empty()
                            ? nlohmann::json(nullptr)
                            : nlohmann::json(report.quantization);
  out["packed_layers"] = report.packed_layers;
  json layers = json::array();
  for (const InspectLinearLayer& layer : report.linear_layers) {
    const LinearLayerSpec& spec = layer.spec;
    json gptq = json::object();
    for (const GptqPackingFit& fit : layer.gptq) {
      gptq[std::to_string(fit.bits)] = {{"qweight_fits", fit.qweight_fits},
                                        {"qzeros_fits", fit.qzeros_fits},
                                        {"fits", fit.fits()}};
    }
    layers.push_back(
        {{"name", spec.name},
         {"block", spec.block},
         {"type", LayerTypeName(spec.type)},
         {"out_features", spec.out_features},
         {"in_features", spec.in_features},
         {"has_bias", spec.has_bias},
         {"input_group", InputGroupName(spec.input_group)},
         {"gptq_v1", gptq},
         {"group_sizes_dividing_in_features", layer.group_sizes_dividing_k}});
  }
  out["linear_layers"] = layers;
  return out;
}

}  // namespace quant

// A block's round state as deltas, diffed, applied, written and read back;
// see round_state_io.h.
#include "core/pipeline/round_state_io.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/base/strict_json.h"
#include "core/io/safetensors.h"
#include "core/pipeline/task_io.h"
#include "nlohmann/json.hpp"

namespace quant {
namespace {

using json = nlohmann::json;

bool Differs(const Eigen::VectorXf& a, const Eigen::VectorXf& b) {
  return a.size() != b.size() || (a.array() != b.array()).any();
}

bool Differs(const RowMatrixF& a, const RowMatrixF& b) {
  return a.rows() != b.rows() || a.cols() != b.cols() ||
         (a.array() != b.array()).any();
}

bool QuantizedDiffers(const QuantizedLayer& a, const QuantizedLayer& b) {
  return a.rows != b.rows || a.cols != b.cols || a.codes != b.codes ||
         Differs(a.scales, b.scales) || Differs(a.zeros, b.zeros) ||
         a.g_idx != b.g_idx || a.order != b.order || a.method != b.method;
}

LayerResult* FindLayer(std::vector<LayerResult>& layers,
                       const std::string& name) {
  for (LayerResult& l : layers) {
    if (l.name == name) return &l;
  }
  return nullptr;
}

// The float weights a packed layer computes.
RowMatrixF Dequantize(const QuantizedLayer& layer) {
  RowMatrixF w(layer.rows, layer.cols);
  for (int64_t n = 0; n < layer.rows; ++n) {
    for (int64_t k = 0; k < layer.cols; ++k) {
      const int g = layer.g_idx[k];
      w(n, k) = layer.scales(g, n) *
                (static_cast<float>(layer.codes(n, k)) - layer.zeros(g, n));
    }
  }
  return w;
}

template <typename T>
absl::string_view Raw(const T* data, int64_t count) {
  return absl::string_view(reinterpret_cast<const char*>(data),
                           static_cast<size_t>(count) * sizeof(T));
}

}  // namespace

absl::StatusOr<BlockRoundDelta> DiffRoundState(const BlockRoundState& before,
                                               const BlockRoundState& after) {
  if (before.layers.size() != after.layers.size() ||
      before.working.block != after.working.block) {
    return absl::InvalidArgumentError(
        "round delta: the states are not of one block");
  }
  BlockRoundDelta delta;
  delta.groups_done = after.groups_done;
  const BlockWeights& a = before.working;
  const BlockWeights& b = after.working;
  if (Differs(a.input_norm, b.input_norm)) delta.input_norm = b.input_norm;
  if (Differs(a.post_attention_norm, b.post_attention_norm)) {
    delta.post_attention_norm = b.post_attention_norm;
  }
  if (Differs(a.q_norm, b.q_norm)) delta.q_norm = b.q_norm;
  if (Differs(a.k_norm, b.k_norm)) delta.k_norm = b.k_norm;
  for (size_t i = 0; i < after.layers.size(); ++i) {
    const LayerResult& old_result = before.layers[i];
    const LayerResult& result = after.layers[i];
    if (old_result.name != result.name || result.expert >= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("round delta: layer ", i, " is ", old_result.name,
                       " before and ", result.name, " after"));
    }
    const auto old_linear = a.linear.find(result.type);
    const auto linear = b.linear.find(result.type);
    if (old_linear == a.linear.end() || linear == b.linear.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("round delta: no weights for ", result.name));
    }
    if (LayerResultToTaskJson(old_result) != LayerResultToTaskJson(result) ||
        QuantizedDiffers(old_result.layer, result.layer)) {
      delta.layers.push_back(result);
    }
    if (!result.quantized &&
        Differs(old_linear->second.weight, linear->second.weight)) {
      delta.weights[result.type] = linear->second.weight;
    }
    if (Differs(old_linear->second.bias, linear->second.bias)) {
      delta.biases[result.type] = linear->second.bias;
    }
  }
  return delta;
}

absl::Status ApplyRoundDelta(const BlockRoundDelta& delta,
                             BlockRoundState* state) {
  if (delta.groups_done != state->groups_done + 1) {
    return absl::FailedPreconditionError(absl::StrCat(
        "round delta of ", delta.groups_done, " groups done applied to a ",
        "state with ", state->groups_done));
  }
  BlockWeights& w = state->working;
  if (delta.input_norm.has_value()) w.input_norm = *delta.input_norm;
  if (delta.post_attention_norm.has_value()) {
    w.post_attention_norm = *delta.post_attention_norm;
  }
  if (delta.q_norm.has_value()) w.q_norm = *delta.q_norm;
  if (delta.k_norm.has_value()) w.k_norm = *delta.k_norm;
  for (const auto& [type, weight] : delta.weights) {
    w.linear[type].weight = weight;
  }
  for (const auto& [type, bias] : delta.biases) w.linear[type].bias = bias;
  for (const LayerResult& result : delta.layers) {
    LayerResult* slot = FindLayer(state->layers, result.name);
    if (slot == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("round delta: the block has no layer ", result.name));
    }
    *slot = result;
    if (slot->quantized) {
      slot->layer.dequantized = Dequantize(slot->layer);
      w.linear[slot->type].weight = slot->layer.dequantized;
    }
  }
  state->groups_done = delta.groups_done;
  return absl::OkStatus();
}

absl::StatusOr<BlockRoundDelta> MergeLayerDeltas(
    std::vector<BlockRoundDelta> parts) {
  if (parts.empty()) {
    return absl::InvalidArgumentError("round delta: no layer deltas to merge");
  }
  BlockRoundDelta merged;
  merged.groups_done = parts[0].groups_done;
  auto clash = [](const std::string& what) {
    return absl::InvalidArgumentError(
        absl::StrCat("round delta: two layers' deltas both change ", what,
                     ": not the reduces of one group split by layer"));
  };
  std::vector<std::string> names;
  for (BlockRoundDelta& part : parts) {
    if (part.groups_done != merged.groups_done) {
      return absl::InvalidArgumentError(absl::StrCat(
          "round delta: layer deltas of ", merged.groups_done, " and ",
          part.groups_done, " groups done are not of one group"));
    }
    const std::pair<std::optional<Eigen::VectorXf>*,
                    std::optional<Eigen::VectorXf>*>
        norms[] = {{&merged.input_norm, &part.input_norm},
                   {&merged.post_attention_norm, &part.post_attention_norm},
                   {&merged.q_norm, &part.q_norm},
                   {&merged.k_norm, &part.k_norm}};
    for (const auto& [into, from] : norms) {
      if (!from->has_value()) continue;
      if (into->has_value()) return clash("a norm");
      *into = std::move(*from);
    }
    for (auto& [type, weight] : part.weights) {
      if (!merged.weights.emplace(type, std::move(weight)).second) {
        return clash(absl::StrCat(LayerTypeName(type), "'s weight"));
      }
    }
    for (auto& [type, bias] : part.biases) {
      if (!merged.biases.emplace(type, std::move(bias)).second) {
        return clash(absl::StrCat(LayerTypeName(type), "'s bias"));
      }
    }
    for (LayerResult& layer : part.layers) {
      if (std::find(names.begin(), names.end(), layer.name) != names.end()) {
        return clash(layer.name);
      }
      names.push_back(layer.name);
      merged.layers.push_back(std::move(layer));
    }
  }
  return merged;
}

absl::Status WriteRoundDelta(const std::string& path,
                             const BlockRoundDelta& delta, FileSystem* fs) {
  std::vector<TensorToWrite> tensors;
  auto add_vector = [&](const std::string& name, const Eigen::VectorXf& v) {
    tensors.push_back({name, DType::kF32, {v.size()}, Raw(v.data(), v.size())});
  };
  auto add_matrix = [&](const std::string& name, const RowMatrixF& m) {
    tensors.push_back(
        {name, DType::kF32, {m.rows(), m.cols()}, Raw(m.data(), m.size())});
  };
  if (delta.input_norm) add_vector("norm.input", *delta.input_norm);
  if (delta.post_attention_norm) {
    add_vector("norm.post_attention", *delta.post_attention_norm);
  }
  if (delta.q_norm) add_vector("norm.q", *delta.q_norm);
  if (delta.k_norm) add_vector("norm.k", *delta.k_norm);
  for (const auto& [type, weight] : delta.weights) {
    add_matrix(absl::StrCat(LayerTypeName(type), ".weight"), weight);
  }
  for (const auto& [type, bias] : delta.biases) {
    add_vector(absl::StrCat(LayerTypeName(type), ".bias"), bias);
  }
  json layers = json::array();
  for (const LayerResult& result : delta.layers) {
    json j = LayerResultToTaskJson(result);
    if (result.quantized) {
      const QuantizedLayer& q = result.layer;
      const std::string type(LayerTypeName(result.type));
      tensors.push_back({type + ".codes",
                         DType::kU8,
                         {q.rows, q.cols},
                         Raw(q.codes.data(), q.codes.size())});
      add_matrix(type + ".scales", q.scales);
      add_matrix(type + ".zeros", q.zeros);
      tensors.push_back({type + ".g_idx",
                         DType::kI32,
                         {static_cast<int64_t>(q.g_idx.size())},
                         Raw(q.g_idx.data(), q.g_idx.size())});
      tensors.push_back({type + ".order",
                         DType::kI32,
                         {static_cast<int64_t>(q.order.size())},
                         Raw(q.order.data(), q.order.size())});
      j["packed"] = {{"grid_kind", GridKindName(q.grid.kind)},
                     {"bits", q.grid.bits},
                     {"group_size", q.grid.group_size},
                     {"f16_scales", q.grid.f16_scales},
                     {"method", q.method},
                     {"rows", q.rows},
                     {"cols", q.cols}};
    }
    layers.push_back(std::move(j));
  }
  const json round = {{"groups_done", delta.groups_done},
                      {"layers", std::move(layers)}};
  return WriteSafetensors(path, tensors, {{"round", round.dump()}}, fs);
}

absl::StatusOr<BlockRoundDelta> ReadRoundDelta(const std::string& path,
                                               FileSystem* fs) {
  QUANT_ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsFile> file,
                         SafetensorsFile::Open(path, {}, fs));
  auto bad = [&](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", what));
  };
  const auto meta = file->metadata().find("round");
  if (meta == file->metadata().end()) return bad("metadata round is missing");
  const json round = ParseJsonOrDiscarded(meta->second, StrictJsonOptions{});
  if (round.is_discarded() || !round.is_object() ||
      !round.contains("groups_done") ||
      !round["groups_done"].is_number_integer() || !round.contains("layers") ||
      !round["layers"].is_array()) {
    return bad("metadata round is not {groups_done, layers}");
  }
  // Checked as a 64-bit value: get<int> would silently cut a large one.
  if (round["groups_done"].get<int64_t>() < 0 ||
      round["groups_done"].get<int64_t>() > kBlockRoundGroups) {
    return bad(absl::StrCat(
        "metadata round's groups_done = ", round["groups_done"].dump(),
        " is not a count of layer groups"));
  }
  BlockRoundDelta delta;
  delta.groups_done = round["groups_done"].get<int>();
  // A finite float tensor, or nullopt when absent.
  auto read_float = [&](const std::string& name)
      -> absl::StatusOr<std::optional<FloatTensor>> {
    if (file->Find(name) == nullptr) return std::optional<FloatTensor>();
    QUANT_ASSIGN_OR_RETURN(FloatTensor t, file->ReadFloat(name));
    for (float v : t.data) {
      if (!std::isfinite(v)) {
        return bad(absl::StrCat("tensor ", name, " is not finite"));
      }
    }
    return std::optional<FloatTensor>(std::move(t));
  };
  auto vector_of = [](const FloatTensor& t) {
    return Eigen::VectorXf(Eigen::Map<const Eigen::VectorXf>(
        t.data.data(), static_cast<Eigen::Index>(t.data.size())));
  };
  auto matrix_of = [](const FloatTensor& t) {
    return RowMatrixF(
        Eigen::Map<const RowMatrixF>(t.data.data(), t.shape[0], t.shape[1]));
  };
  const std::vector<std::pair<std::string, std::optional<Eigen::VectorXf>*>>
      norms = {{"norm.input", &delta.input_norm},
               {"norm.post_attention", &delta.post_attention_norm},
               {"norm.q", &delta.q_norm},
               {"norm.k", &delta.k_norm}};
  for (const auto& [name, slot] : norms) {
    QUANT_ASSIGN_OR_RETURN(std::optional<FloatTensor> t, read_float(name));
    if (t.has_value()) {
      if (t->shape.size() != 1) return bad(name + " is not a vector");
      *slot = vector_of(*t);
    }
  }
  for (const TensorInfo& info : file->tensors()) {
    const size_t dot = info.name.find('.');
    if (dot == std::string::npos || info.name.rfind("norm.", 0) == 0) continue;
    const std::optional<LayerType> type =
        LayerTypeFromName(info.name.substr(0, dot));
    if (!type.has_value()) {
      return bad(absl::StrCat("tensor ", info.name, " names no layer type"));
    }
    const std::string part = info.name.substr(dot + 1);
    if (part != "weight" && part != "bias") continue;
    QUANT_ASSIGN_OR_RETURN(std::optional<FloatTensor> t, read_float(info.name));
    if (part == "weight") {
      if (t->shape.size() != 2) return bad(info.name + " is not a matrix");
      delta.weights[*type] = matrix_of(*t);
    } else {
      if (t->shape.size() != 1) return bad(info.name + " is not a vector");
      delta.biases[*type] = vector_of(*t);
    }
  }
  for (const json& j : round["layers"]) {
    QUANT_ASSIGN_OR_RETURN(LayerResult result, LayerResultFromTaskJson(j));
    if (result.quantized) {
      if (!j.contains("packed") || !j["packed"].is_object()) {
        return bad(absl::StrCat(result.name, ": packed is missing"));
      }
      const json& p = j["packed"];
      const bool fields =
          p.contains("grid_kind") && p["grid_kind"].is_string() &&
          p.contains("bits") && p["bits"].is_number_integer() &&
          p.contains("group_size") && p["group_size"].is_number_integer() &&
          p.contains("f16_scales") && p["f16_scales"].is_boolean() &&
          p.contains("method") && p["method"].is_string() &&
          p.contains("rows") && p["rows"].is_number_integer() &&
          p.contains("cols") && p["cols"].is_number_integer();
      if (!fields) {
        return bad(absl::StrCat(result.name,
                                ": packed needs grid_kind, bits, group_size, "
                                "f16_scales, method, rows and cols"));
      }
      QuantizedLayer& q = result.layer;
      QUANT_ASSIGN_OR_RETURN(q.grid.kind,
                             ParseGridKind(p["grid_kind"].get<std::string>()));
      q.grid.bits = p["bits"].get<int>();
      q.grid.group_size = p["group_size"].get<int64_t>();
      q.grid.f16_scales = p["f16_scales"].get<bool>();
      q.method = p["method"].get<std::string>();
      q.rows = p["rows"].get<int64_t>();
      q.cols = p["cols"].get<int64_t>();
      if (q.rows <= 0 || q.cols <= 0) {
        return bad(absl::StrCat(result.name, ": packed rows/cols must be > 0"));
      }
      const std::string type(LayerTypeName(result.type));
      const TensorInfo* codes = file->Find(type + ".codes");
      if (codes == nullptr || codes->dtype != DType::kU8 ||
          codes->shape != std::vector<int64_t>{q.rows, q.cols}) {
        return bad(absl::StrCat("tensor ", type,
                                ".codes is missing or not U8 [", q.rows, ", ",
                                q.cols, "]"));
      }
      q.codes.resize(q.rows, q.cols);
      const absl::Span<const uint8_t> raw = file->RawBytes(*codes);
      std::memcpy(q.codes.data(), raw.data(), raw.size());
      QUANT_ASSIGN_OR_RETURN(std::optional<FloatTensor> scales,
                             read_float(type + ".scales"));
      QUANT_ASSIGN_OR_RETURN(std::optional<FloatTensor> zeros,
                             read_float(type + ".zeros"));
      if (!scales || !zeros || scales->shape.size() != 2 ||
          scales->shape[1] != q.rows || zeros->shape != scales->shape) {
        return bad(absl::StrCat(type, ".scales/.zeros are missing or not [G, ",
                                q.rows, "]"));
      }
      q.scales = matrix_of(*scales);
      q.zeros = matrix_of(*zeros);
      const std::vector<std::pair<std::string, std::vector<int32_t>*>> ints = {
          {type + ".g_idx", &q.g_idx}, {type + ".order", &q.order}};
      for (const auto& [name, out] : ints) {
        const TensorInfo* info = file->Find(name);
        if (info == nullptr || info->dtype != DType::kI32 ||
            info->shape != std::vector<int64_t>{q.cols}) {
          return bad(absl::StrCat("tensor ", name, " is missing or not I32 [",
                                  q.cols, "]"));
        }
        out->resize(static_cast<size_t>(q.cols));
        const absl::Span<const uint8_t> bytes = file->RawBytes(*info);
        std::memcpy(out->data(), bytes.data(), bytes.size());
      }
      for (int32_t g : q.g_idx) {
        if (g < 0 || g >= q.scales.rows()) {
          return bad(absl::StrCat(type, ".g_idx names group ", g, " of ",
                                  q.scales.rows()));
        }
      }
    }
    delta.layers.push_back(std::move(result));
  }
  return delta;
}

}  // namespace quant

// CheckReportedLayer: a heartbeat's audit row against the task that sent it.
#include "server/reported_layer_check.h"

#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "core/model/linear_layers.h"
#include "core/pipeline/block_task.h"

namespace quant::server {
namespace {

constexpr size_t kMaxNameBytes = 256;
constexpr size_t kMaxTextBytes = 4096;
constexpr int kMaxFlags = 16;

absl::Status Bad(absl::string_view field, absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("progress.finished_layers.", field, ": ", why));
}

// A mixture-of-experts expert's layer of the block at `prefix`:
// "mlp.experts.E.{gate,up,down}_proj" (Qwen3-MoE) or
// "block_sparse_moe.experts.E.{w1,w3,w2}" (Mixtral), E a decimal index, the
// type the part it plays.
bool IsExpertLayer(absl::string_view name, absl::string_view type,
                   absl::string_view prefix) {
  if (!absl::ConsumePrefix(&name, prefix)) return false;
  const bool qwen = absl::ConsumePrefix(&name, "mlp.experts.");
  if (!qwen && !absl::ConsumePrefix(&name, "block_sparse_moe.experts.")) {
    return false;
  }
  const size_t dot = name.find('.');
  if (dot == 0 || dot == absl::string_view::npos || dot > 5) return false;
  for (char c : name.substr(0, dot)) {
    if (c < '0' || c > '9') return false;
  }
  const absl::string_view part = name.substr(dot + 1);
  const std::pair<absl::string_view, absl::string_view> parts[] = {
      {qwen ? "gate_proj" : "w1", "gate_proj"},
      {qwen ? "up_proj" : "w3", "up_proj"},
      {qwen ? "down_proj" : "w2", "down_proj"}};
  for (const auto& [module, layer_type] : parts) {
    if (part == module) return type == layer_type;
  }
  return false;
}

// Whether a layer of `type` belongs to a dense block's layer group `group`
// (block_task.h's order: q, k, v; o; gate, up; down).
bool InBlockGroup(absl::string_view type, int group) {
  static const absl::string_view kGroups[][3] = {{"q_proj", "k_proj", "v_proj"},
                                                 {"o_proj"},
                                                 {"gate_proj", "up_proj"},
                                                 {"down_proj"}};
  if (group < 0 || group >= 4) return false;
  for (absl::string_view member : kGroups[group]) {
    if (!member.empty() && member == type) return true;
  }
  return false;
}

}  // namespace

absl::Status CheckReportedLayer(const v1::LayerAudit& layer,
                                const store::Task& task, bool audits_block) {
  if (task.kind != store::TaskKind::kBlock &&
      task.kind != store::TaskKind::kReduce) {
    return Bad("name", absl::StrCat("a ", store::TaskKindName(task.kind),
                                    " task reports no layers"));
  }
  if (layer.name().size() > kMaxNameBytes) {
    return Bad("name", absl::StrCat(layer.name().size(), " bytes; at most ",
                                    kMaxNameBytes));
  }
  const std::string prefix = absl::StrCat("model.layers.", task.block, ".");
  bool known = false;
  for (const LayerType type : kAllLayerTypes) {
    if (layer.name() ==
        absl::StrCat(prefix, LayerModuleName(type), ".", LayerTypeName(type))) {
      known = layer.type() == LayerTypeName(type);
      break;
    }
  }
  if (!known && task.kind == store::TaskKind::kBlock) {
    known = IsExpertLayer(layer.name(), layer.type(), prefix);
  }
  if (layer.heldout_pending() && task.kind != store::TaskKind::kReduce) {
    return Bad("heldout_pending",
               "only a round's reduce leaves a layer's held-out audit for "
               "later");
  }
  const bool audited_here = audits_block &&
                            task.kind == store::TaskKind::kReduce &&
                            task.group == kBlockRoundGroups - 1 &&
                            task.layer.empty() && !layer.heldout_pending();
  if (known && task.kind == store::TaskKind::kReduce && !audited_here &&
      !InBlockGroup(layer.type(), task.group)) {
    return Bad("name", absl::StrCat("\"", layer.name().substr(0, 80),
                                    "\" is not in the layer group ", task.group,
                                    " that this reduce quantizes"));
  }
  if (known && task.kind == store::TaskKind::kReduce && !task.layer.empty() &&
      layer.type() != task.layer) {
    return Bad("name", absl::StrCat("\"", layer.name().substr(0, 80),
                                    "\" is not ", task.layer,
                                    ", the one layer this reduce quantizes"));
  }
  if (!known) {
    return Bad("name",
               absl::StrCat("\"", layer.name().substr(0, 80), "\" (type \"",
                            layer.type().substr(0, 32),
                            "\") is not a linear layer of block ", task.block));
  }
  if (layer.bits() < 0 || layer.bits() > 16) {
    return Bad("bits", absl::StrCat(layer.bits(), " is outside 0..16"));
  }
  if (layer.group_size() < 0) {
    return Bad("group_size", absl::StrCat(layer.group_size(), " is negative"));
  }
  const std::pair<const char*, double> errors[] = {
      {"rel_output_error_cal", layer.rel_output_error_cal()},
      {"rel_output_error_heldout", layer.rel_output_error_heldout()},
      {"rtn_rel_output_error_cal", layer.rtn_rel_output_error_cal()},
      {"rtn_rel_output_error_heldout", layer.rtn_rel_output_error_heldout()},
      {"output_mse_cal", layer.output_mse_cal()},
      {"output_mse_heldout", layer.output_mse_heldout()},
      {"rtn_output_mse_cal", layer.rtn_output_mse_cal()},
      {"rtn_output_mse_heldout", layer.rtn_output_mse_heldout()},
      {"weight_mse", layer.weight_mse()},
      {"rtn_weight_mse", layer.rtn_weight_mse()},
      {"bits_per_weight", layer.bits_per_weight()},
      {"seconds", layer.seconds()},
  };
  for (const auto& [field, value] : errors) {
    if (!std::isfinite(value) || value < 0) {
      return Bad(field, absl::StrCat(value, " is not a finite value >= 0"));
    }
  }
  const std::pair<const char*, double> gains[] = {
      {"gain_cal", layer.gain_cal()},
      {"gain_heldout", layer.gain_heldout()},
      {"flattery", layer.flattery()},
  };
  for (const auto& [field, value] : gains) {
    if (std::isnan(value) || value < 0) {
      return Bad(field, absl::StrCat(value, " is not a value >= 0"));
    }
  }
  if (layer.flags_size() > kMaxFlags) {
    return Bad("flags",
               absl::StrCat(layer.flags_size(), " flags; at most ", kMaxFlags));
  }
  for (const std::string* text :
       {&layer.reason(), &layer.method(), &layer.grid(), &layer.input_group(),
        &layer.absorbed_awq_scales_of(), &layer.awq_fold()}) {
    if (text->size() > kMaxTextBytes) {
      return Bad("reason", absl::StrCat("a text field of ", text->size(),
                                        " bytes; at most ", kMaxTextBytes));
    }
  }
  return absl::OkStatus();
}

}  // namespace quant::server

// Setting groups, candidate costs, the solve and the selection's JSON.
#include "core/pipeline/mixed_precision_selection.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/base/json_fields.h"
#include "core/base/status_macros.h"
#include "core/pipeline/layer_packing.h"
#include "core/pipeline/output_size.h"
#include "core/quant/bit_allocation.h"
#include "core/runtime/runtime_conformance.h"

namespace quant {
namespace {

// The bits a kept weight is stored in: the source's dtype as its config
// names it (bfloat16/float16 -> 16, float32 -> 32), the dtype the writer
// keeps unquantized tensors in.
int KeptWeightBits(const ModelConfig& config) {
  return 8 * static_cast<int>(DTypeSize(CompressedTensorsScaleDType(config)));
}

using Json = nlohmann::json;

using json_fields::GetInt;
using json_fields::GetNumber;

// A required boolean (json_fields has only the optional form).
absl::StatusOr<bool> GetBool(const Json& object, absl::string_view key,
                             absl::string_view path) {
  if (!object.contains(key)) {
    return absl::InvalidArgumentError(
        absl::StrCat(json_fields::FieldPath(path, key), ": missing"));
  }
  return json_fields::GetBoolOr(object, key, false, path);
}

absl::StatusOr<CandidateMeasure> CandidateFromJson(const Json& c,
                                                   const std::string& path) {
  QUANT_RETURN_IF_ERROR(json_fields::ExpectObject(c, path));
  CandidateMeasure m;
  QUANT_ASSIGN_OR_RETURN(int64_t bits, GetInt(c, "bits", path));
  QUANT_ASSIGN_OR_RETURN(int64_t group_size, GetInt(c, "group_size", path));
  m.setting.bits = static_cast<int>(bits);
  m.setting.group_size = static_cast<int>(group_size);
  QUANT_ASSIGN_OR_RETURN(m.setting.keep_float, GetBool(c, "keep_float", path));
  QUANT_ASSIGN_OR_RETURN(m.cost_bits, GetInt(c, "cost_bits", path));
  QUANT_ASSIGN_OR_RETURN(m.error, GetNumber(c, "error", path));
  QUANT_ASSIGN_OR_RETURN(m.weighted_error,
                         GetNumber(c, "weighted_error", path));
  return m;
}

absl::StatusOr<SettingGroupSelection> GroupFromJson(const Json& g,
                                                    const std::string& path) {
  QUANT_RETURN_IF_ERROR(json_fields::ExpectObject(g, path));
  SettingGroupSelection unit;
  QUANT_ASSIGN_OR_RETURN(int64_t block, GetInt(g, "block", path));
  unit.block = static_cast<int>(block);
  QUANT_ASSIGN_OR_RETURN(std::string group_name,
                         json_fields::GetString(g, "group", path));
  std::optional<InputGroup> group = InputGroupFromName(group_name);
  if (!group.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat(json_fields::FieldPath(path, "group"),
                     ": unknown group \"", group_name, "\""));
  }
  unit.group = *group;
  QUANT_ASSIGN_OR_RETURN(unit.layers,
                         json_fields::GetStringArrayOr(g, "layers", path));
  QUANT_ASSIGN_OR_RETURN(unit.weights, GetInt(g, "weights", path));
  QUANT_ASSIGN_OR_RETURN(unit.sensitivity, GetNumber(g, "sensitivity", path));
  QUANT_ASSIGN_OR_RETURN(unit.probe_kl, GetNumber(g, "probe_kl", path));
  QUANT_ASSIGN_OR_RETURN(unit.probe_error, GetNumber(g, "probe_error", path));
  QUANT_ASSIGN_OR_RETURN(int64_t chosen, GetInt(g, "chosen", path));
  QUANT_ASSIGN_OR_RETURN(const Json* candidates,
                         json_fields::GetArray(g, "candidates", path));
  for (size_t ci = 0; ci < candidates->size(); ++ci) {
    QUANT_ASSIGN_OR_RETURN(
        CandidateMeasure m,
        CandidateFromJson((*candidates)[ci],
                          json_fields::IndexPath(
                              json_fields::FieldPath(path, "candidates"), ci)));
    unit.candidates.push_back(m);
  }
  if (chosen < -1 || chosen >= static_cast<int64_t>(unit.candidates.size())) {
    return absl::InvalidArgumentError(absl::StrCat(
        json_fields::FieldPath(path, "chosen"), ": outside the candidates"));
  }
  unit.chosen = static_cast<int>(chosen);
  return unit;
}

absl::StatusOr<MixedPrecisionSelection> SelectionFromJson(const Json& j) {
  QUANT_RETURN_IF_ERROR(json_fields::ExpectObject(j, ""));
  MixedPrecisionSelection s;
  QUANT_ASSIGN_OR_RETURN(s.budget_average_bits,
                         GetNumber(j, "budget_average_bits", ""));
  QUANT_ASSIGN_OR_RETURN(s.quantized_weights,
                         GetInt(j, "quantized_weights", ""));
  QUANT_ASSIGN_OR_RETURN(s.budget_bits, GetInt(j, "budget_bits", ""));
  QUANT_ASSIGN_OR_RETURN(s.chosen_bits, GetInt(j, "chosen_bits", ""));
  QUANT_ASSIGN_OR_RETURN(s.allocation_unit_bits,
                         GetInt(j, "allocation_unit_bits", ""));
  QUANT_ASSIGN_OR_RETURN(s.predicted_kl, GetNumber(j, "predicted_kl", ""));
  QUANT_ASSIGN_OR_RETURN(int64_t windows, GetInt(j, "probe_windows", ""));
  s.probe_windows = static_cast<int>(windows);
  QUANT_ASSIGN_OR_RETURN(s.probe_tokens, GetInt(j, "probe_tokens", ""));
  QUANT_ASSIGN_OR_RETURN(const Json* groups,
                         json_fields::GetArray(j, "groups", ""));
  for (size_t gi = 0; gi < groups->size(); ++gi) {
    QUANT_ASSIGN_OR_RETURN(
        SettingGroupSelection unit,
        GroupFromJson((*groups)[gi], json_fields::IndexPath("groups", gi)));
    s.groups.push_back(std::move(unit));
  }
  return s;
}

}  // namespace

std::string DescribeCandidate(const PrecisionCandidate& candidate) {
  if (candidate.keep_float) return "kept unquantized";
  if (candidate.group_size == 0) {
    return absl::StrCat(candidate.bits, "-bit per-row");
  }
  return absl::StrCat(candidate.bits, "-bit g", candidate.group_size);
}

std::vector<PrecisionCandidate> PrecisionCandidates(const Recipe& recipe) {
  std::vector<PrecisionCandidate> out;
  if (!recipe.mixed_precision.has_value()) return out;
  const MixedPrecision& m = *recipe.mixed_precision;
  std::vector<int> group_sizes = m.group_sizes;
  if (group_sizes.empty()) group_sizes.push_back(recipe.group_size);
  for (int bits : m.bits) {
    for (int group_size : group_sizes) {
      out.push_back({bits, group_size, false});
    }
  }
  if (m.keep_float) out.push_back({16, 0, true});
  return out;
}

absl::StatusOr<MixedPrecisionSelection> PlanMixedPrecision(
    const ModelConfig& config, const Recipe& recipe,
    const QuantizationPlan& plan) {
  if (!recipe.mixed_precision.has_value()) {
    return absl::InvalidArgumentError("the recipe has no mixed_precision");
  }
  const std::vector<PrecisionCandidate> candidates =
      PrecisionCandidates(recipe);
  const DType scale_dtype = CompressedTensorsScaleDType(config);
  // A recipe gated on loading in vLLM gets no setting vLLM would refuse.
  const bool vllm_compressed_tensors =
      recipe.gates.runtime == "vllm" &&
      recipe.format == OutputFormat::kCompressedTensors;
  MixedPrecisionSelection selection;
  selection.budget_average_bits = recipe.mixed_precision->average_bits;
  for (int b = 0; b < static_cast<int>(plan.blocks.size()); ++b) {
    const std::vector<LinearLayerSpec> specs = ListLinearLayers(config, b);
    for (InputGroup group : kAllInputGroups) {
      SettingGroupSelection unit;
      unit.block = b;
      unit.group = group;
      std::vector<CandidateMeasure> measures(candidates.size());
      // A candidate the format cannot store for every layer of the group
      // (FormatRefusal: the block task would keep them unquantized) is no
      // candidate for it.
      std::vector<bool> holdable(candidates.size(), true);
      for (size_t c = 0; c < candidates.size(); ++c) {
        measures[c].setting = candidates[c];
      }
      bool quantized = true;
      for (const LinearLayerSpec& spec : specs) {
        if (spec.input_group != group) continue;
        auto it = plan.blocks[b].find(spec.type);
        if (it == plan.blocks[b].end() || it->second.keep_unquantized) {
          quantized = false;
          break;
        }
        unit.layers.push_back(spec.name);
        const int64_t n = spec.out_features;
        const int64_t k = spec.in_features;
        unit.weights += n * k;
        for (size_t c = 0; c < candidates.size(); ++c) {
          if (candidates[c].keep_float) {
            measures[c].cost_bits += KeptWeightBits(config) * n * k;
            continue;
          }
          if (!FormatRefusal(recipe.format, n, k, candidates[c].bits,
                             candidates[c].group_size)
                   .empty() ||
              (vllm_compressed_tensors &&
               !VllmCompressedTensorsTakesBits(candidates[c].bits))) {
            holdable[c] = false;
          }
          LayerSettings settings = it->second;
          settings.bits = candidates[c].bits;
          settings.group_size = candidates[c].group_size;
          measures[c].cost_bits +=
              8 * PackedLayerBytes(recipe.format, recipe, settings, n, k,
                                   scale_dtype);
        }
      }
      if (!quantized || unit.layers.empty()) continue;
      bool any_packed = false;
      for (size_t c = 0; c < candidates.size(); ++c) {
        if (!holdable[c]) continue;
        unit.candidates.push_back(measures[c]);
        any_packed = any_packed || !candidates[c].keep_float;
      }
      // Nothing the format can store: the group stays as the block task
      // leaves it (unquantized, saying why), outside the budget.
      if (!any_packed) continue;
      selection.quantized_weights += unit.weights;
      selection.groups.push_back(std::move(unit));
    }
  }
  if (selection.groups.empty()) {
    return absl::FailedPreconditionError(
        "mixed_precision: the plan quantizes no layer to choose a setting "
        "for");
  }
  selection.budget_bits = static_cast<int64_t>(
      std::floor(selection.budget_average_bits *
                 static_cast<double>(selection.quantized_weights)));
  int64_t least = 0;
  for (const SettingGroupSelection& unit : selection.groups) {
    int64_t cheapest = std::numeric_limits<int64_t>::max();
    for (const CandidateMeasure& c : unit.candidates) {
      cheapest = std::min(cheapest, c.cost_bits);
    }
    least += cheapest;
  }
  if (least > selection.budget_bits) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "mixed_precision.average_bits: %g bits per weight cannot be met: the "
        "cheapest candidate of every layer group stores %.4f bits per weight "
        "(codes, scales, zeros and g_idx of %d groups, %d weights)",
        selection.budget_average_bits,
        static_cast<double>(least) /
            static_cast<double>(selection.quantized_weights),
        selection.groups.size(), selection.quantized_weights));
  }
  return selection;
}

absl::Status SolveMixedPrecision(MixedPrecisionSelection* selection) {
  std::vector<AllocationGroup> groups;
  groups.reserve(selection->groups.size());
  for (SettingGroupSelection& unit : selection->groups) {
    AllocationGroup group;
    group.name =
        absl::StrCat("block ", unit.block, " ", InputGroupName(unit.group));
    for (CandidateMeasure& c : unit.candidates) {
      c.weighted_error = c.error * unit.sensitivity;
      group.choices.push_back({c.cost_bits, c.weighted_error});
    }
    groups.push_back(std::move(group));
  }
  absl::StatusOr<BitAllocation> allocation =
      AllocateBits(groups, selection->budget_bits);
  if (!allocation.ok()) {
    return absl::Status(
        allocation.status().code(),
        absl::StrCat("mixed_precision: ", allocation.status().message()));
  }
  for (size_t g = 0; g < selection->groups.size(); ++g) {
    selection->groups[g].chosen = allocation->choice[g];
  }
  selection->chosen_bits = allocation->cost;
  selection->allocation_unit_bits = allocation->unit;
  selection->predicted_kl = allocation->error;
  return absl::OkStatus();
}

absl::StatusOr<QuantizationPlan> ApplyMixedPrecision(
    const MixedPrecisionSelection& selection, const QuantizationPlan& plan) {
  QuantizationPlan out = plan;
  for (const SettingGroupSelection& unit : selection.groups) {
    if (unit.chosen < 0 ||
        unit.chosen >= static_cast<int>(unit.candidates.size())) {
      return absl::FailedPreconditionError(
          absl::StrCat("mixed_precision: block ", unit.block, " ",
                       InputGroupName(unit.group), " has no chosen setting"));
    }
    if (unit.block < 0 || unit.block >= static_cast<int>(out.blocks.size())) {
      return absl::FailedPreconditionError(absl::StrCat(
          "mixed_precision: block ", unit.block, " is not in the model"));
    }
    const PrecisionCandidate& chosen = unit.candidates[unit.chosen].setting;
    for (const std::string& name : unit.layers) {
      LayerSettings* settings = nullptr;
      for (auto& [type, s] : out.blocks[unit.block]) {
        if (s.name == name) settings = &s;
      }
      if (settings == nullptr) {
        return absl::FailedPreconditionError(
            absl::StrCat("mixed_precision: ", name, " is not in the plan"));
      }
      if (chosen.keep_float) {
        settings->keep_unquantized = true;
        settings->reason =
            "mixed_precision chose to keep it unquantized (the source's "
            "dtype)";
      } else {
        settings->bits = chosen.bits;
        settings->group_size = chosen.group_size;
      }
    }
  }
  return out;
}

Json MixedPrecisionToJson(const MixedPrecisionSelection& selection) {
  Json j = Json::object();
  j["budget_average_bits"] = selection.budget_average_bits;
  j["quantized_weights"] = selection.quantized_weights;
  j["budget_bits"] = selection.budget_bits;
  j["chosen_bits"] = selection.chosen_bits;
  j["chosen_average_bits"] = selection.chosen_average_bits();
  j["under_budget_bits"] = selection.budget_bits - selection.chosen_bits;
  j["allocation_unit_bits"] = selection.allocation_unit_bits;
  j["predicted_kl"] = selection.predicted_kl;
  j["probe_windows"] = selection.probe_windows;
  j["probe_tokens"] = selection.probe_tokens;
  Json groups = Json::array();
  for (const SettingGroupSelection& unit : selection.groups) {
    Json g = Json::object();
    g["block"] = unit.block;
    g["group"] = std::string(InputGroupName(unit.group));
    g["layers"] = unit.layers;
    g["weights"] = unit.weights;
    g["sensitivity"] = unit.sensitivity;
    g["probe_kl"] = unit.probe_kl;
    g["probe_error"] = unit.probe_error;
    g["chosen"] = unit.chosen;
    if (unit.chosen >= 0 &&
        unit.chosen < static_cast<int>(unit.candidates.size())) {
      g["chosen_setting"] =
          DescribeCandidate(unit.candidates[unit.chosen].setting);
    }
    Json candidates = Json::array();
    for (const CandidateMeasure& c : unit.candidates) {
      candidates.push_back(Json{{"bits", c.setting.bits},
                                {"group_size", c.setting.group_size},
                                {"keep_float", c.setting.keep_float},
                                {"cost_bits", c.cost_bits},
                                {"error", c.error},
                                {"weighted_error", c.weighted_error}});
    }
    g["candidates"] = std::move(candidates);
    groups.push_back(std::move(g));
  }
  j["groups"] = std::move(groups);
  return j;
}

absl::StatusOr<MixedPrecisionSelection> MixedPrecisionFromJson(const Json& j) {
  // Errors name the field's path ("groups[2].candidates[1].cost_bits:
  // missing"), prefixed with what is being read.
  absl::StatusOr<MixedPrecisionSelection> s = SelectionFromJson(j);
  if (!s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("mixed_precision selection: ", s.status().message()));
  }
  return s;
}

std::string FormatMixedPrecision(const MixedPrecisionSelection& selection) {
  std::string out = absl::StrFormat(
      "mixed precision: %.4f bits per weight stored for a budget of %g "
      "(%d bits under it); predicted KL %.5f; sensitivity probes on %d "
      "held-out windows (%d tokens)\n",
      selection.chosen_average_bits(), selection.budget_average_bits,
      selection.budget_bits - selection.chosen_bits, selection.predicted_kl,
      selection.probe_windows, selection.probe_tokens);
  for (const SettingGroupSelection& unit : selection.groups) {
    const std::string chosen =
        unit.chosen >= 0 &&
                unit.chosen < static_cast<int>(unit.candidates.size())
            ? DescribeCandidate(unit.candidates[unit.chosen].setting)
            : "-";
    std::vector<std::string> why;
    for (const CandidateMeasure& c : unit.candidates) {
      why.push_back(absl::StrFormat("%s err %.3g kl %.3g",
                                    DescribeCandidate(c.setting), c.error,
                                    c.weighted_error));
    }
    absl::StrAppend(
        &out,
        absl::StrFormat("  block %-3d %-8s -> %-14s sensitivity %.3g; %s\n",
                        unit.block, InputGroupName(unit.group), chosen,
                        unit.sensitivity, absl::StrJoin(why, ", ")));
  }
  return out;
}

absl::Status CheckSelectionMatchesPlan(const MixedPrecisionSelection& measured,
                                       const MixedPrecisionSelection& planned) {
  auto mismatch = [](const std::string& what) {
    return absl::DataLossError(absl::StrCat(
        "mixed_precision selection does not match this job's plan: ", what));
  };
  if (measured.budget_bits != planned.budget_bits ||
      measured.quantized_weights != planned.quantized_weights) {
    return mismatch("budget");
  }
  if (measured.groups.size() != planned.groups.size()) {
    return mismatch("number of groups");
  }
  for (size_t g = 0; g < planned.groups.size(); ++g) {
    const SettingGroupSelection& a = measured.groups[g];
    const SettingGroupSelection& b = planned.groups[g];
    const std::string where = absl::StrCat("groups[", g, "]");
    if (a.block != b.block || a.group != b.group || a.layers != b.layers ||
        a.weights != b.weights) {
      return mismatch(where + " layers");
    }
    if (a.candidates.size() != b.candidates.size()) {
      return mismatch(where + " candidates");
    }
    for (size_t c = 0; c < b.candidates.size(); ++c) {
      if (!(a.candidates[c].setting == b.candidates[c].setting) ||
          a.candidates[c].cost_bits != b.candidates[c].cost_bits) {
        return mismatch(absl::StrCat(where, ".candidates[", c, "]"));
      }
    }
    if (a.chosen < 0) return mismatch(where + " has no choice");
  }
  return absl::OkStatus();
}

}  // namespace quant

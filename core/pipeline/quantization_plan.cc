// Recipe + model -> per-layer plan, with the format checks.
#include "core/pipeline/quantization_plan.h"

#include <algorithm>
#include <cstdint>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/base/status_macros.h"
#include "core/model/expert_rank.h"
#include "core/model/linear_layers.h"
#include "core/pipeline/mixed_precision_selection.h"

namespace quant {
namespace {

std::string OverrideList(const LayerSettings& s) {
  std::vector<std::string> parts;
  for (int i : s.overrides) parts.push_back(absl::StrCat("overrides[", i, "]"));
  return parts.empty() ? "the recipe" : absl::StrJoin(parts, ", ");
}

// T <= samples * seq_len whatever the text, so a layer with more inputs than
// that is certain to get a rank-deficient Hessian: say so at submit time.
// The audit flags the exact count per layer (rank_deficient) at the end.
void AddRankWarnings(const Recipe& recipe,
                     const std::vector<LinearLayerSpec>& specs,
                     const std::vector<LayerSettings>& settings,
                     std::vector<std::string>* warnings) {
  const int64_t max_tokens = static_cast<int64_t>(recipe.calibration.samples) *
                             recipe.calibration.seq_len;
  std::map<int64_t, std::vector<std::string>> types_by_k;
  for (size_t i = 0; i < specs.size(); ++i) {
    if (settings[i].keep_unquantized) continue;
    if (specs[i].in_features <= max_tokens) continue;
    std::vector<std::string>& types = types_by_k[specs[i].in_features];
    if (std::find(types.begin(), types.end(), specs[i].type_name()) ==
        types.end()) {
      types.push_back(specs[i].type_name());
    }
  }
  for (const auto& [k, types] : types_by_k) {
    warnings->push_back(absl::StrCat(
        "calibration: at most ", max_tokens, " tokens (samples ",
        recipe.calibration.samples, " x seq_len ", recipe.calibration.seq_len,
        "), fewer than the ", k, " inputs of ", absl::StrJoin(types, ", "),
        ": their Hessians are rank-deficient (T < K), so GPTQ and AWQ lean "
        "on damping there and the audit flags them rank_deficient"));
  }
}

// The seed's arithmetic for experts under natural routing, before any
// work (quantize, submit and the job's warnings print it): an average
// expert's layers see tokens x top-k / experts, and below an expert
// layer's K its Hessian is rank-deficient whatever the damping.
void AddExpertRankWarning(const ModelConfig& config, const Recipe& recipe,
                          const QuantizationPlan& plan,
                          std::vector<std::string>* warnings) {
  const MoeCalibration policy = recipe.moe.value_or(MoeCalibration{});
  if (policy.routing != ExpertRouting::kNatural) return;
  bool experts_quantized = false;
  for (const auto& block : plan.expert_blocks) {
    for (const auto& [type, settings] : block) {
      experts_quantized |= !settings.keep_unquantized;
    }
  }
  const std::optional<ExpertRankEstimate> rank = EstimateExpertRank(
      config, static_cast<int64_t>(recipe.calibration.samples) *
                  recipe.calibration.seq_len);
  if (!experts_quantized || !rank.has_value() ||
      !(rank->gate_up_rank_deficient() || rank->down_rank_deficient())) {
    return;
  }
  std::vector<std::string> below;
  if (rank->gate_up_rank_deficient()) {
    below.push_back(absl::StrCat("K = ", rank->gate_up_k, " of gate/up"));
  }
  if (rank->down_rank_deficient()) {
    below.push_back(absl::StrCat("K = ", rank->down_k, " of down"));
  }
  warnings->push_back(absl::StrFormat(
      "%s, below %s: their Hessians are rank-deficient, damping "
      "dominates and GPTQ behaves much like RTN; about %d calibration "
      "tokens reach K for an average expert, or use moe: {routing: "
      "all_experts}",
      ExpertTokensSentence(*rank), absl::StrJoin(below, " and "),
      rank->TokensForFullRank()));
}

// How a layer will be packed, for the fused-layer error: "8 bits, group
// size 128, sym (overrides[0])" or "unquantized (ignore[1] ...)".
std::string PackedSettingText(const LayerSettings& s) {
  if (s.keep_unquantized) return absl::StrCat("unquantized (", s.reason, ")");
  return absl::StrCat(s.bits, " bits, group size ", s.group_size, ", ",
                      s.grid == QuantGrid::kAsym ? "asym" : "sym", " (",
                      OverrideList(s), ")");
}

bool SamePacking(const LayerSettings& a, const LayerSettings& b) {
  if (a.keep_unquantized || b.keep_unquantized) {
    return a.keep_unquantized == b.keep_unquantized;
  }
  return a.bits == b.bits && a.group_size == b.group_size &&
         (a.grid == QuantGrid::kAsym) == (b.grid == QuantGrid::kAsym);
}

// Runtimes build q/k/v and gate/up into one layer each (FusedLayerName)
// and pack it with one setting: vLLM refuses a fused layer whose parts
// differ, so such a recipe is refused here, naming the layers, rather than
// producing a checkpoint it would not load.
absl::Status CheckFusedLayersAgree(const std::vector<LinearLayerSpec>& specs,
                                   const std::vector<LayerSettings>& layers) {
  // specs come block by block, so only the same block's earlier layers
  // are compared (linear in the model's depth).
  size_t block_start = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    if (specs[i].block != specs[block_start].block) block_start = i;
    for (size_t j = block_start; j < i; ++j) {
      if (specs[j].block != specs[i].block ||
          FusedLayerName(specs[j].type) != FusedLayerName(specs[i].type) ||
          SamePacking(layers[j], layers[i])) {
        continue;
      }
      std::vector<std::string> members;
      for (LayerType t : FusedLayerMembers(specs[i].type)) {
        members.push_back(std::string(LayerTypeName(t)));
      }
      return absl::InvalidArgumentError(absl::StrCat(
          specs[i].name, ": runtimes fuse ", absl::StrJoin(members, ", "),
          " into one layer (vLLM's ", FusedLayerName(specs[i].type),
          ") packed with one setting, but ", specs[j].type_name(), " gets ",
          PackedSettingText(layers[j]), " and ", specs[i].type_name(), " gets ",
          PackedSettingText(layers[i]),
          "; give all of them the same bits, group_size and grid, or keep "
          "all of them unquantized"));
    }
  }
  return absl::OkStatus();
}

// Every expert of a block must be packed alike (vLLM's FusedMoE holds all
// of a block's experts' gate/up (w13) and down (w2) with one quantization
// method), and ExpertQuantizeInput takes one setting per layer type for
// all experts, so a block's experts must agree per type on every setting
// and across types on the packing.
bool SameSettings(const LayerSettings& a, const LayerSettings& b) {
  if (a.keep_unquantized || b.keep_unquantized) {
    return a.keep_unquantized == b.keep_unquantized;
  }
  return SamePacking(a, b) && a.method == b.method && a.grid == b.grid &&
         a.damp == b.damp;
}

absl::Status AssignExpertSettings(
    const ModelConfig& config, const std::vector<LinearLayerSpec>& experts,
    const LayerSettings* settings,
    std::vector<std::map<LayerType, LayerSettings>>* expert_blocks) {
  for (size_t i = 0; i < experts.size(); ++i) {
    const LinearLayerSpec& spec = experts[i];
    const LayerSettings& s = settings[i];
    std::map<LayerType, LayerSettings>& block = (*expert_blocks)[spec.block];
    if (!s.keep_unquantized && s.method == QuantMethod::kAwq) {
      return absl::UnimplementedError(absl::StrCat(
          spec.name, ": ", OverrideList(s),
          " gives it method awq, which is not supported for experts (their "
          "gate and up share the post-attention norm, so one expert's input "
          "scales have nowhere to fold); use gptq or rtn for the experts"));
    }
    auto same_type = block.find(spec.type);
    const LayerSettings* first =
        same_type != block.end()
            ? &same_type->second
            : (block.empty() ? nullptr : &block.begin()->second);
    if (first != nullptr &&
        (same_type != block.end() ? !SameSettings(*first, s)
                                  : !SamePacking(*first, s))) {
      return absl::InvalidArgumentError(absl::StrCat(
          spec.name,
          ": vLLM packs every expert of a block with one setting (its "
          "fused-MoE layer ",
          ExpertsModuleName(config, spec.block), "), but ", first->name,
          " gets ", PackedSettingText(*first), " and ", spec.name, " gets ",
          PackedSettingText(s),
          "; give all of the block's experts the same bits, group_size, "
          "grid, method and damp"));
    }
    if (same_type == block.end()) block[spec.type] = s;
  }
  return absl::OkStatus();
}

}  // namespace

CalibrationSplitOptions SplitOptionsFromRecipe(const Recipe& recipe) {
  const CalibrationSettings& c = recipe.calibration;
  CalibrationSplitOptions options;
  options.samples = c.samples;
  options.seq_len = c.seq_len;
  options.heldout_fraction = c.heldout_fraction;
  options.heldout_count = c.heldout_count;
  options.heldout_samples = c.heldout_samples;
  options.seed = c.seed;
  options.packing = c.packing == CalibrationPacking::kPerDocument
                        ? WindowPacking::kPerDocument
                        : WindowPacking::kConcatenate;
  return options;
}

ChatTemplateChoice ChatChoiceFromRecipe(const Recipe& recipe) {
  ChatTemplateChoice choice;
  choice.chat_template = recipe.calibration.chat_template;
  choice.system_prompt = recipe.calibration.system_prompt;
  choice.add_generation_prompt = recipe.calibration.add_generation_prompt;
  return choice;
}

absl::StatusOr<QuantizationPlan> PlanQuantization(const ModelConfig& config,
                                                  const Recipe& recipe) {
  QUANT_RETURN_IF_ERROR(ValidateRecipe(recipe));
  // Checked here, before any work: calibration, held-out and gate windows
  // are all seq_len tokens, which the model must be able to attend over.
  if (recipe.calibration.seq_len > config.max_position_embeddings) {
    return absl::InvalidArgumentError(
        absl::StrCat("calibration.seq_len: ", recipe.calibration.seq_len,
                     " exceeds the model's max_position_embeddings (",
                     config.max_position_embeddings, "); use at most ",
                     config.max_position_embeddings));
  }
  const std::vector<LinearLayerSpec> specs = ListAllLinearLayers(config);
  std::vector<std::string> names;
  for (const LinearLayerSpec& spec : specs) names.push_back(spec.name);
  // Then the experts and routers of mixture-of-experts blocks, then the
  // embeddings and head.
  std::vector<LinearLayerSpec> experts;
  std::vector<std::string> routers;
  for (int b = 0; b < config.num_hidden_layers; ++b) {
    if (!config.IsMoeBlock(b)) continue;
    for (LinearLayerSpec& spec : ListExpertLayers(config, b)) {
      experts.push_back(std::move(spec));
    }
    routers.push_back(RouterName(config, b));
  }
  for (const LinearLayerSpec& spec : experts) names.push_back(spec.name);
  for (const std::string& router : routers) names.push_back(router);
  names.push_back("model.embed_tokens");
  names.push_back("lm_head");
  QUANT_ASSIGN_OR_RETURN(LayerPlan layer_plan,
                         ResolveLayerSettings(recipe, names));
  const std::vector<LayerSettings>& resolved = layer_plan.layers;
  QUANT_RETURN_IF_ERROR(CheckFusedLayersAgree(
      specs, std::vector<LayerSettings>(resolved.begin(),
                                        resolved.begin() + specs.size())));
  QuantizationPlan plan;
  plan.warnings = layer_plan.warnings;
  plan.blocks.resize(config.num_hidden_layers);
  plan.expert_blocks.resize(config.num_hidden_layers);
  for (size_t i = 0; i < specs.size(); ++i) {
    plan.blocks[specs[i].block][specs[i].type] = resolved[i];
  }
  QUANT_RETURN_IF_ERROR(AssignExpertSettings(
      config, experts, resolved.data() + specs.size(), &plan.expert_blocks));
  for (size_t i = specs.size() + experts.size(); i < resolved.size(); ++i) {
    const LayerSettings& s = resolved[i];
    if (s.keep_unquantized) continue;
    if (i < specs.size() + experts.size() + routers.size()) {
      return absl::UnimplementedError(absl::StrCat(
          s.name, ": ", OverrideList(s),
          " would quantize this mixture-of-experts router; vLLM builds "
          "routers unquantized (quant_config=None) and the forward pass "
          "needs them exact, so they stay unquantized"));
    }
    return absl::UnimplementedError(absl::StrCat(
        s.name, ": ", OverrideList(s),
        " would quantize it; embeddings and lm_head stay unquantized in "
        "this version"));
  }
  AddRankWarnings(recipe, specs, layer_plan.layers, &plan.warnings);
  AddExpertRankWarning(config, recipe, plan, &plan.warnings);
  if (recipe.gates.max_starved_experts.has_value() && !config.moe.has_value()) {
    plan.warnings.push_back(absl::StrCat(
        "gates.max_starved_experts: ", ArchitectureName(config.architecture),
        " has no experts, so the gate passes with none starved"));
  }
  if (recipe.mixed_precision.has_value() && config.moe.has_value()) {
    return absl::UnimplementedError(absl::StrCat(
        "mixed_precision: ", ArchitectureName(config.architecture),
        " is a mixture-of-experts model; mixed precision over experts is "
        "not supported yet (see docs/MOE.md): give the experts one setting"));
  }
  if (recipe.mixed_precision.has_value()) {
    // Refuses a budget no assignment meets, before any calibration.
    QUANT_RETURN_IF_ERROR(PlanMixedPrecision(config, recipe, plan).status());
  }
  return plan;
}

}  // namespace quant

// `quantctl recipe validate`: load and validate the recipe, then print a
// summary or its canonical JSON; with --checkpoint, resolve it against the
// checkpoint's layers.
#include "client/recipe_command.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/common_flags.h"
#include "client/estimate_print.h"
#include "core/base/status_macros.h"
#include "core/base/thread_pool.h"
#include "core/estimate/plan_estimate.h"
#include "core/estimate/rate_probe.h"
#include "core/model/checkpoint.h"
#include "core/model/expert_rank.h"
#include "core/model/linear_layers.h"
#include "core/pipeline/quantization_plan.h"
#include "core/recipe/layer_plan.h"
#include "core/recipe/recipe.h"
#include "nlohmann/json.hpp"

// Defined in eval_command.cc: a flag name may be defined once per program.

ABSL_FLAG(bool, estimate, false,
          "With --checkpoint: also print the job's plan (tasks, tokens), the "
          "packed checkpoint's size and the time it takes on this machine's "
          "cores, measured by a short probe of the kernels.");

namespace quant {
namespace {

using OrderedJson = nlohmann::ordered_json;

// The layers a recipe is resolved against: the embedding, every linear layer
// in calibration order, and lm_head when it is not tied to the embedding.
std::vector<std::string> CheckpointLayerNames(const ModelConfig& config) {
  std::vector<std::string> names = {"model.embed_tokens"};
  for (const LinearLayerSpec& layer : ListAllLinearLayers(config)) {
    names.push_back(layer.name);
  }
  if (!config.tie_word_embeddings) names.push_back("lm_head");
  return names;
}

// Input widths K of the linear layers, by name.
std::map<std::string, int64_t> InputWidths(const ModelConfig& config) {
  std::map<std::string, int64_t> widths;
  for (const LinearLayerSpec& layer : ListAllLinearLayers(config)) {
    widths[layer.name] = layer.in_features;
  }
  for (int b = 0; b < config.num_hidden_layers; ++b) {
    for (const LinearLayerSpec& layer : ListExpertLayers(config, b)) {
      if (layer.expert != 0) break;  // Every expert is alike.
      std::string name = layer.name;
      name.replace(name.find(".experts.0."), 11, ".experts.*.");
      widths[name] = layer.in_features;
    }
  }
  return widths;
}

// A note when the layer's groups do not tile its input width: the packer
// then decides (DESIGN: such a layer stays unquantized and the audit says
// so); the recipe is still valid.
std::string GroupFitNote(const LayerSettings& layer,
                         const std::map<std::string, int64_t>& widths) {
  auto it = widths.find(layer.name);
  if (layer.keep_unquantized || layer.group_size == 0 || it == widths.end() ||
      it->second % layer.group_size == 0) {
    return "";
  }
  return absl::StrCat("group_size ", layer.group_size,
                      " does not divide K=", it->second);
}

std::string DampText(const DampValue& damp) {
  return damp.automatic ? "auto" : absl::StrCat(damp.fraction);
}

OrderedJson LayerToJson(const LayerSettings& layer, const std::string& note) {
  OrderedJson json = OrderedJson::object();
  json["name"] = layer.name;
  json["keep_unquantized"] = layer.keep_unquantized;
  if (layer.keep_unquantized) {
    json["reason"] = layer.reason;
  } else {
    json["method"] = QuantMethodName(layer.method);
    json["bits"] = layer.bits;
    json["group_size"] = layer.group_size;
    json["grid"] = QuantGridName(layer.grid);
    json["damp"] = layer.damp.automatic ? OrderedJson("auto")
                                        : OrderedJson(layer.damp.fraction);
  }
  json["overrides"] = layer.overrides;
  if (!note.empty()) json["note"] = note;
  return json;
}

void PrintPlanText(const LayerPlan& plan,
                   const std::map<std::string, int64_t>& widths,
                   std::ostream& out) {
  size_t width = 0;
  for (const LayerSettings& layer : plan.layers) {
    width = std::max(width, layer.name.size());
  }
  for (const LayerSettings& layer : plan.layers) {
    out << absl::StrFormat("  %-*s  ", static_cast<int>(width), layer.name);
    if (layer.keep_unquantized) {
      out << "unquantized: " << layer.reason << "\n";
      continue;
    }
    out << absl::StrFormat("%-4s %d-bit group_size %-4d %-14s damp %s",
                           QuantMethodName(layer.method), layer.bits,
                           layer.group_size, QuantGridName(layer.grid),
                           DampText(layer.damp));
    if (!layer.overrides.empty()) {
      out << "  (overrides";
      for (int index : layer.overrides) out << " " << index;
      out << ")";
    }
    const std::string note = GroupFitNote(layer, widths);
    if (!note.empty()) out << "  [" << note << "]";
    out << "\n";
  }
}

absl::Status RunRecipe(const CommandInvocation& invocation) {
  const std::string& subcommand = invocation.args[0];
  if (subcommand != "validate") {
    return UsageError(absl::StrCat("unknown subcommand \"", subcommand,
                                   "\" (known: validate)"));
  }
  const std::string& path = invocation.args[1];
  QUANT_ASSIGN_OR_RETURN(const Recipe recipe, LoadRecipe(path));
  const bool json = absl::GetFlag(FLAGS_json);
  const std::string checkpoint_dir = absl::GetFlag(FLAGS_checkpoint);
  if (checkpoint_dir.empty()) {
    if (absl::GetFlag(FLAGS_estimate)) {
      return UsageError("--estimate: needs --checkpoint DIR");
    }
    if (json) {
      *invocation.out << RecipeToJson(recipe) << "\n";
    } else {
      *invocation.out << path << ": valid recipe ("
                      << QuantMethodName(recipe.method) << ", " << recipe.bits
                      << "-bit, group_size " << recipe.group_size << ", "
                      << QuantGridName(recipe.grid) << ", format "
                      << OutputFormatName(recipe.format) << ", "
                      << recipe.overrides.size() << " override"
                      << (recipe.overrides.size() == 1 ? "" : "s") << ")\n";
    }
    return absl::OkStatus();
  }

  QUANT_ASSIGN_OR_RETURN(std::unique_ptr<Checkpoint> checkpoint,
                         Checkpoint::Open(checkpoint_dir));
  std::optional<PlanEstimate> estimate;
  std::string where;
  if (absl::GetFlag(FLAGS_estimate)) {
    ThreadPool pool(ThreadPool::AvailableCores());
    QUANT_ASSIGN_OR_RETURN(const WorkRates rates, MeasureWorkRates(&pool));
    QUANT_ASSIGN_OR_RETURN(estimate,
                           EstimatePlan(*checkpoint, recipe, rates, 1));
    where = absl::StrCat("this machine (", pool.threads(), " thread",
                         pool.threads() == 1 ? "" : "s", ")");
  }
  QUANT_ASSIGN_OR_RETURN(
      const LayerPlan plan,
      ResolveLayerSettings(recipe, CheckpointLayerNames(checkpoint->config())));
  const std::map<std::string, int64_t> widths =
      InputWidths(checkpoint->config());
  // The seed's rank arithmetic for the experts, at the recipe's
  // calibration size.
  const std::optional<ExpertRankEstimate> experts = EstimateExpertRank(
      checkpoint->config(), static_cast<int64_t>(recipe.calibration.samples) *
                                recipe.calibration.seq_len);
  // Experts are planned per block (every expert of a block alike), with the
  // checks quantize and submit make; their table lists each block's
  // experts once, as model.layers.N.mlp.experts.*.gate_proj.
  LayerPlan expert_table;
  if (experts.has_value()) {
    QUANT_ASSIGN_OR_RETURN(const QuantizationPlan quantization,
                           PlanQuantization(checkpoint->config(), recipe));
    for (const auto& block : quantization.expert_blocks) {
      for (const auto& [type, settings] : block) {
        LayerSettings row = settings;
        const size_t at = row.name.find(".experts.0.");
        if (at != std::string::npos) row.name.replace(at, 11, ".experts.*.");
        expert_table.layers.push_back(std::move(row));
      }
    }
  }
  const MoeCalibration moe_policy = recipe.moe.value_or(MoeCalibration{});
  bool experts_quantized = false;
  for (const LayerSettings& row : expert_table.layers) {
    experts_quantized |= !row.keep_unquantized;
  }
  if (json) {
    OrderedJson result = OrderedJson::object();
    result["recipe"] = OrderedJson::parse(RecipeToJson(recipe));
    OrderedJson& layers = result["layers"];
    layers = OrderedJson::array();
    for (const LayerSettings& layer : plan.layers) {
      layers.push_back(LayerToJson(layer, GroupFitNote(layer, widths)));
    }
    result["warnings"] = plan.warnings;
    if (experts.has_value()) {
      result["experts"] = {
          {"block_tokens", experts->block_tokens},
          {"num_experts", experts->num_experts},
          {"experts_per_token", experts->experts_per_token},
          {"tokens_per_expert", experts->tokens_per_expert},
          {"gate_up_k", experts->gate_up_k},
          {"down_k", experts->down_k},
          {"gate_up_rank_deficient", experts->gate_up_rank_deficient()},
          {"down_rank_deficient", experts->down_rank_deficient()},
          {"tokens_for_full_rank", experts->TokensForFullRank()},
          {"quantized", experts_quantized},
          {"routing", ExpertRoutingName(moe_policy.routing)},
          {"min_tokens_per_expert", moe_policy.min_tokens_per_expert},
          {"on_starved_expert",
           StarvedExpertActionName(moe_policy.on_starved_expert)}};
      OrderedJson& rows = result["experts"]["layers"];
      rows = OrderedJson::array();
      for (const LayerSettings& layer : expert_table.layers) {
        rows.push_back(LayerToJson(layer, GroupFitNote(layer, widths)));
      }
    }
    if (estimate.has_value()) {
      result["estimate"] = PlanEstimateToJson(*estimate);
      result["estimate"]["where"] = where;
    }
    *invocation.out << result.dump(2, ' ', false,
                                   OrderedJson::error_handler_t::replace)
                    << "\n";
  } else {
    int quantized = 0;
    for (const LayerSettings& layer : plan.layers) {
      quantized += !layer.keep_unquantized;
    }
    *invocation.out << path << ": valid recipe; " << quantized << " of "
                    << plan.layers.size() << " layers of " << checkpoint_dir
                    << " quantized\n";
    PrintPlanText(plan, widths, *invocation.out);
    if (experts.has_value()) {
      *invocation.out << DescribeExpertRank(*experts) << "  experts (moe: "
                      << "routing " << ExpertRoutingName(moe_policy.routing)
                      << ", min_tokens_per_expert "
                      << moe_policy.min_tokens_per_expert
                      << ", on_starved_expert "
                      << StarvedExpertActionName(moe_policy.on_starved_expert)
                      << "), every expert of a block alike:\n";
      PrintPlanText(expert_table, widths, *invocation.out);
    }
    if (estimate.has_value())
      PrintPlanEstimate(*estimate, where, *invocation.out);
  }
  for (const std::string& warning : plan.warnings) {
    *invocation.err << "warning: " << warning << "\n";
  }
  return absl::OkStatus();
}

}  // namespace

Command RecipeCommand() {
  Command command;
  command.name = "recipe";
  command.summary = "Validate a quantization recipe (YAML or JSON).";
  command.usage =
      "recipe validate RECIPE_FILE [--json] [--checkpoint DIR [--estimate]]";
  command.description =
      "Checks every field of RECIPE_FILE (unknown or duplicate keys, types,\n"
      "ranges, regexes, combinations that would have no effect) and names\n"
      "the file, line, column and field of the first problem (exit 1).\n"
      "--json prints the canonical JSON the manifest stores. --checkpoint\n"
      "resolves the recipe against that checkpoint's layers and prints each\n"
      "layer's method, bits, group size, grid and damping, or why it stays\n"
      "unquantized; overrides that match no layer are warnings on stderr.\n"
      "A mixture-of-experts checkpoint (qwen3_moe, mixtral) also gets the\n"
      "seed's arithmetic: calibration tokens x top-k / experts is what an\n"
      "average expert's layers see under `moe: {routing: natural}`, rare\n"
      "experts far fewer, and below an expert layer's K its Hessian is\n"
      "rank-deficient (GPTQ near RTN); then each block's experts' settings\n"
      "(one per block: vLLM packs them together) and the policy: `routing:\n"
      "all_experts` calibrates every expert on every token,\n"
      "`min_tokens_per_expert: N` marks an expert with fewer starved, and\n"
      "`on_starved_expert: rtn | damp | fail` rounds it, raises its damping\n"
      "to min(1, max(damp, 0.01) x N / tokens), or fails the job.\n"
      "--estimate adds the job's plan: its tasks, the calibration and\n"
      "held-out tokens, the packed checkpoint's size (a finalize that writes\n"
      "more than its layers predict fails) and the time on this machine.\n"
      "Runs locally; no server (`quantctl submit --dry_run` estimates on\n"
      "quantd's workers).";
  command.example =
      "quantctl recipe validate recipe.yaml --checkpoint "
      "../shared/models/stories260K/hf-f32";
  command.flags = {&absl::GetFlagReflectionHandle(FLAGS_json),
                   &absl::GetFlagReflectionHandle(FLAGS_checkpoint),
                   &absl::GetFlagReflectionHandle(FLAGS_estimate)};
  command.min_args = 2;
  command.max_args = 2;
  command.run = RunRecipe;
  return command;
}

}  // namespace quant

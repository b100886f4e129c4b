// Per-expert calibration and quantization of a mixture-of-experts block.
#include "core/pipeline/expert_quantizer.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/forward/block_forward.h"
#include "core/forward/moe_mlp.h"
#include "core/pipeline/layer_packing.h"

namespace quant {
namespace {

// Below this a fixed damping fraction is raised from, so a recipe's damp: 0
// still gets a starved expert some damping.
constexpr double kStarvedDampFloor = 0.01;

RowMatrixF GatherRows(const RowMatrixF& rows,
                      const std::vector<int64_t>& indices) {
  RowMatrixF out(static_cast<int64_t>(indices.size()), rows.cols());
  for (size_t i = 0; i < indices.size(); ++i) {
    out.row(static_cast<int64_t>(i)) = rows.row(indices[i]);
  }
  return out;
}

// The settings an expert's layer runs with, and why they differ from the
// recipe's when the expert is starved.
void ApplyStarvedPolicy(const ExpertCalibrationPolicy& policy,
                        const Recipe& recipe, int64_t tokens,
                        LayerResult* result) {
  const std::string why = tokens == 0
                              ? std::string("saw no calibration token")
                              : absl::StrCat("saw ", tokens,
                                             " calibration tokens, fewer than "
                                             "moe.min_tokens_per_expert (",
                                             policy.min_tokens_per_expert, ")");
  LayerSettings& settings = result->settings;
  if (tokens == 0 || policy.on_starved_expert == StarvedExpertAction::kRtn ||
      settings.method == QuantMethod::kRtn) {
    if (settings.method != QuantMethod::kRtn) {
      settings.method = QuantMethod::kRtn;
      result->fallback = "rtn";
      result->fallback_reason = absl::StrCat("expert ", why,
                                             ": rounded to "
                                             "nearest");
    }
    return;
  }
  // kDamp.
  double base = settings.damp.fraction;
  if (settings.damp.automatic && !recipe.damp.auto_grid.empty()) {
    base = *std::max_element(recipe.damp.auto_grid.begin(),
                             recipe.damp.auto_grid.end());
  }
  base = std::max(base, kStarvedDampFloor);
  const double raised =
      std::min(1.0, base * static_cast<double>(policy.min_tokens_per_expert) /
                        static_cast<double>(tokens));
  settings.damp.automatic = false;
  settings.damp.fraction = raised;
  result->fallback = "damp";
  result->fallback_reason =
      absl::StrCat("expert ", why, ": damping raised from ", base, " to ",
                   raised, " (x min_tokens_per_expert / tokens, at most 1)");
}

class ExpertRunner {
 public:
  explicit ExpertRunner(const ExpertQuantizeInput& input) : in_(input) {}

  absl::StatusOr<ExpertQuantization> Run();

 private:
  absl::Status CheckInput() const;
  // Quantizes the layers of `results` that read `calibration` (held-out
  // `heldout`) as one group, into out_.effective.
  absl::Status QuantizeGroup(int expert,
                             const std::vector<LayerResult*>& results,
                             const RowMatrixF& calibration,
                             const RowMatrixF& heldout);
  // silu(gate(x)) * up(x) with `expert`'s gate and up.
  static RowMatrixF DownInput(const ExpertWeights& expert,
                              const RowMatrixF& x) {
    return SwiGlu(ApplyLinear(x, expert.gate), ApplyLinear(x, expert.up));
  }

  const ExpertQuantizeInput& in_;
  ExpertQuantization out_;
};

absl::Status ExpertRunner::CheckInput() const {
  if (in_.config == nullptr || in_.recipe == nullptr ||
      in_.weights == nullptr || in_.calibration_rows == nullptr ||
      in_.heldout_rows == nullptr) {
    return absl::InvalidArgumentError(
        "expert quantizer: config, recipe, weights and both splits' rows "
        "needed");
  }
  if (!in_.config->IsMoeBlock(in_.block)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "expert quantizer: block ", in_.block, " is not a mixture of experts"));
  }
  const MoeConfig& moe = *in_.config->moe;
  if (static_cast<int>(in_.weights->experts.size()) != moe.num_experts ||
      in_.weights->router.rows() != moe.num_experts ||
      in_.weights->router.cols() != in_.config->hidden_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "expert quantizer: block ", in_.block, " has ",
        in_.weights->experts.size(), " experts and a router of [",
        in_.weights->router.rows(), ", ", in_.weights->router.cols(),
        "]; the config says ", moe.num_experts, " experts of hidden size ",
        in_.config->hidden_size));
  }
  for (const RowMatrixF* rows : {in_.calibration_rows, in_.heldout_rows}) {
    if (rows->cols() != in_.config->hidden_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("expert quantizer: rows of width ", rows->cols(),
                       ", expected ", in_.config->hidden_size));
    }
  }
  for (LayerType type :
       {LayerType::kGateProj, LayerType::kUpProj, LayerType::kDownProj}) {
    auto it = in_.settings.find(type);
    if (it == in_.settings.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("expert quantizer: no settings for the experts' ",
                       LayerTypeName(type)));
    }
    if (!it->second.keep_unquantized &&
        it->second.method == QuantMethod::kAwq) {
      // AWQ folds 1/s into the op producing the input; the experts' gate
      // and up share the post-attention norm, so one expert's s cannot go
      // there.
      return absl::UnimplementedError(absl::StrCat(
          "expert quantizer: ", LayerTypeName(type),
          " of the experts: method awq is not supported for experts; use "
          "gptq or rtn"));
    }
  }
  return absl::OkStatus();
}

absl::Status ExpertRunner::QuantizeGroup(
    int expert, const std::vector<LayerResult*>& results,
    const RowMatrixF& calibration, const RowMatrixF& heldout) {
  const ExpertWeights& source = in_.weights->experts[expert];
  GroupQuantizeOptions options;
  options.recipe = in_.recipe;
  options.awq_fold_available = false;
  options.pool = in_.pool;
  std::vector<GroupLayerInput> layers;
  std::vector<LayerResult*> quantized;
  for (LayerResult* result : results) {
    result->calibration_tokens = calibration.rows();
    result->heldout_tokens = heldout.rows();
    if (result->settings.keep_unquantized || !result->reason.empty()) continue;
    layers.push_back({result->name, result->settings,
                      source.Part(result->type).weight, nullptr});
    quantized.push_back(result);
  }
  if (layers.empty()) return absl::OkStatus();
  GroupActivationStatistics statistics(calibration.cols(), layers, options);
  // Most experts see fewer than K tokens: their audit runs on the rows.
  statistics.KeepFewRows();
  QUANT_RETURN_IF_ERROR(statistics.AddCalibration(calibration));
  QUANT_RETURN_IF_ERROR(statistics.AddHeldout(heldout));
  QUANT_ASSIGN_OR_RETURN(QuantizedGroup group,
                         QuantizeLayerGroup(layers, statistics, options));
  for (size_t i = 0; i < quantized.size(); ++i) {
    LayerResult* result = quantized[i];
    QuantizedGroupLayer& q = group.layers[i];
    result->quantized = true;
    result->layer = std::move(q.layer);
    result->audit = std::move(q.audit);
    result->choices = std::move(q.choices);
    out_.effective.experts[expert].Part(result->type).weight =
        result->layer.dequantized;
  }
  return absl::OkStatus();
}

absl::StatusOr<ExpertQuantization> ExpertRunner::Run() {
  QUANT_RETURN_IF_ERROR(CheckInput());
  const ModelConfig& config = *in_.config;
  const MoeConfig& moe = *config.moe;
  const ExpertCalibrationPolicy& policy = in_.policy;
  const MoeRouting calibration_routing =
      RouteTokens(moe, in_.weights->router, *in_.calibration_rows);
  const MoeRouting heldout_routing =
      RouteTokens(moe, in_.weights->router, *in_.heldout_rows);
  out_.routed_calibration_tokens = calibration_routing.TokensPerExpert();
  out_.routed_heldout_tokens = heldout_routing.TokensPerExpert();
  out_.effective = *in_.weights;
  const std::vector<LinearLayerSpec> specs =
      ListExpertLayers(config, in_.block);
  out_.layers.resize(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    LayerResult& result = out_.layers[i];
    result.name = specs[i].name;
    result.expert = specs[i].expert;
    result.type = specs[i].type;
    result.input_group = specs[i].input_group;
    result.settings = in_.settings.at(specs[i].type);
    result.settings.name = specs[i].name;
    if (result.settings.keep_unquantized) {
      result.reason = result.settings.reason;
      continue;
    }
    const std::string refusal = FormatRefusal(
        in_.recipe->format, specs[i].out_features, specs[i].in_features,
        result.settings.bits, result.settings.group_size);
    if (!refusal.empty()) {
      result.reason =
          absl::StrCat("format ", OutputFormatName(in_.recipe->format),
                       " cannot hold it: ", refusal);
    }
  }
  const bool sequential = in_.recipe->propagation == Propagation::kSequential;
  for (int e = 0; e < moe.num_experts; ++e) {
    const RowMatrixF calibration =
        policy.routing == ExpertRouting::kAllExperts
            ? *in_.calibration_rows
            : GatherRows(*in_.calibration_rows, calibration_routing.rows[e]);
    const RowMatrixF heldout =
        GatherRows(*in_.heldout_rows, heldout_routing.rows[e]);
    const int64_t tokens = calibration.rows();
    LayerResult* gate = &out_.layers[3 * e];
    LayerResult* up = &out_.layers[3 * e + 1];
    LayerResult* down = &out_.layers[3 * e + 2];
    if (tokens == 0 || tokens < policy.min_tokens_per_expert) {
      out_.starved_experts.push_back(e);
      if (policy.on_starved_expert == StarvedExpertAction::kFail) {
        return absl::FailedPreconditionError(absl::StrCat(
            "block ", in_.block, " expert ", e, ": its layers saw ", tokens,
            " calibration tokens, fewer than moe.min_tokens_per_expert (",
            policy.min_tokens_per_expert,
            "), and moe.on_starved_expert is fail; calibrate on more "
            "tokens, use routing: all_experts, or choose rtn or damp"));
      }
      for (LayerResult* result : {gate, up, down}) {
        if (!result->settings.keep_unquantized && result->reason.empty()) {
          ApplyStarvedPolicy(policy, *in_.recipe, tokens, result);
        }
      }
    }
    QUANT_RETURN_IF_ERROR(QuantizeGroup(e, {gate, up}, calibration, heldout));
    const ExpertWeights& source =
        sequential ? out_.effective.experts[e] : in_.weights->experts[e];
    QUANT_RETURN_IF_ERROR(QuantizeGroup(
        e, {down}, DownInput(source, calibration), DownInput(source, heldout)));
  }
  return std::move(out_);
}

}  // namespace

absl::StatusOr<ExpertQuantization> QuantizeExperts(
    const ExpertQuantizeInput& input) {
  ExpertRunner runner(input);
  return runner.Run();
}

}  // namespace quant

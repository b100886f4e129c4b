// Recipe + model -> per-layer plan, with the format checks.
#include "core/pipeline/quantization_plan.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/status_macros.h"
#include "core/model/linear_layers.h"

namespace quant {
namespace {

std::string OverrideList(const LayerSettings& s) {
  std::vector<std::string> parts;
  for (int i : s.overrides) parts.push_back(absl::StrCat("overrides[", i, "]"));
  return parts.empty() ? "the recipe" : absl::StrJoin(parts, ", ");
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

absl::StatusOr<QuantizationPlan> PlanQuantization(const ModelConfig& config,
                                                  const Recipe& recipe) {
  QUANT_RETURN_IF_ERROR(ValidateRecipe(recipe));
  const std::vector<LinearLayerSpec> specs = ListAllLinearLayers(config);
  std::vector<std::string> names;
  for (const LinearLayerSpec& spec : specs) names.push_back(spec.name);
  names.push_back("model.embed_tokens");
  names.push_back("lm_head");
  QUANT_ASSIGN_OR_RETURN(LayerPlan layer_plan,
                         ResolveLayerSettings(recipe, names));
  QuantizationPlan plan;
  plan.warnings = layer_plan.warnings;
  plan.blocks.resize(config.num_hidden_layers);
  for (size_t i = 0; i < layer_plan.layers.size(); ++i) {
    const LayerSettings& s = layer_plan.layers[i];
    if (i >= specs.size()) {
      if (!s.keep_unquantized) {
        return absl::UnimplementedError(absl::StrCat(
            s.name, ": ", OverrideList(s),
            " would quantize it; embeddings and lm_head stay unquantized in "
            "this version"));
      }
      continue;
    }
    plan.blocks[specs[i].block][specs[i].type] = s;
  }
  return plan;
}

}  // namespace quant

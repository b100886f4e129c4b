// What a quantization job will do, decided before any block runs: the
// calibration split options the recipe implies, and every linear layer's
// settings, so a job fails at submit time rather than after hours of work on
// something known up front.
#ifndef QUANT_CORE_PIPELINE_QUANTIZATION_PLAN_H_
#define QUANT_CORE_PIPELINE_QUANTIZATION_PLAN_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/calib/calibration_split.h"
#include "core/model/linear_layers.h"
#include "core/model/model_config.h"
#include "core/recipe/layer_plan.h"
#include "core/recipe/recipe.h"

namespace quant {

// The split's options the recipe's calibration section gives (options.chat
// is left null: the caller loads the renderer ChatChoiceFromRecipe names).
CalibrationSplitOptions SplitOptionsFromRecipe(const Recipe& recipe);
// How the recipe renders conversation documents.
ChatTemplateChoice ChatChoiceFromRecipe(const Recipe& recipe);

struct QuantizationPlan {
  // Per block, the settings of its layers by type (a mixture-of-experts
  // block: q, k, v and o).
  std::vector<std::map<LayerType, LayerSettings>> blocks;
  // Per block, the settings of its experts' gate, up and down, the same for
  // every expert (named after expert 0's layers); empty for a dense block.
  std::vector<std::map<LayerType, LayerSettings>> expert_blocks;
  std::vector<std::string> warnings;  // From ResolveLayerSettings.
};

// Resolves `recipe` over the model's linear layers. Errors
// (InvalidArgument or Unimplemented, naming the layer and the override):
// what ResolveLayerSettings refuses, and overrides that would quantize the
// embeddings or lm_head (not supported yet), and layers that runtimes fuse
// (q/k/v, gate/up: FusedLayerName) given different bits, group sizes,
// grids or quantized-ness, naming the block and both settings. Otherwise
// per-layer bits, group sizes and grids are fine: both formats record them
// per layer.
//
// A mixture-of-experts model's experts are resolved by their own names
// (model.layers.N.mlp.experts.E.gate_proj, ...), and refused
// (InvalidArgument) unless, within each block, every expert's gate, up
// and down get the same settings: vLLM's fused-MoE layer packs all of a
// block's experts with one setting. AWQ on experts, a quantized router
// and mixed precision over an MoE model are Unimplemented.
absl::StatusOr<QuantizationPlan> PlanQuantization(const ModelConfig& config,
                                                  const Recipe& recipe);

}  // namespace quant

#endif  // QUANT_CORE_PIPELINE_QUANTIZATION_PLAN_H_

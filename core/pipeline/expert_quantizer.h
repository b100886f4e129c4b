// Quantizes the experts of one mixture-of-experts block from the MLP's
// input rows, expert by expert, each layer group on the tokens that expert
// sees: under natural routing the rows the router sends it (so an average
// expert sees tokens x top-k / experts of them, rare ones far fewer), under
// all_experts every row (the outputs are still routed as the model routes
// them). An expert whose layers saw fewer than min_tokens_per_expert
// calibration tokens is starved, and the policy decides what happens to it:
//   rtn   its layers are rounded to nearest (GPTQ on a rank-deficient
//         Hessian is mostly damping anyway);
//   damp  GPTQ with its damping raised in proportion to the shortfall:
//         fraction' = min(1, max(fraction, 0.01) x min_tokens / tokens),
//         where damp: auto takes the largest entry of its grid as fraction;
//   fail  the task fails, naming the expert and its count.
// An expert that saw no calibration token at all has no statistics for
// GPTQ and is rounded to nearest unless the policy is fail.
//
// Each expert's [gate, up] share one Hessian over its rows; its down reads
// silu(gate) * up of the same rows, computed with the quantized gate and up
// under sequential propagation (the unquantized ones under independent).
// Every layer is audited on the held-out rows the router sends that expert
// (natural routing, whatever the calibration policy), so an expert's audit
// measures the error it makes on the tokens it actually serves.
#ifndef QUANT_CORE_PIPELINE_EXPERT_QUANTIZER_H_
#define QUANT_CORE_PIPELINE_EXPERT_QUANTIZER_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/base/thread_pool.h"
#include "core/forward/block_weights.h"
#include "core/model/linear_layers.h"
#include "core/model/model_config.h"
#include "core/pipeline/layer_group_quantizer.h"
#include "core/pipeline/layer_result.h"
#include "core/quant/audit.h"
#include "core/quant/matrix_types.h"
#include "core/recipe/layer_plan.h"
#include "core/recipe/recipe.h"

namespace quant {

// The recipe's `moe:` section (core/recipe/recipe.h): routing,
// min_tokens_per_expert, on_starved_expert.
using ExpertCalibrationPolicy = MoeCalibration;

struct ExpertQuantization {
  // Expert by expert, each as gate, up, down (LayerResult::expert set).
  std::vector<LayerResult> layers;
  // What the stored experts compute (the router unchanged).
  MoeMlpWeights effective;
  // Tokens the router sent each expert, per split (natural routing).
  std::vector<int64_t> routed_calibration_tokens;
  std::vector<int64_t> routed_heldout_tokens;
  // Experts whose layers saw fewer than min_tokens_per_expert (or no)
  // calibration tokens.
  std::vector<int> starved_experts;
};

struct ExpertQuantizeInput {
  const ModelConfig* config = nullptr;
  const Recipe* recipe = nullptr;
  int block = 0;
  const MoeMlpWeights* weights = nullptr;  // Unquantized.
  // Settings of the experts' gate, up and down, shared by every expert of
  // the block (vLLM's fused-MoE kernels take one setting for all).
  std::map<LayerType, LayerSettings> settings;
  ExpertCalibrationPolicy policy;
  // The MoE MLP's input (post-attention RMSNorm output), real-token rows
  // only, of each split. Not owned.
  const RowMatrixF* calibration_rows = nullptr;
  const RowMatrixF* heldout_rows = nullptr;
  ThreadPool* pool = nullptr;  // Inline when null; results do not depend on
                               // it.
};

absl::StatusOr<ExpertQuantization> QuantizeExperts(
    const ExpertQuantizeInput& input);

}  // namespace quant

#endif  // QUANT_CORE_PIPELINE_EXPERT_QUANTIZER_H_

// What quantizing one linear layer produced: its settings, whether it was
// quantized (and if not, why), the packed layer, its audit and the method's
// choices. The block task returns one per layer (experts included), the
// task files carry them, and the finalize builds audit.json from them.
#ifndef QUANT_CORE_PIPELINE_LAYER_RESULT_H_
#define QUANT_CORE_PIPELINE_LAYER_RESULT_H_

#include <cstdint>
#include <string>

#include "core/model/linear_layers.h"
#include "core/pipeline/layer_group_quantizer.h"
#include "core/quant/audit.h"
#include "core/quant/quantized_layer.h"
#include "core/recipe/layer_plan.h"

namespace quant {

struct LayerResult {
  std::string name;  // "model.layers.0.self_attn.q_proj"
  LayerType type = LayerType::kQProj;
  InputGroup input_group = InputGroup::kAttnIn;
  LayerSettings settings;
  bool quantized = false;
  std::string reason;  // Why not, when !quantized.
  // When quantized: the packed layer (codes, fp16 scales, zeros, g_idx) as
  // stored, after any AWQ fold, and its audit (measured before the fold, in
  // the layer's own units).
  QuantizedLayer layer;
  LayerAudit audit;
  MethodChoices choices;
  // The op its AWQ input scale was folded into ("input_layernorm", ...), or
  // why there was none.
  std::string awq_fold;
  // Set on a producer whose rows absorbed a later layer's 1/s.
  std::string absorbed_awq_scales_of;

  // A mixture-of-experts block's expert layers (core/pipeline/
  // expert_quantizer.h): the expert's index (-1 for every other layer), the
  // calibration rows its statistics came from and the held-out rows it was
  // audited on, and, when the starved-expert policy changed its method or
  // damping, which ("rtn", "damp") and why.
  int expert = -1;
  int64_t calibration_tokens = 0;
  int64_t heldout_tokens = 0;
  std::string fallback;
  std::string fallback_reason;
};

}  // namespace quant

#endif  // QUANT_CORE_PIPELINE_LAYER_RESULT_H_

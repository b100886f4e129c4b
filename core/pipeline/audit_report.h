// audit.json: every layer's result (audit metrics, Hessian diagnostics,
// flags, or why it stayed unquantized), the gate values and the verdict; and
// the text table quantctl prints from it.
#ifndef QUANT_CORE_PIPELINE_AUDIT_REPORT_H_
#define QUANT_CORE_PIPELINE_AUDIT_REPORT_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/pipeline/block_task.h"
#include "nlohmann/json.hpp"

namespace quant {

// Sets the outlier flag across all quantized layers (by layer type).
void MarkLayerOutliers(std::vector<LayerResult>* layers);

// One layer of audit.json (and of the service's report): name, type,
// input_group, method, bits, group_size, grid, packed (false: kept as it
// was, with "reason"), rel_output_error_cal / _heldout and the RTN ones
// (rtn_rel_output_error_cal / _heldout), output MSEs, weight_mse,
// rtn_weight_mse, gain_cal, gain_heldout, flattery, bits_per_weight,
// hessian {tokens, k, tokens_per_input, dead_channels, rho_rms,
// inv_sqrt_tokens}, damp {used, retries, automatic, grid, validation_error}
// for GPTQ, awq {alpha, fold} for AWQ, seconds, flags. A mixture-of-experts
// expert's layer also has expert, calibration_tokens (the rows routed to it
// that its Hessian saw), heldout_tokens (the rows its audit ran on) and,
// when the starved-expert policy applied, fallback {action, reason}.
nlohmann::json LayerResultToJson(const LayerResult& layer);

// Per mixture-of-experts block, from its experts' layers: [{block, experts,
// calibration_tokens {min, median, max}, heldout_tokens {...}, starved,
// starved_experts}], the tokens being each expert's first layer's. Empty
// for a dense model. BuildAuditJson puts it in summary.moe_blocks.
nlohmann::json ExpertBlockSummaries(const std::vector<LayerResult>& layers);

// {"format_version": 1, "layers": [...], "summary": {...}, "gates": gates,
//  "verdict": gates["verdict"]}.
nlohmann::json BuildAuditJson(const std::vector<LayerResult>& layers,
                              const nlohmann::json& gates);

// One line per layer: name, method, bits, held-out rel. error of RTN and of
// the method, gain, flattery, flags; then the gates and the verdict.
// Expects every field it prints: check an audit.json read from disk with
// CheckAuditTableFields first.
std::string FormatAuditTable(const nlohmann::json& audit);

// InvalidArgument naming the first field FormatAuditTable needs that is
// missing or of the wrong type (e.g. "audit.json: gates.verdict: missing").
absl::Status CheckAuditTableFields(const nlohmann::json& audit);

}  // namespace quant

#endif  // QUANT_CORE_PIPELINE_AUDIT_REPORT_H_

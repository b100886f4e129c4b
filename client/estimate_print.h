// A job's plan estimate (core/estimate/plan_estimate.h) as quantctl prints
// it: `recipe validate --estimate` and `submit --dry_run`, in text and in
// --json.
#ifndef QUANT_CLIENT_ESTIMATE_PRINT_H_
#define QUANT_CLIENT_ESTIMATE_PRINT_H_

#include <ostream>
#include <string>

#include "core/estimate/plan_estimate.h"
#include "nlohmann/json.hpp"

namespace quant {

// `where` says whose rates the time is at ("this machine (2 threads)",
// "2 registered workers").
void PrintPlanEstimate(const PlanEstimate& estimate, const std::string& where,
                       std::ostream& out);

// blocks, tasks, calibration_tokens, heldout_tokens, output_bytes,
// source_bytes, packed_layers, kept_layers, workers, expected_seconds (null
// when unknown).
nlohmann::ordered_json PlanEstimateToJson(const PlanEstimate& estimate);

}  // namespace quant

#endif  // QUANT_CLIENT_ESTIMATE_PRINT_H_

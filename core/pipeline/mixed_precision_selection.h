// Mixed precision (recipe mixed_precision): the units a selection chooses a
// setting for, what each candidate setting costs in stored bits, the choice
// under the recipe's budget, and the record of it (audit.json
// "mixed_precision", and the file the job's tasks share).
//
// A unit is a *setting group*: the layers of one block that read the same
// input, which are also the layers runtimes fuse and pack with one setting
// (q/k/v, o, gate/up, down; docs/RUNTIME_CONFORMANCE.md). Costs come from
// the model's shapes alone, so a budget no assignment meets is refused
// before any calibration. Errors and sensitivities are measured by the
// selection pass (internal/mixed_precision_pass.h); docs/MIXED_PRECISION.md
// says why they are measured the way they are.
#ifndef QUANT_CORE_PIPELINE_MIXED_PRECISION_SELECTION_H_
#define QUANT_CORE_PIPELINE_MIXED_PRECISION_SELECTION_H_

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/model/linear_layers.h"
#include "core/model/model_config.h"
#include "core/pipeline/quantization_plan.h"
#include "core/recipe/recipe.h"
#include "nlohmann/json.hpp"

namespace quant {

// One setting a group may get.
struct PrecisionCandidate {
  int bits = 4;
  int group_size = 128;
  // Kept unquantized, in the source's dtype (16 bits for bfloat16 and
  // float16 checkpoints, 32 for float32 ones); bits unused.
  bool keep_float = false;

  bool operator==(const PrecisionCandidate& o) const {
    return bits == o.bits && group_size == o.group_size &&
           keep_float == o.keep_float;
  }
};

// "4-bit g128", "4-bit per-row", "kept unquantized".
std::string DescribeCandidate(const PrecisionCandidate& candidate);

// The recipe's candidates: every bits x group size (the recipe's
// group_size when mixed_precision.group_sizes is empty), then kept
// unquantized when keep_float. Empty when the recipe has no mixed_precision.
std::vector<PrecisionCandidate> PrecisionCandidates(const Recipe& recipe);

struct CandidateMeasure {
  PrecisionCandidate setting;
  int64_t cost_bits = 0;  // What the format stores for the group's layers.
  // Held-out output error of the group's layers quantized at this setting
  // with the recipe's method: sum over the layers of the mean per-token
  // squared output error (audit output_mse x N). 0 when kept.
  double error = 0.0;
  // error x the group's sensitivity: the predicted KL it adds, nats/token.
  double weighted_error = 0.0;
};

struct SettingGroupSelection {
  int block = 0;
  InputGroup group = InputGroup::kAttnIn;
  std::vector<std::string> layers;  // Full names, checkpoint order.
  int64_t weights = 0;              // Sum of N x K.
  // The recipe's candidates (PrecisionCandidates order) that the format can
  // store for every layer of the group.
  std::vector<CandidateMeasure> candidates;
  // Sensitivity: probe_kl / probe_error, where probe_kl is the held-out KL
  // of the model with only this group round-to-nearest at its cheapest
  // quantized candidate and probe_error that perturbation's output error
  // (the same measure as `error`). 0 when the probe error is 0.
  double sensitivity = 0.0;
  double probe_kl = 0.0;
  double probe_error = 0.0;
  int chosen = -1;  // Index into candidates; -1 before the solve.

  // Whether the layer named `layer` (full name) is one of the group's.
  bool Contains(const std::string& layer) const {
    return std::find(layers.begin(), layers.end(), layer) != layers.end();
  }
};

struct MixedPrecisionSelection {
  double budget_average_bits = 0.0;  // recipe mixed_precision.average_bits
  int64_t quantized_weights = 0;     // Of the groups chosen among.
  int64_t budget_bits = 0;           // average bits x quantized weights.
  int64_t chosen_bits = 0;
  int64_t allocation_unit_bits = 1;  // BitAllocation::unit (1: exact).
  double predicted_kl = 0.0;         // Sum of the chosen weighted errors.
  int probe_windows = 0;             // Held-out windows the probes used.
  int64_t probe_tokens = 0;
  std::vector<SettingGroupSelection> groups;

  double chosen_average_bits() const {
    return quantized_weights > 0 ? static_cast<double>(chosen_bits) /
                                       static_cast<double>(quantized_weights)
                                 : 0.0;
  }
};

// The setting groups of `plan` with every candidate's cost, and the budget.
// A candidate the format cannot store for every layer of a group
// (FormatRefusal), or that vLLM would not load when the recipe gates on it
// (gates.runtime: vllm; compressed-tensors takes 4 and 8 bits), is not
// among the group's. Groups whose layers the plan keeps unquantized, or
// left without a quantized candidate, are not chosen for and not counted
// in the budget. Errors: FailedPrecondition when even the cheapest candidate of
// every group exceeds the budget, saying the least average it can reach;
// InvalidArgument when the recipe has no mixed_precision.
absl::StatusOr<MixedPrecisionSelection> PlanMixedPrecision(
    const ModelConfig& config, const Recipe& recipe,
    const QuantizationPlan& plan);

// Fills each candidate's weighted_error from its error and the group's
// sensitivity, then chooses one candidate per group (AllocateBits) under
// the budget with the least predicted KL.
absl::Status SolveMixedPrecision(MixedPrecisionSelection* selection);

// The plan with each group's layers set to their chosen setting (a kept
// choice keeps them unquantized, with the reason saying so).
// FailedPrecondition when a group has no choice or names a layer the plan
// does not have.
absl::StatusOr<QuantizationPlan> ApplyMixedPrecision(
    const MixedPrecisionSelection& selection, const QuantizationPlan& plan);

nlohmann::json MixedPrecisionToJson(const MixedPrecisionSelection& selection);
// The inverse; InvalidArgument naming the field for anything this tool
// would not have written.
absl::StatusOr<MixedPrecisionSelection> MixedPrecisionFromJson(
    const nlohmann::json& json);

// The text the audit table prints: the budget and what was chosen, then one
// line per group with its chosen setting and each candidate's error and
// predicted KL (the reason for the choice).
std::string FormatMixedPrecision(const MixedPrecisionSelection& selection);

// Whether `measured` is a selection for the same groups, candidates and
// costs as `planned` (what a task checks a shared selection file against).
absl::Status CheckSelectionMatchesPlan(const MixedPrecisionSelection& measured,
                                       const MixedPrecisionSelection& planned);

}  // namespace quant

#endif  // QUANT_CORE_PIPELINE_MIXED_PRECISION_SELECTION_H_

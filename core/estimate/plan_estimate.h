// What a job will be, before it runs: its tasks, tokens, the size of the
// packed checkpoint it writes and how long it takes at given rates. `quantctl
// recipe validate --estimate` computes it on this machine; quantd's dry run
// (`quantctl submit --dry_run`) on its registered workers.
#ifndef QUANT_CORE_ESTIMATE_PLAN_ESTIMATE_H_
#define QUANT_CORE_ESTIMATE_PLAN_ESTIMATE_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "core/estimate/work_model.h"
#include "core/model/checkpoint.h"
#include "core/pipeline/output_size.h"
#include "core/recipe/recipe.h"

namespace quant {

struct PlanEstimate {
  int blocks = 0;
  int tasks = 0;                   // The blocks' and the finalize.
  int64_t calibration_tokens = 0;  // At most (see JobWork).
  int64_t heldout_tokens = 0;
  OutputSize output;
  JobWork work;
  // At the rates given, with block tasks spread over `workers` where the
  // recipe's propagation lets them run side by side; unset without rates.
  std::optional<double> seconds;
  int workers = 0;
};

// Seconds for `work` when its block tasks run on `workers` workers at
// `rates` (sequential propagation runs one block at a time; independent
// ones spread over the workers) and the finalize after them.
double PredictJobSeconds(const JobWork& work, const WorkRates& rates,
                         Propagation propagation, int workers);

// Errors: the recipe does not plan over the checkpoint (as at submit).
absl::StatusOr<PlanEstimate> EstimatePlan(const Checkpoint& checkpoint,
                                          const Recipe& recipe,
                                          const WorkRates& rates, int workers);

// "3.9 GB", "512.0 MB", "12.3 kB" (decimal units, as the seed's example).
std::string HumanBytes(int64_t bytes);
// "2h05m", "3m12s", "45s", "2.5s".
std::string HumanSeconds(double seconds);

}  // namespace quant

#endif  // QUANT_CORE_ESTIMATE_PLAN_ESTIMATE_H_

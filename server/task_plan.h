// A job's task DAG: one block task per decoder layer, then finalize.
// Sequential propagation chains the blocks (block i needs block i-1's
// quantized outputs); independent propagation lets them run in any order.
// Finalize depends on every block.
#ifndef QUANT_SERVER_TASK_PLAN_H_
#define QUANT_SERVER_TASK_PLAN_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/recipe/recipe.h"
#include "server/store/job_store.h"

namespace quant::server {

std::vector<store::TaskSpec> PlanJobTasks(int num_blocks,
                                          Propagation propagation);

// Gives the job its plan unless it has one. Safe to race: CreateJob and the
// scheduler's upkeep (which plans a job whose creation was interrupted) may
// both try; the plan is the same and the loser finds it made. Sets
// *planned when this call made it.
absl::Status EnsureJobPlanned(store::JobStore& store, const std::string& job_id,
                              int num_blocks, Propagation propagation,
                              bool* planned = nullptr);

}  // namespace quant::server

#endif  // QUANT_SERVER_TASK_PLAN_H_

// A job's task DAG: one block task per decoder layer, then finalize.
// Sequential propagation chains the blocks (block i needs block i-1's
// quantized outputs); independent propagation lets them run in any order.
// Finalize depends on every block.
#ifndef QUANT_SERVER_TASK_PLAN_H_
#define QUANT_SERVER_TASK_PLAN_H_

#include <vector>

#include "core/recipe/recipe.h"
#include "server/store/job_store.h"

namespace quant::server {

std::vector<store::TaskSpec> PlanJobTasks(int num_blocks,
                                          Propagation propagation);

}  // namespace quant::server

#endif  // QUANT_SERVER_TASK_PLAN_H_

// PlanJobTasks: block tasks then finalize, with their dependencies.
#include "server/task_plan.h"

namespace quant::server {

std::vector<store::TaskSpec> PlanJobTasks(int num_blocks,
                                          Propagation propagation) {
  std::vector<store::TaskSpec> tasks;
  for (int block = 0; block < num_blocks; ++block) {
    store::TaskSpec task;
    task.index = block;
    task.kind = store::TaskKind::kBlock;
    task.block = block;
    if (propagation == Propagation::kSequential && block > 0) {
      task.depends_on = {block - 1};
    }
    tasks.push_back(task);
  }
  store::TaskSpec finalize;
  finalize.index = num_blocks;
  finalize.kind = store::TaskKind::kFinalize;
  for (int block = 0; block < num_blocks; ++block) {
    finalize.depends_on.push_back(block);
  }
  tasks.push_back(finalize);
  return tasks;
}

absl::Status EnsureJobPlanned(store::JobStore& store, const std::string& job_id,
                              int num_blocks, Propagation propagation,
                              bool* planned) {
  if (planned != nullptr) *planned = false;
  absl::StatusOr<std::vector<store::Task>> tasks = store.ListTasks(job_id);
  if (!tasks.ok()) return tasks.status();
  if (!tasks->empty()) return absl::OkStatus();
  absl::Status made =
      store.PlanTasks(job_id, PlanJobTasks(num_blocks, propagation));
  if (made.ok()) {
    if (planned != nullptr) *planned = true;
    return made;
  }
  if (!absl::IsFailedPrecondition(made)) return made;
  // Planned by the other caller in between.
  tasks = store.ListTasks(job_id);
  if (!tasks.ok()) return tasks.status();
  return tasks->empty() ? made : absl::OkStatus();
}

}  // namespace quant::server

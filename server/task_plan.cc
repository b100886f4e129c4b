// PlanJobTasks and PlanRoundTasks: block or round tasks, then finalize,
// with their dependencies.
#include "server/task_plan.h"

#include <map>
#include <utility>

#include "core/pipeline/finalize_part_tasks.h"
#include "core/pipeline/task_io.h"

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

std::vector<store::TaskSpec> PlanRoundTasks(int num_blocks,
                                            const RoundShardCounts& shards) {
  std::vector<store::TaskSpec> tasks;
  auto add = [&](store::TaskKind kind, int block, int group,
                 store::TaskSplit split, int shard, std::vector<int> deps,
                 std::string layer = "") {
    store::TaskSpec task;
    task.index = static_cast<int>(tasks.size());
    task.kind = kind;
    task.block = block;
    task.group = group;
    task.split = split;
    task.shard = shard;
    task.layer = std::move(layer);
    task.depends_on = std::move(deps);
    tasks.push_back(std::move(task));
    return tasks.back().index;
  };
  const std::pair<store::TaskSplit, int> splits[] = {
      {store::TaskSplit::kCalibration, shards.calibration},
      {store::TaskSplit::kHeldout, shards.heldout}};
  // The previous block's shard outputs by split and shard.
  std::map<std::pair<store::TaskSplit, int>, int> outputs;
  std::vector<int> last_reduces;
  for (int block = 0; block < num_blocks; ++block) {
    // The previous group's reduces (one per layer when split by layer).
    std::vector<int> reduces;
    // The block's held-out statistics, when its last reduce audits them.
    std::vector<int> heldout_statistics;
    for (int group = 0; group < kBlockRoundGroups; ++group) {
      std::vector<int> statistics;
      for (const auto& [split, count] : splits) {
        for (int s = 0; s < count; ++s) {
          std::vector<int> deps;
          if (group > 0) {
            deps = reduces;
          } else if (block > 0) {
            deps.push_back(outputs.at({split, s}));
          }
          const int task = add(store::TaskKind::kShardStats, block, group,
                               split, s, std::move(deps));
          if (shards.heldout_later && split == store::TaskSplit::kHeldout) {
            heldout_statistics.push_back(task);
          } else {
            statistics.push_back(task);
          }
        }
      }
      if (group + 1 == kBlockRoundGroups) {
        statistics.insert(statistics.end(), heldout_statistics.begin(),
                          heldout_statistics.end());
      }
      reduces.clear();
      for (const std::optional<LayerType>& layer :
           RoundGroupReduces(group, shards.layer_reduces)) {
        reduces.push_back(
            add(store::TaskKind::kReduce, block, group, store::TaskSplit::kNone,
                -1, statistics,
                layer.has_value() ? std::string(LayerTypeName(*layer)) : ""));
      }
    }
    // The last group (down_proj) is one reduce, which publishes the block.
    const int reduce = reduces.back();
    last_reduces.push_back(reduce);
    if (block + 1 == num_blocks) break;
    outputs.clear();
    for (const auto& [split, count] : splits) {
      for (int s = 0; s < count; ++s) {
        outputs[{split, s}] =
            add(store::TaskKind::kShardOutput, block, -1, split, s, {reduce});
      }
    }
  }
  add(store::TaskKind::kFinalize, -1, -1, store::TaskSplit::kNone, -1,
      std::move(last_reduces));
  return tasks;
}

std::optional<std::string> RoundFileOf(const store::Task& task) {
  const bool calibration = task.split == store::TaskSplit::kCalibration;
  switch (task.kind) {
    case store::TaskKind::kShardStats:
      return ShardStatisticsFile(task.block, task.group, calibration,
                                 task.shard);
    case store::TaskKind::kReduce: {
      if (task.group + 1 >= kBlockRoundGroups) return std::nullopt;
      std::optional<LayerType> layer;
      if (!task.layer.empty()) {
        layer = LayerTypeFromName(task.layer);
        // A plan names only known layers (PlanRoundTasks).
        if (!layer.has_value()) return std::nullopt;
      }
      return RoundDeltaFile(task.block, task.group, layer);
    }
    case store::TaskKind::kShardOutput:
      return ShardOutputFile(task.block, calibration, task.shard);
    case store::TaskKind::kFinalizePack:
      return StagedFinalizeRecordFile();
    case store::TaskKind::kGatePart:
      return GatePartFile(task.shard);
    default:
      return std::nullopt;
  }
}

void SplitFinalize(int gate_parts, std::vector<store::TaskSpec>* tasks) {
  if (gate_parts < 1 || tasks->empty() ||
      tasks->back().kind != store::TaskKind::kFinalize) {
    return;
  }
  store::TaskSpec finalize = std::move(tasks->back());
  tasks->pop_back();
  store::TaskSpec pack;
  pack.index = static_cast<int>(tasks->size());
  pack.kind = store::TaskKind::kFinalizePack;
  pack.depends_on = std::move(finalize.depends_on);
  tasks->push_back(std::move(pack));
  const int pack_index = tasks->back().index;
  finalize.depends_on.clear();
  for (int part = 0; part < gate_parts; ++part) {
    store::TaskSpec task;
    task.index = static_cast<int>(tasks->size());
    task.kind = store::TaskKind::kGatePart;
    task.shard = part;
    task.depends_on = {pack_index};
    finalize.depends_on.push_back(task.index);
    tasks->push_back(std::move(task));
  }
  finalize.index = static_cast<int>(tasks->size());
  tasks->push_back(std::move(finalize));
}

std::vector<store::TaskSpec> PlanJobTasks(const JobSpec& spec) {
  std::vector<store::TaskSpec> tasks =
      spec.rounds.has_value()
          ? PlanRoundTasks(spec.num_blocks, *spec.rounds)
          : PlanJobTasks(spec.num_blocks, spec.recipe.propagation);
  SplitFinalize(spec.gate_parts, &tasks);
  return tasks;
}

absl::Status EnsureJobPlanned(store::JobStore& store, const std::string& job_id,
                              const JobSpec& spec, bool* planned) {
  if (planned != nullptr) *planned = false;
  absl::StatusOr<std::vector<store::Task>> tasks = store.ListTasks(job_id);
  if (!tasks.ok()) return tasks.status();
  if (!tasks->empty()) return absl::OkStatus();
  absl::Status made = store.PlanTasks(job_id, PlanJobTasks(spec));
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

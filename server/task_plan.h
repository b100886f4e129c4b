// A job's task DAG. Block tasks: one per decoder layer, then finalize;
// sequential propagation chains the blocks (block i needs block i-1's
// quantized outputs), independent propagation lets them run in any order.
// Rounds (a sequential dense job, docs/DATA_PARALLEL.md): each block as
// rounds of small tasks, so many workers share one block. Finalize
// depends on every block.
#ifndef QUANT_SERVER_TASK_PLAN_H_
#define QUANT_SERVER_TASK_PLAN_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/pipeline/round_job_tasks.h"
#include "core/recipe/recipe.h"
#include "server/job_spec.h"
#include "server/store/job_store.h"

namespace quant::server {

std::vector<store::TaskSpec> PlanJobTasks(int num_blocks,
                                          Propagation propagation);

// A sequential job's blocks as rounds. For block b and each layer group g
// in order: a shard_stats task per shard of each split (for g = 0 it needs
// only the same shard's output of block b-1; for g > 0 the reduces of
// g-1), then reduce(b, g), which needs all of them: one per layer of a
// group of several when shards.layer_reduces (RoundGroupReduces), side by
// side. With shards.heldout_later a reduce needs only its round's
// calibration shards, and the block's last reduce, which audits every
// layer on the held-out split, also every round's held-out shards. Then
// shard_output(b, split, s) per shard, after the last reduce
// (none for the last block: nothing reads its leaving states). Finalize
// needs every block's last reduce.
std::vector<store::TaskSpec> PlanRoundTasks(int num_blocks,
                                            const RoundShardCounts& shards);

// With gate_parts > 0, the plan's last task (its finalize) becomes a
// finalize_pack task with the finalize's dependencies, gate_parts
// gate_part tasks (numbered 0.. in `shard`) that need the pack, and the
// finalize, which needs every part. Otherwise the plan is unchanged.
void SplitFinalize(int gate_parts, std::vector<store::TaskSpec>* tasks);

// The plan of `spec`: rounds when spec.rounds is set, block tasks
// otherwise; the finalize split when spec.gate_parts is set.
std::vector<store::TaskSpec> PlanJobTasks(const JobSpec& spec);

// The work file a task publishes and others read, checked against the
// sha256 recorded when it completed (task_io.h's and
// finalize_part_tasks.h's names, relative to the job's work directory): a
// shard's statistics, a reduce's delta (not the last reduce's: that one
// publishes the block, as a block task does), a shard's leaving states,
// the staged finalize's record, a gate part's scores. nullopt for other
// tasks.
std::optional<std::string> RoundFileOf(const store::Task& task);

// Gives the job its plan unless it has one. Safe to race: CreateJob and the
// scheduler's upkeep (which plans a job whose creation was interrupted) may
// both try; the plan is the same and the loser finds it made. Sets
// *planned when this call made it.
absl::Status EnsureJobPlanned(store::JobStore& store, const std::string& job_id,
                              const JobSpec& spec, bool* planned = nullptr);

}  // namespace quant::server

#endif  // QUANT_SERVER_TASK_PLAN_H_

// The task DAG a coordinator plans for one sequential dense job, with each
// task's work (flops, bytes read and written), and a deterministic
// discrete-event simulation of quantd's scheduler running it on W identical
// workers (docs/DATA_PARALLEL.md). Two plans: the rounds (shard_stats,
// reduce and shard_output tasks per block) and the old one (one block task
// per block, chained). The flop counts are core/estimate/work_model.h's
// (BlockForwardFlopsPerToken, HessianFlops, GptqFlops, and EstimateJobWork's
// finalize). Both plans count the audit from the Hessians, as the audit
// runs (OutputErrorEvaluator) with more tokens than K; EstimateJobWork's
// block counts it as three products over every token, which would make the
// old plan look ~2x slower than it is.
//
// The scheduler: a free worker leases the runnable task that comes first in
// plan order (block-major), one task per worker at a time. A task runs its
// phases in order: a fixed overhead (opening the job's inputs), its reads,
// its compute (each flop kind at its own rate), its writes. A transfer runs
// at min(network per worker, storage / transfers in flight): storage
// throughput is shared fairly by every read and write under way.
#ifndef QUANT_BENCH_ROUNDS_SIMULATION_ROUND_SCHEDULE_H_
#define QUANT_BENCH_ROUNDS_SIMULATION_ROUND_SCHEDULE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/estimate/work_model.h"
#include "core/model/model_config.h"
#include "core/recipe/recipe.h"

namespace quant {
namespace rounds_sim {

// The model and the job's tokens: what the plan depends on.
struct JobShape {
  int blocks = 0;
  int64_t hidden = 0;
  int64_t intermediate = 0;
  int heads = 0;
  int kv_heads = 0;
  int64_t vocab = 128256;  // The finalize's lm_head.
  int calibration_sequences = 128;
  int heldout_sequences = 16;
  int seq_len = 2048;
  int group_size = 128;  // Of the scales and zeros (0 = one per row).
  int bits = 4;          // Of the packed block.
  bool damp_auto = false;
  // Workers keep each shard's states between rounds (ShardStashCache): a
  // round's shard task runs only its own group's ops (the output round
  // gate/up again, then down), assuming the shard's previous round ran on
  // the same worker, as quantd's lease prefers. false: every shard task
  // runs the block from its entering states up to its group.
  bool shard_stash = true;
  // Groups of several layers (q, k, v; gate, up) are reduced one task per
  // layer, side by side (a GPTQ job's plan, RoundGroupReduces); false: one
  // reduce per group, as before.
  bool layer_reduces = true;
  // A reduce waits for its round's calibration shards only, and the
  // block's last reduce for every round's held-out shards too (a GPTQ
  // job's plan, RoundShardCounts::heldout_later; the held-out audit's
  // work stays counted in each reduce, a small part of it); false: each
  // reduce waits for both splits, as before.
  bool heldout_later = true;
  // Bytes per weight of the checkpoint, read by every task that runs the
  // block (each loads the block's input weights); 0 leaves them out.
  double checkpoint_bytes_per_weight = 2.0;
  // The finalize's evaluation in seconds; < 0: work_model's gate flops at
  // the forward rate.
  double finalize_seconds = -1.0;
  // The finalize's evaluation as this many gate parts side by side
  // (quantd's --gate_parts): a finalize_pack task stages the packed
  // checkpoint, each part reads it and scores an equal share of the
  // evaluation, and the finalize completes. 0: one finalize task.
  int gate_parts = 0;
};

// InvalidArgument for a shape the plan cannot take.
absl::Status CheckJobShape(const JobShape& shape);
// A Llama-architecture config and a GPTQ recipe of `shape`.
ModelConfig ShapeConfig(const JobShape& shape);
Recipe ShapeRecipe(const JobShape& shape);

enum class TaskKind {
  kShardStats,
  kReduce,
  kShardOutput,
  kBlock,
  kFinalize,
  kFinalizePack,
  kGatePart,
};
const char* TaskKindName(TaskKind kind);

struct PlannedTask {
  TaskKind kind = TaskKind::kBlock;
  int block = -1;  // -1: the finalize (and its pack and parts).
  int group = -1;  // shard_stats and reduce: 0..3.
  int layer = -1;  // A reduce split by layer: the layer's index in its group.
  bool calibration = true;
  int shard = -1;
  int64_t tokens = 0;          // Shard tasks: the shard's real tokens.
  std::vector<int> deps;       // Indices of earlier tasks in the plan.
  TaskWork work;               // Flops by kind.
  double fixed_seconds = 0.0;  // Compute given as seconds (finalize_seconds).
  double bytes_read = 0.0;
  double bytes_written = 0.0;

  // "shard_stats(3, 1, cal, 5)", "reduce(3, 1)", "finalize",
  // "gate_part(2)".
  std::string Name() const;
};

struct Plan {
  bool rounds = true;
  int calibration_shards = 0;
  int heldout_shards = 0;
  std::vector<PlannedTask> tasks;  // In plan order.
};

// The rounds: per block b, for g = 0..3 shard_stats(b, g, cal, *),
// shard_stats(b, g, heldout, *), reduce(b, g); then shard_output(b, cal, *),
// shard_output(b, heldout, *) (none for the last block); then finalize
// (with gate_parts: finalize_pack, gate_part(0..), finalize).
absl::StatusOr<Plan> PlanRounds(const JobShape& shape);
// The old plan: block(b) after block(b - 1), then finalize.
absl::StatusOr<Plan> PlanBlockTasks(const JobShape& shape);

struct Resources {
  WorkRates rates;                        // Per worker, flop/s.
  double network_bytes_per_second = 0.0;  // Per worker link; > 0.
  double storage_bytes_per_second = 0.0;  // Shared; 0 = unlimited.
  double task_overhead_seconds = 0.0;
};
absl::Status CheckResources(const Resources& resources);

// A task's compute seconds at the rates.
double ComputeSeconds(const PlannedTask& task, const Resources& resources);
// A task's time running alone: overhead, reads, compute and writes, its
// transfers at min(network, storage).
double TaskSecondsAlone(const PlannedTask& task, const Resources& resources);
// The sum of TaskSecondsAlone over the plan (one worker's wall time).
double SumOfTaskSeconds(const Plan& plan, const Resources& resources);
// The longest dependency chain of TaskSecondsAlone (the wall time of
// unlimited workers when storage does not bind).
double CriticalPathSeconds(const Plan& plan, const Resources& resources);

struct SimulationResult {
  int workers = 0;
  double wall_seconds = 0.0;
  double compute_seconds = 0.0;   // Summed over tasks.
  double overhead_seconds = 0.0;  // Summed over tasks.
  double bytes_read = 0.0;
  double bytes_written = 0.0;
  // Used capacity over the run: compute of all workers, all workers' links,
  // storage (0 when unlimited).
  double compute_utilization = 0.0;
  double network_utilization = 0.0;
  double storage_utilization = 0.0;
  std::vector<double> start;   // Per task.
  std::vector<double> finish;  // Per task.

  // "compute", "network" or "storage": the highest utilization.
  const char* Busiest() const;
};

// Runs `plan` on `workers` workers. InvalidArgument for bad resources or
// workers < 1; Internal for a plan that cannot finish (a cycle).
absl::StatusOr<SimulationResult> Simulate(const Plan& plan,
                                          const Resources& resources,
                                          int workers);

}  // namespace rounds_sim
}  // namespace quant

#endif  // QUANT_BENCH_ROUNDS_SIMULATION_ROUND_SCHEDULE_H_

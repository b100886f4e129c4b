// The kinds of task a job is split into, as the `kind` label spells them.
// Shared by quantd's and the worker's task metrics.
#ifndef QUANT_METRICS_TASK_KIND_H_
#define QUANT_METRICS_TASK_KIND_H_

namespace quant::metrics {

// kShardStats, kReduce, kShardOutput: a block run as rounds
// (docs/DATA_PARALLEL.md). kFinalizePack, kGatePart: a finalize whose
// held-out evaluation runs in parts.
enum class TaskKind {
  kBlock,
  kFinalize,
  kShardStats,
  kReduce,
  kShardOutput,
  kFinalizePack,
  kGatePart,
};
inline constexpr TaskKind kAllTaskKinds[] = {
    TaskKind::kBlock,   TaskKind::kFinalize,    TaskKind::kShardStats,
    TaskKind::kReduce,  TaskKind::kShardOutput, TaskKind::kFinalizePack,
    TaskKind::kGatePart};

// "block", "finalize", "shard_stats", "reduce", "shard_output",
// "finalize_pack" or "gate_part".
const char* TaskKindLabel(TaskKind kind);

}  // namespace quant::metrics

#endif  // QUANT_METRICS_TASK_KIND_H_

// The kinds of task a job is split into, as the `kind` label spells them.
// Shared by quantd's and the worker's task metrics.
#ifndef QUANT_METRICS_TASK_KIND_H_
#define QUANT_METRICS_TASK_KIND_H_

namespace quant::metrics {

enum class TaskKind { kBlock, kFinalize };

// "block" or "finalize".
const char* TaskKindLabel(TaskKind kind);

}  // namespace quant::metrics

#endif  // QUANT_METRICS_TASK_KIND_H_

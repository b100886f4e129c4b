// TaskKindLabel: the label value of each task kind.
#include "metrics/task_kind.h"

namespace quant::metrics {

const char* TaskKindLabel(TaskKind kind) {
  switch (kind) {
    case TaskKind::kBlock:
      return "block";
    case TaskKind::kFinalize:
      return "finalize";
    case TaskKind::kShardStats:
      return "shard_stats";
    case TaskKind::kReduce:
      return "reduce";
    case TaskKind::kShardOutput:
      return "shard_output";
    case TaskKind::kFinalizePack:
      return "finalize_pack";
    case TaskKind::kGatePart:
      return "gate_part";
  }
  return "unknown";
}

}  // namespace quant::metrics

// Names of the store's enums.
#include "server/store/job_store.h"

#include "absl/strings/str_cat.h"

namespace quant::store {
namespace {

template <typename Enum, size_t N>
absl::StatusOr<Enum> ParseName(absl::string_view name,
                               const char* const (&names)[N],
                               absl::string_view what) {
  for (size_t i = 0; i < N; ++i) {
    if (name == names[i]) return static_cast<Enum>(i);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown ", what, " \"", name, "\""));
}

constexpr const char* kJobStates[] = {"QUEUED", "RUNNING", "SUCCEEDED",
                                      "FAILED", "CANCELLED"};
constexpr const char* kTaskStates[] = {"PENDING", "LEASED", "DONE", "FAILED"};
constexpr const char* kTaskKinds[] = {
    "block",        "finalize",      "shard_stats", "reduce",
    "shard_output", "finalize_pack", "gate_part"};
constexpr const char* kTaskSplits[] = {"", "calibration", "heldout"};
constexpr const char* kVerdicts[] = {"", "PASS", "FAIL"};

}  // namespace

const char* JobStateName(JobState state) {
  return kJobStates[static_cast<int>(state)];
}
const char* TaskStateName(TaskState state) {
  return kTaskStates[static_cast<int>(state)];
}
const char* TaskKindName(TaskKind kind) {
  return kTaskKinds[static_cast<int>(kind)];
}
bool IsRoundTaskKind(TaskKind kind) {
  return kind == TaskKind::kShardStats || kind == TaskKind::kReduce ||
         kind == TaskKind::kShardOutput;
}
const char* TaskSplitName(TaskSplit split) {
  return kTaskSplits[static_cast<int>(split)];
}
const char* VerdictName(Verdict verdict) {
  return kVerdicts[static_cast<int>(verdict)];
}

absl::StatusOr<JobState> ParseJobState(absl::string_view name) {
  return ParseName<JobState>(name, kJobStates, "job state");
}
absl::StatusOr<TaskState> ParseTaskState(absl::string_view name) {
  return ParseName<TaskState>(name, kTaskStates, "task state");
}
absl::StatusOr<TaskKind> ParseTaskKind(absl::string_view name) {
  return ParseName<TaskKind>(name, kTaskKinds, "task kind");
}
absl::StatusOr<TaskSplit> ParseTaskSplit(absl::string_view name) {
  return ParseName<TaskSplit>(name, kTaskSplits, "task split");
}
absl::StatusOr<Verdict> ParseVerdict(absl::string_view name) {
  return ParseName<Verdict>(name, kVerdicts, "verdict");
}

std::string DescribeTaskWork(TaskKind kind, int block, int group,
                             TaskSplit split, int shard,
                             const std::string& layer) {
  const char* split_name =
      split == TaskSplit::kHeldout ? "held-out" : "calibration";
  switch (kind) {
    case TaskKind::kBlock:
      return absl::StrCat("block ", block);
    case TaskKind::kFinalize:
      return "finalize";
    case TaskKind::kShardStats:
      return absl::StrCat("block ", block, " group ", group, ": ", split_name,
                          " shard ", shard);
    case TaskKind::kReduce:
      return absl::StrCat("block ", block, " group ", group, ": reduce",
                          layer.empty() ? "" : " ", layer);
    case TaskKind::kShardOutput:
      return absl::StrCat("block ", block, ": ", split_name, " shard ", shard,
                          " output");
    case TaskKind::kFinalizePack:
      return "finalize: pack";
    case TaskKind::kGatePart:
      return absl::StrCat("finalize: gate part ", shard);
  }
  return "unknown task";
}

bool IsTerminal(JobState state) {
  return state == JobState::kSucceeded || state == JobState::kFailed ||
         state == JobState::kCancelled;
}

}  // namespace quant::store

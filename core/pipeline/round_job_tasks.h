// A sequential dense block's rounds (block_task.h, docs/DATA_PARALLEL.md) as
// tasks a worker runs from files, beside the block task (job_tasks.h): for
// each layer group, one shard-statistics task per shard of each split and
// a reduce; then one shard-output task per shard. Each reads the job's
// inputs and the round files of the tasks before it (task_io.h's layout in
// the work directory), writes under its attempt area and publishes by
// rename, so a task run twice is harmless: every run writes the same bytes.
//
// The bytes equal the block task's: the statistics are summed per shard
// there too, and the shards are added in shard order whatever order or
// place they ran in. The last reduce publishes the block's tensors and
// layers.json as a block task does (without the leaving states, which the
// shard-output tasks publish per shard), so the finalize reads a rounds
// block unchanged.
#ifndef QUANT_CORE_PIPELINE_ROUND_JOB_TASKS_H_
#define QUANT_CORE_PIPELINE_ROUND_JOB_TASKS_H_

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/model/model_config.h"
#include "core/pipeline/job_tasks.h"
#include "core/recipe/recipe.h"

namespace quant {

// The shards a job's rounds are planned for, from the recipe alone (a
// coordinator plans before the calibration set is read): each split's
// requested sequences in shards of kShardSequences. A split that comes out
// shorter (a small set) leaves its last shards empty: their tasks publish
// nothing.
struct RoundShardCounts {
  int calibration = 0;
  int heldout = 0;
  // Groups of several layers (q, k, v; gate, up) are reduced a layer at a
  // time, side by side (RoundReducesByLayer: no AWQ layer). A plan made
  // before this existed reduces each group whole.
  bool layer_reduces = false;
  // A round's reduce waits for its calibration shards only, and the
  // block's last reduce audits every layer on the held-out shards of every
  // round (RoundReduceOptions::heldout_later): no AWQ layer (its audit
  // needs its group's input scale) and a held-out split. A plan made
  // before this existed has each reduce wait for both splits.
  bool heldout_later = false;
};
RoundShardCounts PlanRoundShardCounts(const Recipe& recipe);

// Whether a job's blocks run as rounds: sequential propagation over a
// model without mixture-of-experts blocks, and no mixed precision (whose
// selection the first task measures). Other jobs run block tasks.
bool JobRunsAsRounds(const ModelConfig& config, const Recipe& recipe);

// Group `group`'s statistics on shard `shard` of one split, published as
// ShardStatisticsFile. Reads the states entering the block for that shard
// (block 0: the windows' embeddings; later blocks: ShardOutputFile of the
// block before) and the deltas of the groups before it. Returns the
// published file's name relative to the work directory, or "" when the
// shard is empty or the group quantizes no layer. FailedPrecondition when
// a round file it needs is not published yet.
absl::StatusOr<std::string> RunShardStatisticsJobTask(
    const JobTaskContext& context, int block, int group, bool calibration,
    int shard, const std::string& attempt_dir, const TaskControl& control);

// Adds every shard's statistics of group `group` (calibration shards, then
// held-out ones, each in shard order; only the calibration shards when the
// context's round_heldout_later), quantizes the group (or, with
// `layer`, that layer of it: a job whose context says its reduces are split
// by layer, RoundGroupReduces) and publishes RoundDeltaFile(block, group,
// layer); reports the layers it quantized through control.on_layer.
// InvalidArgument when `layer` is not one of the group's reduces in this
// job. The last group's reduce (down_proj's, always whole) also publishes
// the block's output (its tensors and layers.json, which records every
// delta's sha256) and returns layers.json's name; the others return the
// delta's. With round_heldout_later, the last reduce first reads the
// held-out shards of every group's round and completes the audits
// (AuditBlockRoundsHeldout), so layers.json is what it is without.
absl::StatusOr<std::string> RunRoundReduceJobTask(
    const JobTaskContext& context, int block, int group,
    std::optional<LayerType> layer, const std::string& attempt_dir,
    const TaskControl& control);

// The states leaving the quantized block for shard `shard`, published as
// ShardOutputFile; "" for an empty shard. After the last reduce: the
// deltas are checked against the block's layers.json.
absl::StatusOr<std::string> RunShardOutputJobTask(
    const JobTaskContext& context, int block, bool calibration, int shard,
    const std::string& attempt_dir, const TaskControl& control);

// Checks work file `name` (relative to context.work_dir) against the
// sha256 the coordinator recorded for it in context.round_file_sha256
// (none recorded: trusted). A recorded file that is gone counts as
// changed: its producer must run again (a DataLoss status that
// ChangedRoundFile reads). Returns the file's sha256 when it was checked,
// "" when trusted.
absl::StatusOr<std::string> VerifyRoundFile(const JobTaskContext& context,
                                            const std::string& name);

// The round file (by its name relative to the work directory) that a task
// found changed or gone since its producer completed (a payload on a
// DataLoss status), so the coordinator can run that producer again;
// nullopt for any other status.
std::optional<std::string> ChangedRoundFile(const absl::Status& status);

}  // namespace quant

#endif  // QUANT_CORE_PIPELINE_ROUND_JOB_TASKS_H_

// The block and finalize tasks as a service worker runs them: every input
// from files (checkpoint directory, calibration file, recipe, the job's work
// directory of earlier block outputs), every output written under an
// attempt-specific name first and published by rename, so a task run twice
// (a lease that expired while its worker still ran) is harmless: both runs
// write the same bytes and a reader sees one whole output.
//
// `quantctl quantize --local` runs these same tasks in one process
// (local_pipeline.h: an in-process executor of the task plan), which is why
// the service's packed tensors equal the local run's.
#ifndef QUANT_CORE_PIPELINE_JOB_TASKS_H_
#define QUANT_CORE_PIPELINE_JOB_TASKS_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "core/base/file_system.h"
#include "core/pipeline/block_task.h"
#include "core/pipeline/finalize_task.h"
#include "core/recipe/recipe.h"
#include "nlohmann/json.hpp"

namespace quant {

class FileDigests;      // core/base/file_digests.h
class JobInputsCache;   // job_inputs_cache.h
class RoundBlockCache;  // round_block_cache.h
class ShardStashCache;  // shard_stash_cache.h

// The default bound on the hidden states a block task holds in memory.
inline constexpr int64_t kDefaultMaxActivationBytes = int64_t{1} << 30;

// One source of a mixed calibration set (recipe calibration.sources) as a
// file this process reads.
struct CalibrationSourceFile {
  std::string path;
  std::string sha256;  // The file must have it; empty: not checked.
  double weight = 1.0;
};

// What every task of a job reads.
struct JobTaskContext {
  // The service job the tasks belong to; empty for a local run. The
  // finalize records it in the manifest and refuses a published checkpoint
  // that names another job.
  std::string job_id;
  std::string checkpoint_dir;
  std::string tokenizer_dir;  // Empty: checkpoint_dir.
  std::string calibration_path;
  // The recipe's calibration.sources resolved to files (calibration_path
  // is then empty): the split is their weighted mix.
  std::vector<CalibrationSourceFile> calibration_sources;
  Recipe recipe;
  // The files the recipe names by path, pinned by content when the job was
  // submitted: the chat template the calibration set is rendered with, and
  // gates.tasks. A task refuses (DataLoss) one that has changed since, so
  // every task of a job reads the same bytes. Empty: not checked.
  std::string chat_template_sha256;
  std::string tasks_sha256;
  // The previous release's directory (recipe gates.compare_to resolved by
  // whoever planned the job); the finalize evaluates it.
  std::string previous_dir;
  // Hash the previous release's files against its manifest.json when the
  // job's inputs are opened, and not again in the finalize: a local run,
  // which opens them once for all its tasks and should fail before hours
  // of work. Off in quantd's tasks, whose finalize hashes it.
  bool verify_previous_at_open = false;
  // Block outputs (task_io.h layout); shared by the job's tasks.
  std::string work_dir;
  // Block -> sha256 of its published layers.json as the coordinator
  // recorded it when the block's task completed. A block listed here is
  // checked against it before its output is read (VerifyBlockFile); an
  // unlisted one (a local run, an older coordinator) against its own
  // layers.json only.
  std::map<int, std::string> block_output_sha256;
  // A round file (task_io.h: shard statistics, a reduce's delta, a shard's
  // leaving states; by its name relative to work_dir) -> the sha256 the
  // coordinator recorded when the task that published it completed. A
  // listed file is checked before it is read (round_job_tasks.h); an
  // unlisted one is trusted.
  std::map<std::string, std::string> round_file_sha256;
  // A job run as rounds whose groups of several layers are reduced a layer
  // at a time (RoundGroupReduces; the coordinator's plan says so): where
  // the round tasks find each group's deltas.
  bool round_layer_reduces = false;
  // A job run as rounds whose reduces wait for the calibration shards only
  // (RoundShardCounts::heldout_later; the coordinator's plan says so): its
  // last reduce of a block audits the held-out split for every group.
  bool round_heldout_later = false;
  // Where round tasks keep the job's opened inputs for the process's next
  // task of the same job (not owned); null: each task opens them.
  JobInputsCache* inputs_cache = nullptr;
  // Where shard tasks keep what they computed of their shard for its next
  // round on this process (not owned); null: each round task computes its
  // block from the shard's entering states. The same bytes either way.
  ShardStashCache* shard_stashes = nullptr;
  // The block its round tasks last loaded, weights and rebuilt state, for
  // the next round task of that block on this process (not owned); null:
  // each round task loads the block and applies every delta.
  RoundBlockCache* round_blocks = nullptr;
  // The sha256 of round and block files this process checked, remembered
  // by file identity (not owned); null: each check reads its file.
  FileDigests* file_digests = nullptr;
  // Where the tasks' outputs are written (not owned, never null); tests
  // inject storage faults here.
  FileSystem* file_system = FileSystem::Default();
  // The hidden states a block task holds in memory (the calibration and
  // held-out states entering its block). Larger ones are spilled to files
  // in the task's attempt area and read a chunk at a time; the results are
  // the same bytes either way.
  int64_t max_activation_bytes = kDefaultMaxActivationBytes;
  // Threads a block task runs on (BlockTaskInput::threads); the published
  // bytes do not depend on it.
  int threads = 1;
  // Held-out windows the finalize's gates evaluate at once
  // (FinalizeInput::eval_batch_windows).
  int eval_batch_windows = 8;
};

// How a running task reports and learns it should stop.
struct TaskControl {
  std::function<void(const std::string&)> on_stage;
  std::function<void(const LayerResult&)> on_layer;
  // A layer quantized by an earlier task whose audit this task completed
  // (the held-out part a block's last reduce measures, round_job_tasks.h):
  // reported again, its quantization's work not counted again.
  std::function<void(const LayerResult&)> on_audited;
  // Checked between layer groups; set: the task returns Cancelled.
  const std::atomic<bool>* cancelled = nullptr;
  // Whether a block task reports its two steps ("computing the hidden
  // states entering block N", "quantizing block N"); off where the caller
  // announces each block itself (the local executor's progress lines).
  bool announce_block_steps = true;
};

// Block `block`: reads the hidden states entering it (sequential
// propagation: block-1's published output; independent: the float model's,
// starting from the latest published output before it), quantizes it,
// writes its output under `attempt_dir` and publishes it into the work
// directory. FailedPrecondition when the previous block's output is missing.
absl::Status RunBlockJobTask(const JobTaskContext& context, int block,
                             const std::string& attempt_dir,
                             const TaskControl& control);

struct FinalizeJobResult {
  bool passed = false;        // The gate verdict.
  nlohmann::json audit;       // audit.json
  nlohmann::json manifest;    // manifest.json
  bool already_done = false;  // An earlier attempt had published it.
};

// Assembles, evaluates and publishes the packed checkpoint at
// `artifact_dir` from every block's published output. When `artifact_dir`
// already holds a finished checkpoint (an earlier attempt published it and
// died before reporting), its audit is returned instead.
absl::StatusOr<FinalizeJobResult> RunFinalizeJobTask(
    const JobTaskContext& context, const std::string& artifact_dir,
    int64_t max_shard_bytes, const TaskControl& control);

// RunFinalizeJobTask as separate tasks, so that the gates' held-out
// evaluation runs in parts on several workers (docs/DATA_PARALLEL.md,
// step 8; finalize_task.h's StageFinalize, ScoreStagedEvaluationPart and
// CompleteFinalize). The three give RunFinalizeJobTask's files byte for
// byte.
//
// The packed checkpoint from every block's published output, staged in
// `staged_dir` (which must not exist).
absl::Status StageFinalizeJobTask(const JobTaskContext& context,
                                  const std::string& staged_dir,
                                  int64_t max_shard_bytes,
                                  const TaskControl& control);
// The number of batches of the job's held-out evaluation: its parts cut
// [0, this) into ranges.
absl::StatusOr<int64_t> FinalizeJobEvaluationBatches(
    const JobTaskContext& context, const TaskControl& control);
// Batches [first_batch, first_batch + batch_count) of the evaluation of the
// staged checkpoint, written to `part_path` (WriteEvaluationPart).
absl::Status ScoreFinalizeJobPart(const JobTaskContext& context,
                                  const std::string& staged_dir,
                                  int64_t first_batch, int64_t batch_count,
                                  const std::string& part_path,
                                  const TaskControl& control);
// The finalize on the staged checkpoint and the parts at `part_paths`
// (together every batch once), published at `artifact_dir`.
absl::StatusOr<FinalizeJobResult> CompleteFinalizeJobTask(
    const JobTaskContext& context, const std::string& staged_dir,
    const std::vector<std::string>& part_paths, const std::string& artifact_dir,
    const TaskControl& control);

}  // namespace quant

#endif  // QUANT_CORE_PIPELINE_JOB_TASKS_H_

// The finalize task: assembles the packed checkpoint from the block tasks'
// tensors, evaluates the release gates on it as read back from disk, and
// writes audit.json and manifest.json. Everything is written into a
// temporary directory beside the destination and renamed into place at the
// end, so the destination either holds a whole checkpoint or does not exist:
// on any failure the temporary directory is removed.
//
// Output directory:
//   config.json              the source's, with quantization_config
//   quantize_config.json     (gptq format) AutoGPTQ's copy of the settings
//   model.safetensors        or model-0000i-of-0000n.safetensors + index
//   tokenizer files          copied as they are
//   audit.json               see audit_report.h
//   manifest.json            recipe, tool version, source fingerprint,
//                            calibration hash and split, sha256 of every
//                            other file, the task file's hash when gates
//                            score tasks, and (a service job) the job's id
//                            and recipe hash
#ifndef QUANT_CORE_PIPELINE_FINALIZE_TASK_H_
#define QUANT_CORE_PIPELINE_FINALIZE_TASK_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/base/file_system.h"
#include "core/base/thread_pool.h"
#include "core/calib/calibration_split.h"
#include "core/eval/evaluation_parts.h"
#include "core/eval/streamed_evaluation.h"
#include "core/eval/task_file.h"
#include "core/model/checkpoint.h"
#include "core/pack/packed_tensor.h"
#include "core/pipeline/block_task.h"
#include "core/pipeline/gates.h"
#include "core/pipeline/model_files_writer.h"
#include "core/recipe/recipe.h"
#include "core/text/tokenizer.h"
#include "nlohmann/json.hpp"

namespace quant {

// The tool's name and version as recorded in outputs ("quant 0.1.0").
std::string ToolVersion();

// Tokenizer and generation files copied next to the weights when present.
const std::vector<std::string>& TokenizerFileNames();

struct FinalizeInput {
  // The unquantized checkpoint: the gates' reference, read one block at a
  // time like the packed checkpoint they evaluate.
  const Checkpoint* source = nullptr;
  const Recipe* recipe = nullptr;
  const CalibrationSplit* split = nullptr;
  std::string tokenizer_dir;
  std::string out_dir;  // Must not exist yet.
  // The service job this checkpoint is published for; empty for a local
  // run. Recorded in the manifest ("job": id and RecipeSha256) so that the
  // coordinator can refuse a checkpoint that belongs to another job.
  std::string job_id;
  // The previous release's packed checkpoint (recipe gates.compare_to
  // resolved); evaluated on the same held-out windows. Required when
  // compare_to is set, ignored when not.
  std::string previous_dir;
  // Its files were already hashed against its manifest.json in this run
  // (JobTaskContext::verify_previous_at_open); only its shape is checked.
  bool previous_verified = false;
  // recipe gates.tasks loaded (LoadGateTaskFile) and the tokenizer that
  // encodes it; both required when gates.tasks is set, ignored when not.
  const TaskFile* tasks = nullptr;
  const Tokenizer* tokenizer = nullptr;
  // Per block in order: its tensors and layer results.
  std::vector<std::vector<PackedTensor>> block_tensors;
  std::vector<LayerResult> layers;
  // The job's mixed-precision selection (MixedPrecisionToJson), written
  // into audit.json as "mixed_precision"; null when the recipe has none.
  nlohmann::json mixed_precision;
  int64_t max_shard_bytes = kDefaultMaxShardBytes;
  int eval_batch_windows = 8;
  // Bound on the hidden states the gates' evaluation holds at once.
  int64_t eval_max_hidden_bytes = StreamedEvaluationOptions().max_hidden_bytes;
  // Threads the gates' evaluation runs on (>= 1); the verdict and metrics
  // do not depend on it.
  int threads = 1;
  // Every write (files, directories, the final rename) goes through it; not
  // owned. Tests inject storage faults here.
  FileSystem* file_system = FileSystem::Default();
};

struct FinalizeOutput {
  GateReport gates;
  nlohmann::json audit;
  nlohmann::json manifest;
};

// Progress messages ("writing tensors", "evaluating gates", ...).
using StageProgress = std::function<void(const std::string&)>;

absl::StatusOr<FinalizeOutput> RunFinalizeTask(
    FinalizeInput input, const StageProgress& progress = nullptr);

// The same finalize in three steps, so that the gates' held-out evaluation
// can run in parts on several workers (docs/DATA_PARALLEL.md, step 8).
// Given the same input, StageFinalize, every part scored and
// CompleteFinalize write RunFinalizeTask's files byte for byte.
//
// StageFinalize writes the packed checkpoint's files (tensors, config.json,
// the format's config, the tokenizer's files) into `staged_dir`, which
// must not exist, and then the record of what it wrote beside it
// (`staged_dir` + ".staged.json"): a staged directory without its record
// is unfinished. On failure nothing is left. input.out_dir is not used.
absl::Status StageFinalize(FinalizeInput input, const std::string& staged_dir,
                           const StageProgress& progress = nullptr);

// The number of batches the gates' held-out evaluation has
// (CountEvaluationBatches with input.eval_batch_windows): parts cut
// [0, FinalizeEvaluationBatches) into ranges.
int64_t FinalizeEvaluationBatches(const FinalizeInput& input);

// One part of the held-out evaluation, batches [first_batch, first_batch +
// batch_count), of the staged checkpoint (and the previous release, when
// the recipe compares with one) against input.source. Reads only the
// input's source, recipe, split, previous release, evaluation settings and
// file system.
absl::StatusOr<EvaluationPart> ScoreStagedEvaluationPart(
    const FinalizeInput& input, const std::string& staged_dir,
    int64_t first_batch, int64_t batch_count);

// The rest of the finalize on a staged checkpoint: the held-out metrics
// from `parts` (MergeEvaluationParts: every batch once, in any order), the
// task gate, the runtime checks, audit.json, the report and manifest.json,
// then `staged_dir` renamed to input.out_dir and its record removed. On
// failure input.out_dir does not exist and the staged directory stays for
// another try.
absl::StatusOr<FinalizeOutput> CompleteFinalize(
    FinalizeInput input, const std::string& staged_dir,
    std::vector<EvaluationPart> parts, const StageProgress& progress = nullptr);

// sha256 of each file (name, bytes, sha256) and a fingerprint over them:
// sha256 of "<name> <sha256>\n" lines in name order.
// The files are read through `fs`, hashed side by side on `pool` when
// given (the other threads otherwise wait for one thread's hashing).
absl::StatusOr<nlohmann::json> FingerprintFiles(
    const std::string& dir, const std::vector<std::string>& names,
    FileSystem* fs = FileSystem::Default(), ThreadPool* pool = nullptr);

// Checks that `manifest` (manifest.json's parsed content, named by `path` in
// errors) was written for job `job_id` with `recipe`: its "job" section
// holds that id and RecipeSha256(recipe). DataLoss otherwise, naming what
// the manifest says: a checkpoint of another job (an id reused after the
// coordinator's state was lost) must never be reported as this one's.
absl::Status CheckManifestNamesJob(const nlohmann::json& manifest,
                                   const std::string& path,
                                   const std::string& job_id,
                                   const Recipe& recipe);

}  // namespace quant

#endif  // QUANT_CORE_PIPELINE_FINALIZE_TASK_H_

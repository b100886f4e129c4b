// The block and finalize tasks as a service worker runs them: every input
// from files (checkpoint directory, calibration file, recipe, the job's work
// directory of earlier block outputs), every output written under an
// attempt-specific name first and published by rename, so a task run twice
// (a lease that expired while its worker still ran) is harmless: both runs
// write the same bytes and a reader sees one whole output.
//
// `quantctl quantize --local` runs the same pieces in one process
// (local_pipeline.h), which is why the service's packed tensors equal the
// local run's.
#ifndef QUANT_CORE_PIPELINE_JOB_TASKS_H_
#define QUANT_CORE_PIPELINE_JOB_TASKS_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "core/base/file_system.h"
#include "core/calib/calibration_split.h"
#include "core/forward/block_weights.h"
#include "core/forward/llama_model.h"
#include "core/model/checkpoint.h"
#include "core/pipeline/block_task.h"
#include "core/pipeline/finalize_task.h"
#include "core/pipeline/quantization_plan.h"
#include "core/recipe/recipe.h"
#include "core/text/tokenizer.h"
#include "nlohmann/json.hpp"

namespace quant {

// The default bound on the hidden states a block task holds in memory.
inline constexpr int64_t kDefaultMaxActivationBytes = int64_t{1} << 30;

// What every task of a job reads.
struct JobTaskContext {
  // The service job the tasks belong to; empty for a local run. The
  // finalize records it in the manifest and refuses a published checkpoint
  // that names another job.
  std::string job_id;
  std::string checkpoint_dir;
  std::string tokenizer_dir;  // Empty: checkpoint_dir.
  std::string calibration_path;
  Recipe recipe;
  // Block outputs (task_io.h layout); shared by the job's tasks.
  std::string work_dir;
  // Block -> sha256 of its published layers.json as the coordinator
  // recorded it when the block's task completed. A block listed here is
  // checked against it before its output is read (VerifyBlockFile); an
  // unlisted one (a local run, an older coordinator) against its own
  // layers.json only.
  std::map<int, std::string> block_output_sha256;
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
};

// How a running task reports and learns it should stop.
struct TaskControl {
  std::function<void(const std::string&)> on_stage;
  std::function<void(const LayerResult&)> on_layer;
  // Checked between layer groups; set: the task returns Cancelled.
  const std::atomic<bool>* cancelled = nullptr;
};

// A job's inputs, opened and checked: the checkpoint, the resolved
// per-layer plan, the calibration split, and (kWholeModel) the float model
// with every weight checked finite.
struct JobInputs {
  std::unique_ptr<Checkpoint> checkpoint;
  QuantizationPlan plan;
  std::string tokenizer_dir;
  CalibrationSplit split;
  std::unique_ptr<LlamaModel> model;  // Null for kCheckpointOnly.
};
enum class ModelLoading {
  kWholeModel,
  // The checkpoint stays memory-mapped and unchecked; a block task reads
  // (and checks) only the blocks it runs, one at a time.
  kCheckpointOnly,
};
absl::StatusOr<JobInputs> OpenJobInputs(
    const JobTaskContext& context, const TaskControl& control,
    ModelLoading loading = ModelLoading::kWholeModel);

// Bytes of one block's calibration and held-out hidden states (what a
// block task compares with max_activation_bytes).
int64_t BlockStateBytes(const JobInputs& inputs);

// A hidden-states file, read whole into memory or, `chunked`, a chunk at a
// time from the file.
absl::StatusOr<std::unique_ptr<HiddenStateSource>> OpenHiddenStates(
    const std::string& path, bool chunked);
// The hidden states leaving block `block`, from its output files in `dir`.
absl::Status OpenLeavingStates(const std::string& dir, int block, bool chunked,
                               std::unique_ptr<HiddenStateSource>* calibration,
                               std::unique_ptr<HiddenStateSource>* heldout);

// The windows' embeddings (the states entering block 0), a chunk at a time,
// kept in memory or, where a spill path is given, written there through
// `fs` and read back a chunk at a time. The embedding table is checked
// finite and read only for this.
absl::Status EmbedEnteringStates(
    const JobInputs& inputs, const std::string& calibration_spill,
    const std::string& heldout_spill, FileSystem* fs,
    std::unique_ptr<HiddenStateSource>* calibration,
    std::unique_ptr<HiddenStateSource>* heldout);

// Block `block`'s weights in float32, after checking each of its tensors is
// finite (the error names the tensor and the index).
absl::StatusOr<BlockWeights> LoadCheckedBlock(const Checkpoint& checkpoint,
                                              int block);

// The stored dtype of each of block `block`'s tensors by full name.
std::map<std::string, DType> BlockDTypes(const Checkpoint& checkpoint,
                                         int block);

// The block task's input for block `block` of `inputs` (its float
// `weights`), with the hidden states entering it.
BlockTaskInput MakeBlockTaskInput(const JobInputs& inputs, const Recipe& recipe,
                                  int block, BlockWeights weights,
                                  HiddenStates calibration,
                                  HiddenStates heldout);

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
  bool already_done = false;  // An earlier attempt had published it.
};

// Assembles, evaluates and publishes the packed checkpoint at
// `artifact_dir` from every block's published output. When `artifact_dir`
// already holds a finished checkpoint (an earlier attempt published it and
// died before reporting), its audit is returned instead.
absl::StatusOr<FinalizeJobResult> RunFinalizeJobTask(
    const JobTaskContext& context, const std::string& artifact_dir,
    int64_t max_shard_bytes, const TaskControl& control);

}  // namespace quant

#endif  // QUANT_CORE_PIPELINE_JOB_TASKS_H_

// Internal to core/pipeline: the steps the block and finalize tasks
// (job_tasks.h) are made of, and those tasks run on inputs already opened,
// which the in-process executor (local_pipeline.h) uses to open a job's
// inputs once for all of its tasks. Nothing outside core/pipeline includes
// this header.
#ifndef QUANT_CORE_PIPELINE_INTERNAL_JOB_INPUTS_H_
#define QUANT_CORE_PIPELINE_INTERNAL_JOB_INPUTS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "core/base/file_system.h"
#include "core/calib/calibration_split.h"
#include "core/eval/task_file.h"
#include "core/forward/block_weights.h"
#include "core/model/checkpoint.h"
#include "core/pipeline/block_task.h"
#include "core/pipeline/finalize_task.h"
#include "core/pipeline/gates.h"
#include "core/pipeline/hidden_state_stream.h"
#include "core/pipeline/job_tasks.h"
#include "core/pipeline/previous_release.h"
#include "core/pipeline/quantization_plan.h"
#include "core/recipe/recipe.h"
#include "core/text/tokenizer.h"

namespace quant {
namespace pipeline_internal {

// A job's inputs, opened and checked: the checkpoint (memory-mapped; a
// block task checks the blocks it reads), the resolved per-layer plan and
// the calibration split.
struct JobInputs {
  std::unique_ptr<Checkpoint> checkpoint;
  QuantizationPlan plan;
  std::string tokenizer_dir;
  CalibrationSplit split;
  // Renders the set's conversations (split.options.chat points here); null
  // when the recipe's chat_template gives none.
  std::unique_ptr<ChatRenderer> chat;
  // The checkpoint's tokenizer (tokenizer_dir); the task gate encodes with
  // it.
  std::unique_ptr<Tokenizer> tokenizer;
  // recipe gates.tasks, loaded and parsed; nullopt when it names none.
  std::optional<TaskFile> tasks;
  // The previous release (context.previous_dir), opened and checked to be
  // the same model; its files are verified by whoever resolved it.
  std::optional<PreviousRelease> previous;
};
absl::StatusOr<JobInputs> OpenJobInputs(const JobTaskContext& context,
                                        const TaskControl& control);

// Bytes of one block's calibration and held-out hidden states (what a
// block task compares with max_activation_bytes).
int64_t BlockStateBytes(const JobInputs& inputs);

// A hidden-states file, read whole into memory or, `chunked`, a chunk at a
// time from the file.
// Read through `fs`.
absl::StatusOr<std::unique_ptr<HiddenStateSource>> OpenHiddenStates(
    const std::string& path, bool chunked, FileSystem* fs);
// The hidden states leaving block `block`, from its output files in `dir`.
absl::Status OpenLeavingStates(const std::string& dir, int block, bool chunked,
                               FileSystem* fs,
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

// Whether block `block`'s task has published its outputs in `work_dir` (its
// layers.json, renamed into place last, exists). What it published is checked
// by whoever reads it.
bool BlockPublished(const std::string& work_dir, int block);

// The block task's input for block `block` of `inputs` (its float
// `weights`); the hidden states entering it are set by the caller.
BlockTaskInput MakeBlockTaskInput(const JobInputs& inputs, const Recipe& recipe,
                                  int block, BlockWeights weights);

// The plan whose settings a mixed-precision job's blocks use (measured by
// the first task that needs it, read by the others); nullopt for a job
// without recipe mixed_precision.
absl::StatusOr<std::optional<QuantizationPlan>> JobChosenPlan(
    const JobTaskContext& context, const JobInputs& inputs,
    const TaskControl& control);

// Block `block`'s task input as a job task runs it: its checked weights,
// the settings (`chosen`'s when set), the previous release's layers, the
// context's threads and file system, the control's cancellation. The
// hidden states and sinks are the caller's.
absl::StatusOr<BlockTaskInput> BlockInputFromJob(
    const JobTaskContext& context, const JobInputs& inputs, int block,
    const std::optional<QuantizationPlan>& chosen, const TaskControl& control);

// What BlockInputFromJob reads from the checkpoints: block `block`'s
// checked float weights and the previous release's layers of it (empty
// without one)...
struct JobBlockWeights {
  BlockWeights weights;
  std::map<LayerType, RowMatrixF> previous;
};
absl::StatusOr<JobBlockWeights> LoadJobBlockWeights(const JobInputs& inputs,
                                                    int block);
// ...and the rest of it, on those.
BlockTaskInput BlockInputFromWeights(
    const JobTaskContext& context, const JobInputs& inputs, int block,
    const std::optional<QuantizationPlan>& chosen, const TaskControl& control,
    JobBlockWeights loaded);

// The embeddings of `range` of the calibration (or held-out) windows, in
// memory: the states entering block 0 for one shard.
absl::StatusOr<std::unique_ptr<HiddenStateSource>> EmbedShardStates(
    const JobInputs& inputs, bool calibration, SequenceRange range);

// RunBlockJobTask and RunFinalizeJobTask (job_tasks.h) on `inputs` opened
// for `context` by OpenJobInputs. The finalize here always assembles: it
// does not look for a checkpoint an earlier attempt published.
absl::Status RunBlockJobTaskOnInputs(const JobTaskContext& context,
                                     const JobInputs& inputs, int block,
                                     const std::string& attempt_dir,
                                     const TaskControl& control);
absl::StatusOr<FinalizeJobResult> RunFinalizeJobTaskOnInputs(
    const JobTaskContext& context, const JobInputs& inputs,
    const std::string& artifact_dir, int64_t max_shard_bytes,
    const TaskControl& control);

// What FinalizeInputFromJob reads of every block's published output.
enum class BlockOutputsRead {
  kNone,              // A part of the gates' evaluation needs none.
  kLayers,            // The completion: the tensors are staged already.
  kLayersAndTensors,  // Writing the packed checkpoint.
};

// The finalize's input for the job, pointing into `inputs` (which must
// outlive it).
absl::StatusOr<FinalizeInput> FinalizeInputFromJob(
    const JobTaskContext& context, const JobInputs& inputs,
    const std::string& artifact_dir, int64_t max_shard_bytes,
    const TaskControl& control, BlockOutputsRead read);
FinalizeJobResult FinalizeJobResultOf(FinalizeOutput out);

// The verdict of a checkpoint already published at `artifact_dir` (an
// earlier attempt published it and died before reporting), checked to be
// this job's; nullopt when nothing is published there.
absl::StatusOr<std::optional<FinalizeJobResult>> PublishedFinalizeResult(
    const JobTaskContext& context, const std::string& artifact_dir);

}  // namespace pipeline_internal
}  // namespace quant

#endif  // QUANT_CORE_PIPELINE_INTERNAL_JOB_INPUTS_H_

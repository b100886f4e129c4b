// The block and finalize tasks from files, as a worker runs them.
#include "core/pipeline/job_tasks.h"

#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/directory_util.h"
#include "core/base/file_util.h"
#include "core/base/status_macros.h"
#include "core/base/strict_json.h"
#include "core/calib/calibration_file.h"
#include "core/eval/evaluation_parts.h"
#include "core/forward/block_forward.h"
#include "core/forward/block_weights.h"
#include "core/forward/rope.h"
#include "core/model/linear_layers.h"
#include "core/pipeline/internal/job_inputs.h"
#include "core/pipeline/internal/mixed_precision_pass.h"
#include "core/pipeline/task_io.h"

namespace quant {
namespace {

using pipeline_internal::BlockOutputsRead;
using pipeline_internal::BlockPublished;
using pipeline_internal::BlockStateBytes;
using pipeline_internal::EmbedEnteringStates;
using pipeline_internal::FinalizeInputFromJob;
using pipeline_internal::FinalizeJobResultOf;
using pipeline_internal::JobInputs;
using pipeline_internal::JobMixedPrecision;
using pipeline_internal::LoadCheckedBlock;
using pipeline_internal::OpenJobInputs;
using pipeline_internal::OpenLeavingStates;
using pipeline_internal::PublishedFinalizeResult;
using pipeline_internal::ReadJobMixedPrecision;

void Stage(const TaskControl& control, const std::string& what) {
  if (control.on_stage) control.on_stage(what);
}

bool Cancelled(const TaskControl& control) {
  return control.cancelled != nullptr && control.cancelled->load();
}

// What the coordinator recorded for the block's layers.json; "" if nothing.
const std::string& RecordedLayersSha256(const JobTaskContext& context,
                                        int block) {
  static const std::string* const kNone = new std::string();
  auto it = context.block_output_sha256.find(block);
  return it == context.block_output_sha256.end() ? *kNone : it->second;
}

using SourcePtr = std::unique_ptr<HiddenStateSource>;

// The hidden states a block task holds (entering and produced on the way
// there): in memory when they fit the bound, otherwise in spill files under
// the attempt area, read back a chunk at a time. Spill files go with it.
class StatePlacement {
 public:
  StatePlacement(const JobTaskContext& context, std::string spill_dir,
                 int64_t bytes)
      : fs_(context.file_system),
        spill_dir_(std::move(spill_dir)),
        spill_(bytes > context.max_activation_bytes) {}
  ~StatePlacement() {
    for (const std::string& path : spilled_) (void)fs_->RemoveFile(path);
  }

  bool spill() const { return spill_; }
  FileSystem* fs() const { return fs_; }
  // A new spill file's path, or "" for memory.
  std::string NextPath(const char* what) {
    if (!spill_) return "";
    spilled_.push_back(JoinPath(
        spill_dir_,
        absl::StrCat("entering-", spilled_.size(), ".", what, ".safetensors")));
    return spilled_.back();
  }

 private:
  FileSystem* fs_;
  std::string spill_dir_;
  bool spill_;
  std::vector<std::string> spilled_;
};

// `states` run through the float block `weights`, chunk by chunk.
absl::StatusOr<SourcePtr> RunFloatBlock(const ModelConfig& config,
                                        const BlockWeights& weights,
                                        const RopeTable& rope,
                                        const HiddenStateSource& states,
                                        StatePlacement* placement,
                                        const char* what) {
  return ProduceHiddenStates(
      states.seq_len(), states.lengths(), states.hidden_size(),
      [&](SequenceRange chunk) -> absl::StatusOr<RowMatrixF> {
        QUANT_ASSIGN_OR_RETURN(const RowMatrixF rows, states.Read(chunk));
        return RunBlock(config, weights, rope, states.seq_len(), rows);
      },
      placement->NextPath(what), kDefaultChunkTokens, placement->fs());
}

// The hidden states entering `block`, holding one float block at a time.
absl::Status EnteringStates(const JobTaskContext& context,
                            const JobInputs& inputs, int block,
                            StatePlacement* placement, SourcePtr* calibration,
                            SourcePtr* heldout) {
  auto read_leaving = [&](int b) -> absl::Status {
    // Written by another task, perhaps on another machine: checked first.
    const std::string& recorded = RecordedLayersSha256(context, b);
    QUANT_RETURN_IF_ERROR(VerifyBlockFile(context.work_dir, b,
                                          ".cal.safetensors", recorded,
                                          context.file_system));
    QUANT_RETURN_IF_ERROR(VerifyBlockFile(context.work_dir, b,
                                          ".heldout.safetensors", recorded,
                                          context.file_system));
    return OpenLeavingStates(context.work_dir, b, placement->spill(),
                             context.file_system, calibration, heldout);
  };
  auto embed = [&] {
    return EmbedEnteringStates(inputs, placement->NextPath("cal"),
                               placement->NextPath("heldout"), placement->fs(),
                               calibration, heldout);
  };
  if (context.recipe.propagation == Propagation::kSequential) {
    if (block == 0) return embed();
    if (!BlockPublished(context.work_dir, block - 1)) {
      return absl::FailedPreconditionError(
          absl::StrCat("block ", block, " needs block ", block - 1,
                       "'s output, which is not in ", context.work_dir));
    }
    return read_leaving(block - 1);
  }
  // Independent propagation: the unquantized model's states. A published
  // block's leaving states are exactly those (block_task.h), so start from
  // the latest one before `block` and run the float blocks after it.
  int start = 0;
  for (int b = block - 1; b >= 0; --b) {
    if (BlockPublished(context.work_dir, b)) {
      QUANT_RETURN_IF_ERROR(read_leaving(b));
      start = b + 1;
      break;
    }
  }
  if (start == 0) QUANT_RETURN_IF_ERROR(embed());
  const ModelConfig& config = inputs.checkpoint->config();
  // The same table and chunks as the block task, so the rows are
  // bit-identical to a published block's leaving states.
  const RopeTable rope(
      config, std::max((*calibration)->seq_len(), (*heldout)->seq_len()));
  for (int b = start; b < block; ++b) {
    QUANT_ASSIGN_OR_RETURN(const BlockWeights weights,
                           LoadCheckedBlock(*inputs.checkpoint, b));
    QUANT_ASSIGN_OR_RETURN(
        *calibration,
        RunFloatBlock(config, weights, rope, **calibration, placement, "cal"));
    QUANT_ASSIGN_OR_RETURN(
        *heldout,
        RunFloatBlock(config, weights, rope, **heldout, placement, "heldout"));
  }
  return absl::OkStatus();
}

// The job's inputs and the finalize's input, which points into them.
struct JobFinalize {
  std::unique_ptr<JobInputs> inputs;  // On the heap: `input` points into it.
  FinalizeInput input;
};

absl::StatusOr<JobFinalize> OpenJobFinalize(const JobTaskContext& context,
                                            const std::string& artifact_dir,
                                            int64_t max_shard_bytes,
                                            const TaskControl& control,
                                            BlockOutputsRead read) {
  JobFinalize job;
  QUANT_ASSIGN_OR_RETURN(JobInputs inputs, OpenJobInputs(context, control));
  job.inputs = std::make_unique<JobInputs>(std::move(inputs));
  QUANT_ASSIGN_OR_RETURN(
      job.input, FinalizeInputFromJob(context, *job.inputs, artifact_dir,
                                      max_shard_bytes, control, read));
  return job;
}

}  // namespace

absl::Status RunBlockJobTask(const JobTaskContext& context, int block,
                             const std::string& attempt_dir,
                             const TaskControl& control) {
  QUANT_ASSIGN_OR_RETURN(const JobInputs inputs,
                         OpenJobInputs(context, control));
  return RunBlockJobTaskOnInputs(context, inputs, block, attempt_dir, control);
}

absl::StatusOr<FinalizeJobResult> RunFinalizeJobTask(
    const JobTaskContext& context, const std::string& artifact_dir,
    int64_t max_shard_bytes, const TaskControl& control) {
  QUANT_ASSIGN_OR_RETURN(std::optional<FinalizeJobResult> published,
                         PublishedFinalizeResult(context, artifact_dir));
  if (published.has_value()) return *std::move(published);
  QUANT_ASSIGN_OR_RETURN(const JobInputs inputs,
                         OpenJobInputs(context, control));
  return RunFinalizeJobTaskOnInputs(context, inputs, artifact_dir,
                                    max_shard_bytes, control);
}

absl::Status StageFinalizeJobTask(const JobTaskContext& context,
                                  const std::string& staged_dir,
                                  int64_t max_shard_bytes,
                                  const TaskControl& control) {
  QUANT_ASSIGN_OR_RETURN(
      JobFinalize job,
      OpenJobFinalize(context, /*artifact_dir=*/"", max_shard_bytes, control,
                      BlockOutputsRead::kLayersAndTensors));
  return StageFinalize(std::move(job.input), staged_dir, control.on_stage);
}

absl::StatusOr<int64_t> FinalizeJobEvaluationBatches(
    const JobTaskContext& context, const TaskControl& control) {
  QUANT_ASSIGN_OR_RETURN(
      const JobFinalize job,
      OpenJobFinalize(context, /*artifact_dir=*/"", kDefaultMaxShardBytes,
                      control, BlockOutputsRead::kNone));
  return FinalizeEvaluationBatches(job.input);
}

absl::Status ScoreFinalizeJobPart(const JobTaskContext& context,
                                  const std::string& staged_dir,
                                  int64_t first_batch, int64_t batch_count,
                                  const std::string& part_path,
                                  const TaskControl& control) {
  QUANT_ASSIGN_OR_RETURN(
      const JobFinalize job,
      OpenJobFinalize(context, /*artifact_dir=*/"", kDefaultMaxShardBytes,
                      control, BlockOutputsRead::kNone));
  Stage(control, absl::StrCat("evaluating batches [", first_batch, ", ",
                              first_batch + batch_count, ") of ",
                              FinalizeEvaluationBatches(job.input)));
  QUANT_ASSIGN_OR_RETURN(const EvaluationPart part,
                         ScoreStagedEvaluationPart(job.input, staged_dir,
                                                   first_batch, batch_count));
  return WriteEvaluationPart(part_path, part, context.file_system);
}

absl::StatusOr<FinalizeJobResult> CompleteFinalizeJobTask(
    const JobTaskContext& context, const std::string& staged_dir,
    const std::vector<std::string>& part_paths, const std::string& artifact_dir,
    const TaskControl& control) {
  std::vector<EvaluationPart> parts;
  for (const std::string& path : part_paths) {
    QUANT_ASSIGN_OR_RETURN(EvaluationPart part,
                           ReadEvaluationPart(path, context.file_system));
    parts.push_back(std::move(part));
  }
  QUANT_ASSIGN_OR_RETURN(
      JobFinalize job,
      OpenJobFinalize(context, artifact_dir, kDefaultMaxShardBytes, control,
                      BlockOutputsRead::kLayers));
  QUANT_ASSIGN_OR_RETURN(FinalizeOutput out,
                         CompleteFinalize(std::move(job.input), staged_dir,
                                          std::move(parts), control.on_stage));
  return FinalizeJobResultOf(std::move(out));
}

namespace pipeline_internal {

absl::StatusOr<std::optional<QuantizationPlan>> JobChosenPlan(
    const JobTaskContext& context, const JobInputs& inputs,
    const TaskControl& control) {
  if (!context.recipe.mixed_precision.has_value()) return std::nullopt;
  // The first task to run measures the selection; the others read it. Its
  // settings replace the plan's bits and group sizes.
  QUANT_ASSIGN_OR_RETURN(const MixedPrecisionSelection selection,
                         JobMixedPrecision(context, inputs, control));
  QUANT_ASSIGN_OR_RETURN(QuantizationPlan chosen,
                         ApplyMixedPrecision(selection, inputs.plan));
  return chosen;
}

absl::StatusOr<JobBlockWeights> LoadJobBlockWeights(const JobInputs& inputs,
                                                    int block) {
  JobBlockWeights loaded;
  QUANT_ASSIGN_OR_RETURN(loaded.weights,
                         LoadCheckedBlock(*inputs.checkpoint, block));
  if (inputs.previous.has_value()) {
    absl::StatusOr<BlockWeights> theirs =
        LoadBlockWeights(*inputs.previous->checkpoint, block);
    if (!theirs.ok()) {
      return absl::Status(
          theirs.status().code(),
          absl::StrCat("gates.compare_to: ", theirs.status().message()));
    }
    loaded.previous = PreviousLayersInSourceUnits(loaded.weights, *theirs,
                                                  !inputs.previous->used_awq);
  }
  return loaded;
}

BlockTaskInput BlockInputFromWeights(
    const JobTaskContext& context, const JobInputs& inputs, int block,
    const std::optional<QuantizationPlan>& chosen, const TaskControl& control,
    JobBlockWeights loaded) {
  BlockTaskInput input = MakeBlockTaskInput(inputs, context.recipe, block,
                                            std::move(loaded.weights));
  if (chosen.has_value()) input.settings = chosen->blocks[block];
  input.previous = std::move(loaded.previous);
  input.threads = context.threads;
  input.file_system = context.file_system;
  input.cancelled = control.cancelled;
  return input;
}

absl::StatusOr<BlockTaskInput> BlockInputFromJob(
    const JobTaskContext& context, const JobInputs& inputs, int block,
    const std::optional<QuantizationPlan>& chosen, const TaskControl& control) {
  QUANT_ASSIGN_OR_RETURN(JobBlockWeights loaded,
                         LoadJobBlockWeights(inputs, block));
  return BlockInputFromWeights(context, inputs, block, chosen, control,
                               std::move(loaded));
}

absl::Status RunBlockJobTaskOnInputs(const JobTaskContext& context,
                                     const JobInputs& inputs, int block,
                                     const std::string& attempt_dir,
                                     const TaskControl& control) {
  const int blocks = inputs.checkpoint->config().num_hidden_layers;
  if (block < 0 || block >= blocks) {
    return absl::InvalidArgumentError(absl::StrCat(
        "block ", block, " is outside the model's 0..", blocks - 1));
  }
  if (block == 0) {
    // Fail the job at its first task, not hours later at the bad block.
    Stage(control, "checking every weight is finite");
    QUANT_RETURN_IF_ERROR(inputs.checkpoint->CheckAllFinite());
  }
  if (Cancelled(control)) return absl::CancelledError("task cancelled");
  if (!IsDirectory(attempt_dir)) {
    absl::Status made = MakeDirectory(attempt_dir, context.file_system);
    if (!made.ok() && !absl::IsAlreadyExists(made)) return made;
  }
  // Before this block's entering states are held.
  QUANT_ASSIGN_OR_RETURN(const std::optional<QuantizationPlan> chosen,
                         JobChosenPlan(context, inputs, control));
  if (control.announce_block_steps) {
    Stage(control,
          absl::StrCat("computing the hidden states entering block ", block));
  }
  StatePlacement placement(context, attempt_dir, BlockStateBytes(inputs));
  if (placement.spill()) {
    Stage(control, DescribeSpill(BlockStateBytes(inputs),
                                 context.max_activation_bytes, attempt_dir));
  }
  SourcePtr calibration, heldout;
  QUANT_RETURN_IF_ERROR(EnteringStates(context, inputs, block, &placement,
                                       &calibration, &heldout));
  QUANT_ASSIGN_OR_RETURN(
      BlockTaskInput input,
      BlockInputFromJob(context, inputs, block, chosen, control));
  input.calibration_source = calibration.get();
  input.heldout_source = heldout.get();
  // The block's own kept activations: in memory up to the bound, else in
  // the attempt's area (removed with the task).
  input.stash_dir = attempt_dir;
  input.max_stash_bytes = context.max_activation_bytes;
  // The leaving states go straight to the attempt's files.
  const std::string prefix = BlockOutputPrefix(attempt_dir, block);
  const int64_t hidden = inputs.checkpoint->config().hidden_size;
  QUANT_ASSIGN_OR_RETURN(
      std::unique_ptr<HiddenStateFileWriter> calibration_out,
      HiddenStateFileWriter::Create(
          prefix + ".cal.safetensors", calibration->seq_len(),
          calibration->lengths(), hidden, context.file_system));
  QUANT_ASSIGN_OR_RETURN(
      std::unique_ptr<HiddenStateFileWriter> heldout_out,
      HiddenStateFileWriter::Create(prefix + ".heldout.safetensors",
                                    heldout->seq_len(), heldout->lengths(),
                                    hidden, context.file_system));
  input.calibration_sink = calibration_out.get();
  input.heldout_sink = heldout_out.get();
  if (control.announce_block_steps) {
    Stage(control, absl::StrCat("quantizing block ", block));
  }
  QUANT_ASSIGN_OR_RETURN(BlockTaskOutput output,
                         RunBlockTask(input, control.on_layer));
  QUANT_RETURN_IF_ERROR(WriteBlockOutput(
      attempt_dir, output, context.file_system, {}, context.threads));
  return PublishBlockOutput(attempt_dir, context.work_dir, block,
                            context.file_system);
}

absl::StatusOr<FinalizeInput> FinalizeInputFromJob(
    const JobTaskContext& context, const JobInputs& inputs,
    const std::string& artifact_dir, int64_t max_shard_bytes,
    const TaskControl& control, BlockOutputsRead read) {
  FinalizeInput finalize;
  const int blocks = read == BlockOutputsRead::kNone
                         ? 0
                         : inputs.checkpoint->config().num_hidden_layers;
  if (blocks > 0) Stage(control, "reading every block's output");
  for (int b = 0; b < blocks; ++b) {
    const std::string sha256 = RecordedLayersSha256(context, b);
    QUANT_ASSIGN_OR_RETURN(
        StoredBlockOutput stored,
        read == BlockOutputsRead::kLayers
            ? ReadBlockLayers(context.work_dir, b, sha256, context.file_system)
            : ReadBlockOutput(context.work_dir, b, sha256,
                              context.file_system));
    if (read == BlockOutputsRead::kLayersAndTensors) {
      finalize.block_tensors.push_back(std::move(stored.tensors));
    }
    for (LayerResult& l : stored.layers) {
      finalize.layers.push_back(std::move(l));
    }
  }
  if (Cancelled(control)) return absl::CancelledError("task cancelled");
  finalize.source = inputs.checkpoint.get();
  finalize.recipe = &context.recipe;
  finalize.split = &inputs.split;
  finalize.tokenizer_dir = inputs.tokenizer_dir;
  finalize.out_dir = artifact_dir;
  finalize.job_id = context.job_id;
  finalize.previous_dir = context.previous_dir;
  finalize.previous_verified = context.verify_previous_at_open;
  finalize.tasks = inputs.tasks.has_value() ? &*inputs.tasks : nullptr;
  finalize.tokenizer = inputs.tokenizer.get();
  if (context.recipe.mixed_precision.has_value()) {
    QUANT_ASSIGN_OR_RETURN(const MixedPrecisionSelection selection,
                           ReadJobMixedPrecision(context, inputs));
    finalize.mixed_precision = MixedPrecisionToJson(selection);
  }
  finalize.max_shard_bytes = max_shard_bytes;
  finalize.eval_batch_windows = context.eval_batch_windows;
  finalize.threads = context.threads;
  finalize.file_system = context.file_system;
  return finalize;
}

absl::StatusOr<std::optional<FinalizeJobResult>> PublishedFinalizeResult(
    const JobTaskContext& context, const std::string& artifact_dir) {
  const std::string manifest_path = JoinPath(artifact_dir, "manifest.json");
  const std::string published_audit = JoinPath(artifact_dir, "audit.json");
  if (!FileExists(manifest_path) || !FileExists(published_audit)) {
    return std::optional<FinalizeJobResult>();
  }
  // Published by an earlier attempt of this task, or by another job whose
  // id this one reuses: only the first may be reported.
  FinalizeJobResult result;
  QUANT_ASSIGN_OR_RETURN(
      std::string manifest_text,
      context.file_system->ReadFile(manifest_path, size_t{256} << 20));
  result.manifest = ParseJsonOrDiscarded(manifest_text);
  if (!context.job_id.empty()) {
    QUANT_RETURN_IF_ERROR(CheckManifestNamesJob(
        result.manifest, manifest_path, context.job_id, context.recipe));
  }
  QUANT_ASSIGN_OR_RETURN(
      std::string text,
      context.file_system->ReadFile(published_audit, size_t{256} << 20));
  result.audit = ParseJsonOrDiscarded(text);
  if (!result.audit.is_object() || !result.audit.contains("verdict")) {
    return absl::DataLossError(
        absl::StrCat(published_audit, ": not an audit this tool wrote"));
  }
  result.passed = result.audit["verdict"] == "PASS";
  result.already_done = true;
  return std::optional<FinalizeJobResult>(std::move(result));
}

FinalizeJobResult FinalizeJobResultOf(FinalizeOutput out) {
  FinalizeJobResult result;
  result.passed = out.gates.passed;
  result.audit = std::move(out.audit);
  result.manifest = std::move(out.manifest);
  return result;
}

absl::StatusOr<FinalizeJobResult> RunFinalizeJobTaskOnInputs(
    const JobTaskContext& context, const JobInputs& inputs,
    const std::string& artifact_dir, int64_t max_shard_bytes,
    const TaskControl& control) {
  QUANT_ASSIGN_OR_RETURN(
      FinalizeInput finalize,
      FinalizeInputFromJob(context, inputs, artifact_dir, max_shard_bytes,
                           control, BlockOutputsRead::kLayersAndTensors));
  QUANT_ASSIGN_OR_RETURN(
      FinalizeOutput out,
      RunFinalizeTask(std::move(finalize), control.on_stage));
  return FinalizeJobResultOf(std::move(out));
}

}  // namespace pipeline_internal
}  // namespace quant

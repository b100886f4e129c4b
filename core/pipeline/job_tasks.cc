// The block and finalize tasks from files, as a worker runs them.
#include "core/pipeline/job_tasks.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/directory_util.h"
#include "core/base/file_util.h"
#include "core/base/status_macros.h"
#include "core/calib/calibration_file.h"
#include "core/forward/block_forward.h"
#include "core/forward/block_weights.h"
#include "core/forward/rope.h"
#include "core/model/linear_layers.h"
#include "core/pipeline/task_io.h"

namespace quant {
namespace {

void Stage(const TaskControl& control, const std::string& what) {
  if (control.on_stage) control.on_stage(what);
}

bool Cancelled(const TaskControl& control) {
  return control.cancelled != nullptr && control.cancelled->load();
}

bool BlockPublished(const std::string& work_dir, int block) {
  return FileExists(BlockOutputPrefix(work_dir, block) + ".layers.json");
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
    QUANT_RETURN_IF_ERROR(
        VerifyBlockFile(context.work_dir, b, ".cal.safetensors", recorded));
    QUANT_RETURN_IF_ERROR(
        VerifyBlockFile(context.work_dir, b, ".heldout.safetensors", recorded));
    return OpenLeavingStates(context.work_dir, b, placement->spill(),
                             calibration, heldout);
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

}  // namespace

int64_t BlockStateBytes(const JobInputs& inputs) {
  const int64_t hidden = inputs.checkpoint->config().hidden_size;
  const TokenWindows& cal = inputs.split.calibration;
  const TokenWindows& held = inputs.split.heldout;
  return HiddenStateBytes(static_cast<int64_t>(cal.lengths.size()), cal.seq_len,
                          hidden) +
         HiddenStateBytes(static_cast<int64_t>(held.lengths.size()),
                          held.seq_len, hidden);
}

absl::StatusOr<std::unique_ptr<HiddenStateSource>> OpenHiddenStates(
    const std::string& path, bool chunked) {
  if (chunked) {
    QUANT_ASSIGN_OR_RETURN(std::unique_ptr<HiddenStateFile> file,
                           HiddenStateFile::Open(path));
    return std::unique_ptr<HiddenStateSource>(std::move(file));
  }
  QUANT_ASSIGN_OR_RETURN(HiddenStates states, ReadHiddenStates(path));
  return std::unique_ptr<HiddenStateSource>(
      std::make_unique<OwnedHiddenStateSource>(std::move(states)));
}

absl::Status OpenLeavingStates(const std::string& dir, int block, bool chunked,
                               std::unique_ptr<HiddenStateSource>* calibration,
                               std::unique_ptr<HiddenStateSource>* heldout) {
  const std::string prefix = BlockOutputPrefix(dir, block);
  QUANT_ASSIGN_OR_RETURN(
      *calibration, OpenHiddenStates(prefix + ".cal.safetensors", chunked));
  QUANT_ASSIGN_OR_RETURN(
      *heldout, OpenHiddenStates(prefix + ".heldout.safetensors", chunked));
  return absl::OkStatus();
}

absl::Status EmbedEnteringStates(
    const JobInputs& inputs, const std::string& calibration_spill,
    const std::string& heldout_spill, FileSystem* fs,
    std::unique_ptr<HiddenStateSource>* calibration,
    std::unique_ptr<HiddenStateSource>* heldout) {
  const Checkpoint& checkpoint = *inputs.checkpoint;
  const std::string name = "model.embed_tokens.weight";
  QUANT_RETURN_IF_ERROR(checkpoint.CheckFinite(name));
  QUANT_ASSIGN_OR_RETURN(const RowMatrixF table, ReadMatrix(checkpoint, name));
  auto embed = [&](const TokenWindows& windows, const std::string& spill) {
    return ProduceHiddenStates(
        windows.seq_len, windows.lengths, table.cols(),
        [&](SequenceRange chunk) -> absl::StatusOr<RowMatrixF> {
          std::vector<int32_t> ids;
          for (int64_t i = chunk.first; i < chunk.first + chunk.count; ++i) {
            const std::vector<int32_t>& sequence = windows.sequences[i];
            ids.insert(ids.end(), sequence.begin(), sequence.end());
          }
          return EmbedTokens(table, ids);
        },
        spill, kDefaultChunkTokens, fs);
  };
  QUANT_ASSIGN_OR_RETURN(*calibration,
                         embed(inputs.split.calibration, calibration_spill));
  QUANT_ASSIGN_OR_RETURN(*heldout, embed(inputs.split.heldout, heldout_spill));
  return absl::OkStatus();
}

absl::StatusOr<BlockWeights> LoadCheckedBlock(const Checkpoint& checkpoint,
                                              int block) {
  for (const auto& [name, dtype] : BlockDTypes(checkpoint, block)) {
    QUANT_RETURN_IF_ERROR(checkpoint.CheckFinite(name));
  }
  return LoadBlockWeights(checkpoint, block);
}

std::map<std::string, DType> BlockDTypes(const Checkpoint& checkpoint,
                                         int block) {
  std::map<std::string, DType> dtypes;
  const std::string prefix = BlockPrefix(block);
  for (const ExpectedTensor& t : checkpoint.expected_tensors()) {
    if (t.name.compare(0, prefix.size(), prefix) != 0) continue;
    dtypes[t.name] = checkpoint.tensors().Find(t.name).info->dtype;
  }
  return dtypes;
}

absl::StatusOr<JobInputs> OpenJobInputs(const JobTaskContext& context,
                                        const TaskControl& control,
                                        ModelLoading loading) {
  JobInputs inputs;
  const bool whole = loading == ModelLoading::kWholeModel;
  Stage(control, whole ? "opening the checkpoint and checking every weight "
                         "is finite"
                       : "opening the checkpoint");
  CheckpointOptions open_options;
  open_options.check_finite = whole;
  QUANT_ASSIGN_OR_RETURN(
      inputs.checkpoint,
      Checkpoint::Open(context.checkpoint_dir, open_options));
  QUANT_ASSIGN_OR_RETURN(
      inputs.plan,
      PlanQuantization(inputs.checkpoint->config(), context.recipe));

  Stage(control, "tokenizing the calibration set");
  inputs.tokenizer_dir = context.tokenizer_dir.empty() ? context.checkpoint_dir
                                                       : context.tokenizer_dir;
  QUANT_ASSIGN_OR_RETURN(std::unique_ptr<Tokenizer> tokenizer,
                         Tokenizer::LoadFromDirectory(inputs.tokenizer_dir));
  QUANT_ASSIGN_OR_RETURN(CalibrationFile file,
                         LoadCalibrationFile(context.calibration_path));
  QUANT_ASSIGN_OR_RETURN(
      inputs.split,
      BuildCalibrationSplit(file, *tokenizer,
                            SplitOptionsFromRecipe(context.recipe)));

  if (whole) {
    Stage(control, "loading the model");
    QUANT_ASSIGN_OR_RETURN(inputs.model, LlamaModel::Load(*inputs.checkpoint));
  }
  return inputs;
}

BlockTaskInput MakeBlockTaskInput(const JobInputs& inputs, const Recipe& recipe,
                                  int block, BlockWeights weights,
                                  HiddenStates calibration,
                                  HiddenStates heldout) {
  BlockTaskInput input;
  input.config = &inputs.checkpoint->config();
  input.recipe = &recipe;
  input.weights = std::move(weights);
  input.settings = inputs.plan.blocks[block];
  input.stored_dtypes = BlockDTypes(*inputs.checkpoint, block);
  input.calibration = std::move(calibration);
  input.heldout = std::move(heldout);
  return input;
}

absl::Status RunBlockJobTask(const JobTaskContext& context, int block,
                             const std::string& attempt_dir,
                             const TaskControl& control) {
  QUANT_ASSIGN_OR_RETURN(
      JobInputs inputs,
      OpenJobInputs(context, control, ModelLoading::kCheckpointOnly));
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
  Stage(control,
        absl::StrCat("computing the hidden states entering block ", block));
  StatePlacement placement(context, attempt_dir, BlockStateBytes(inputs));
  if (placement.spill()) {
    Stage(control, DescribeSpill(BlockStateBytes(inputs),
                                 context.max_activation_bytes, attempt_dir));
  }
  SourcePtr calibration, heldout;
  QUANT_RETURN_IF_ERROR(EnteringStates(context, inputs, block, &placement,
                                       &calibration, &heldout));
  QUANT_ASSIGN_OR_RETURN(BlockWeights weights,
                         LoadCheckedBlock(*inputs.checkpoint, block));
  BlockTaskInput input = MakeBlockTaskInput(inputs, context.recipe, block,
                                            std::move(weights), {}, {});
  input.calibration_source = calibration.get();
  input.heldout_source = heldout.get();
  input.threads = context.threads;
  // The block's own kept activations: in memory up to the bound, else in
  // the attempt's area (removed with the task).
  input.stash_dir = attempt_dir;
  input.max_stash_bytes = context.max_activation_bytes;
  input.file_system = context.file_system;
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
  input.cancelled = control.cancelled;
  Stage(control, absl::StrCat("quantizing block ", block));
  QUANT_ASSIGN_OR_RETURN(BlockTaskOutput output,
                         RunBlockTask(input, control.on_layer));
  QUANT_RETURN_IF_ERROR(
      WriteBlockOutput(attempt_dir, output, context.file_system));
  return PublishBlockOutput(attempt_dir, context.work_dir, block,
                            context.file_system);
}

absl::StatusOr<FinalizeJobResult> RunFinalizeJobTask(
    const JobTaskContext& context, const std::string& artifact_dir,
    int64_t max_shard_bytes, const TaskControl& control) {
  FinalizeJobResult result;
  const std::string published_audit = JoinPath(artifact_dir, "audit.json");
  if (FileExists(JoinPath(artifact_dir, "manifest.json")) &&
      FileExists(published_audit)) {
    // Published by an earlier attempt of this task, or by another job whose
    // id this one reuses: only the first may be reported.
    if (!context.job_id.empty()) {
      const std::string manifest_path = JoinPath(artifact_dir, "manifest.json");
      QUANT_ASSIGN_OR_RETURN(std::string manifest_text,
                             ReadFileToString(manifest_path));
      QUANT_RETURN_IF_ERROR(CheckManifestNamesJob(
          nlohmann::json::parse(manifest_text, nullptr, false), manifest_path,
          context.job_id, context.recipe));
    }
    QUANT_ASSIGN_OR_RETURN(std::string text, ReadFileToString(published_audit));
    result.audit = nlohmann::json::parse(text, nullptr, false);
    if (!result.audit.is_object() || !result.audit.contains("verdict")) {
      return absl::DataLossError(
          absl::StrCat(published_audit, ": not an audit this tool wrote"));
    }
    result.passed = result.audit["verdict"] == "PASS";
    result.already_done = true;
    return result;
  }
  // The gates read both checkpoints a block at a time; the block tasks
  // checked every weight is finite.
  QUANT_ASSIGN_OR_RETURN(
      JobInputs inputs,
      OpenJobInputs(context, control, ModelLoading::kCheckpointOnly));
  FinalizeInput finalize;
  const int blocks = inputs.checkpoint->config().num_hidden_layers;
  Stage(control, "reading every block's output");
  for (int b = 0; b < blocks; ++b) {
    QUANT_ASSIGN_OR_RETURN(
        StoredBlockOutput stored,
        ReadBlockOutput(context.work_dir, b, RecordedLayersSha256(context, b)));
    finalize.block_tensors.push_back(std::move(stored.tensors));
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
  finalize.max_shard_bytes = max_shard_bytes;
  finalize.threads = context.threads;
  finalize.file_system = context.file_system;
  QUANT_ASSIGN_OR_RETURN(
      FinalizeOutput out,
      RunFinalizeTask(std::move(finalize), control.on_stage));
  result.passed = out.gates.passed;
  result.audit = std::move(out.audit);
  return result;
}

}  // namespace quant

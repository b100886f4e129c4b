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

absl::Status ReadLeavingStates(const std::string& work_dir, int block,
                               HiddenStates* calibration,
                               HiddenStates* heldout) {
  const std::string prefix = BlockOutputPrefix(work_dir, block);
  QUANT_ASSIGN_OR_RETURN(*calibration,
                         ReadHiddenStates(prefix + ".cal.safetensors"));
  QUANT_ASSIGN_OR_RETURN(*heldout,
                         ReadHiddenStates(prefix + ".heldout.safetensors"));
  return absl::OkStatus();
}

// The embeddings of the calibration and held-out windows: the hidden states
// entering block 0. The table is read (and checked) only for this.
absl::Status EmbeddedStates(const JobInputs& inputs, HiddenStates* calibration,
                            HiddenStates* heldout) {
  const Checkpoint& checkpoint = *inputs.checkpoint;
  const std::string name = "model.embed_tokens.weight";
  QUANT_RETURN_IF_ERROR(checkpoint.CheckFinite(name));
  QUANT_ASSIGN_OR_RETURN(const RowMatrixF table, ReadMatrix(checkpoint, name));
  QUANT_ASSIGN_OR_RETURN(*calibration,
                         EmbedWindows(table, inputs.split.calibration));
  QUANT_ASSIGN_OR_RETURN(*heldout, EmbedWindows(table, inputs.split.heldout));
  return absl::OkStatus();
}

// The hidden states entering `block`, holding one float block at a time.
absl::Status EnteringStates(const JobTaskContext& context,
                            const JobInputs& inputs, int block,
                            HiddenStates* calibration, HiddenStates* heldout) {
  if (context.recipe.propagation == Propagation::kSequential) {
    if (block == 0) return EmbeddedStates(inputs, calibration, heldout);
    if (!BlockPublished(context.work_dir, block - 1)) {
      return absl::FailedPreconditionError(
          absl::StrCat("block ", block, " needs block ", block - 1,
                       "'s output, which is not in ", context.work_dir));
    }
    return ReadLeavingStates(context.work_dir, block - 1, calibration, heldout);
  }
  // Independent propagation: the unquantized model's states. A published
  // block's leaving states are exactly those (block_task.h), so start from
  // the latest one before `block` and run the float blocks after it.
  int start = 0;
  for (int b = block - 1; b >= 0; --b) {
    if (BlockPublished(context.work_dir, b)) {
      QUANT_RETURN_IF_ERROR(
          ReadLeavingStates(context.work_dir, b, calibration, heldout));
      start = b + 1;
      break;
    }
  }
  if (start == 0) {
    QUANT_RETURN_IF_ERROR(EmbeddedStates(inputs, calibration, heldout));
  }
  const ModelConfig& config = inputs.checkpoint->config();
  // The same table the block task builds, so the rows are bit-identical.
  const RopeTable rope(config,
                       std::max(calibration->seq_len, heldout->seq_len));
  for (int b = start; b < block; ++b) {
    QUANT_ASSIGN_OR_RETURN(const BlockWeights weights,
                           LoadCheckedBlock(*inputs.checkpoint, b));
    calibration->rows = RunBlock(config, weights, rope, calibration->seq_len,
                                 calibration->rows);
    heldout->rows =
        RunBlock(config, weights, rope, heldout->seq_len, heldout->rows);
  }
  return absl::OkStatus();
}

}  // namespace

namespace {

// The windows' token ids, concatenated, and their layout.
HiddenStates WindowLayout(const TokenWindows& windows,
                          std::vector<int32_t>* ids) {
  for (const std::vector<int32_t>& sequence : windows.sequences) {
    ids->insert(ids->end(), sequence.begin(), sequence.end());
  }
  HiddenStates states;
  states.seq_len = windows.seq_len;
  states.lengths = windows.lengths;
  return states;
}

}  // namespace

absl::StatusOr<HiddenStates> EmbedWindows(const LlamaModel& model,
                                          const TokenWindows& windows) {
  std::vector<int32_t> ids;
  HiddenStates states = WindowLayout(windows, &ids);
  QUANT_ASSIGN_OR_RETURN(states.rows, model.Embed(ids));
  return states;
}

absl::StatusOr<HiddenStates> EmbedWindows(const RowMatrixF& embed_tokens,
                                          const TokenWindows& windows) {
  std::vector<int32_t> ids;
  HiddenStates states = WindowLayout(windows, &ids);
  QUANT_ASSIGN_OR_RETURN(states.rows, EmbedTokens(embed_tokens, ids));
  return states;
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
  Stage(control,
        absl::StrCat("computing the hidden states entering block ", block));
  HiddenStates calibration, heldout;
  QUANT_RETURN_IF_ERROR(
      EnteringStates(context, inputs, block, &calibration, &heldout));
  QUANT_ASSIGN_OR_RETURN(BlockWeights weights,
                         LoadCheckedBlock(*inputs.checkpoint, block));
  BlockTaskInput input =
      MakeBlockTaskInput(inputs, context.recipe, block, std::move(weights),
                         std::move(calibration), std::move(heldout));
  input.cancelled = control.cancelled;
  Stage(control, absl::StrCat("quantizing block ", block));
  QUANT_ASSIGN_OR_RETURN(BlockTaskOutput output,
                         RunBlockTask(input, control.on_layer));
  if (!IsDirectory(attempt_dir)) {
    absl::Status made = MakeDirectory(attempt_dir, context.file_system);
    if (!made.ok() && !absl::IsAlreadyExists(made)) return made;
  }
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
    QUANT_ASSIGN_OR_RETURN(StoredBlockOutput stored,
                           ReadBlockOutput(context.work_dir, b));
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
  finalize.max_shard_bytes = max_shard_bytes;
  finalize.file_system = context.file_system;
  QUANT_ASSIGN_OR_RETURN(
      FinalizeOutput out,
      RunFinalizeTask(std::move(finalize), control.on_stage));
  result.passed = out.gates.passed;
  result.audit = std::move(out.audit);
  return result;
}

}  // namespace quant

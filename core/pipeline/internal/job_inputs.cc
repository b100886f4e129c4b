// The steps of the block and finalize tasks; see job_inputs.h.
#include "core/pipeline/internal/job_inputs.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/file_util.h"
#include "core/base/status_macros.h"
#include "core/calib/calibration_file.h"
#include "core/calib/mixed_calibration.h"
#include "core/forward/outer_weights.h"
#include "core/model/linear_layers.h"
#include "core/pipeline/task_io.h"
#include "core/text/tokenizer.h"

namespace quant {
namespace pipeline_internal {

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
    const std::string& path, bool chunked, FileSystem* fs) {
  if (chunked) {
    QUANT_ASSIGN_OR_RETURN(std::unique_ptr<HiddenStateFile> file,
                           HiddenStateFile::Open(path, fs));
    return std::unique_ptr<HiddenStateSource>(std::move(file));
  }
  QUANT_ASSIGN_OR_RETURN(HiddenStates states, ReadHiddenStates(path, fs));
  return std::unique_ptr<HiddenStateSource>(
      std::make_unique<OwnedHiddenStateSource>(std::move(states)));
}

absl::Status OpenLeavingStates(const std::string& dir, int block, bool chunked,
                               FileSystem* fs,
                               std::unique_ptr<HiddenStateSource>* calibration,
                               std::unique_ptr<HiddenStateSource>* heldout) {
  const std::string prefix = BlockOutputPrefix(dir, block);
  QUANT_ASSIGN_OR_RETURN(
      *calibration, OpenHiddenStates(prefix + ".cal.safetensors", chunked, fs));
  QUANT_ASSIGN_OR_RETURN(
      *heldout, OpenHiddenStates(prefix + ".heldout.safetensors", chunked, fs));
  return absl::OkStatus();
}

namespace {

// The rows of the windows' sequences `range` (a chunk or a shard).
absl::StatusOr<RowMatrixF> EmbedSequences(const RowMatrixF& table,
                                          const TokenWindows& windows,
                                          SequenceRange range) {
  std::vector<int32_t> ids;
  for (int64_t i = range.first; i < range.first + range.count; ++i) {
    const std::vector<int32_t>& sequence = windows.sequences[i];
    ids.insert(ids.end(), sequence.begin(), sequence.end());
  }
  return EmbedTokens(table, ids);
}

absl::StatusOr<RowMatrixF> CheckedEmbeddingTable(const Checkpoint& checkpoint) {
  const std::string name = "model.embed_tokens.weight";
  QUANT_RETURN_IF_ERROR(checkpoint.CheckFinite(name));
  return ReadMatrix(checkpoint, name);
}

}  // namespace

absl::StatusOr<std::unique_ptr<HiddenStateSource>> EmbedShardStates(
    const JobInputs& inputs, bool calibration, SequenceRange range) {
  const TokenWindows& windows =
      calibration ? inputs.split.calibration : inputs.split.heldout;
  if (range.first < 0 || range.count < 0 ||
      range.first + range.count >
          static_cast<int64_t>(windows.sequences.size())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sequences [", range.first, ", ", range.first + range.count,
        ") are outside the split's ", windows.sequences.size()));
  }
  QUANT_ASSIGN_OR_RETURN(const RowMatrixF table,
                         CheckedEmbeddingTable(*inputs.checkpoint));
  HiddenStates states;
  states.seq_len = windows.seq_len;
  states.lengths.assign(windows.lengths.begin() + range.first,
                        windows.lengths.begin() + range.first + range.count);
  QUANT_ASSIGN_OR_RETURN(states.rows, EmbedSequences(table, windows, range));
  return std::unique_ptr<HiddenStateSource>(
      std::make_unique<OwnedHiddenStateSource>(std::move(states)));
}

absl::Status EmbedEnteringStates(
    const JobInputs& inputs, const std::string& calibration_spill,
    const std::string& heldout_spill, FileSystem* fs,
    std::unique_ptr<HiddenStateSource>* calibration,
    std::unique_ptr<HiddenStateSource>* heldout) {
  QUANT_ASSIGN_OR_RETURN(const RowMatrixF table,
                         CheckedEmbeddingTable(*inputs.checkpoint));
  auto embed = [&](const TokenWindows& windows, const std::string& spill) {
    return ProduceHiddenStates(
        windows.seq_len, windows.lengths, table.cols(),
        [&](SequenceRange chunk) {
          return EmbedSequences(table, windows, chunk);
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
                                        const TaskControl& control) {
  JobInputs inputs;
  if (control.on_stage) control.on_stage("opening the checkpoint");
  CheckpointOptions open_options;
  // The block tasks check the blocks they read; block 0's task checks
  // every tensor, so a job fails at its first task.
  open_options.check_finite = false;
  open_options.file_system = context.file_system;
  QUANT_ASSIGN_OR_RETURN(
      inputs.checkpoint,
      Checkpoint::Open(context.checkpoint_dir, open_options));
  QUANT_ASSIGN_OR_RETURN(
      inputs.plan,
      PlanQuantization(inputs.checkpoint->config(), context.recipe));
  if (!context.recipe.gates.compare_to.empty() &&
      !context.previous_dir.empty()) {
    if (control.on_stage) control.on_stage("opening the previous release");
    PreviousReleaseCheck check;
    check.verify_manifest = context.verify_previous_at_open;
    check.file_system = context.file_system;
    QUANT_ASSIGN_OR_RETURN(
        inputs.previous,
        OpenPreviousRelease(context.recipe.gates.compare_to,
                            context.previous_dir, inputs.checkpoint->config(),
                            check));
  }

  if (control.on_stage) control.on_stage("tokenizing the calibration set");
  inputs.tokenizer_dir = context.tokenizer_dir.empty() ? context.checkpoint_dir
                                                       : context.tokenizer_dir;
  QUANT_ASSIGN_OR_RETURN(
      inputs.tokenizer,
      Tokenizer::LoadFromDirectory(inputs.tokenizer_dir, context.file_system));
  // Read at every task's open, so that a bad file fails the job's first
  // task instead of its finalize.
  QUANT_ASSIGN_OR_RETURN(inputs.tasks, LoadGateTaskFile(context.recipe.gates,
                                                        context.file_system));
  if (inputs.tasks.has_value()) {
    if (!context.tasks_sha256.empty() &&
        inputs.tasks->sha256 != context.tasks_sha256) {
      return absl::DataLossError(absl::StrCat(
          "gates.tasks: ", context.recipe.gates.tasks, " has sha256 ",
          inputs.tasks->sha256, "; the job was submitted with ",
          context.tasks_sha256, " (changed since?)"));
    }
    QUANT_RETURN_IF_ERROR(CheckGateTasksFit(*inputs.tasks, *inputs.tokenizer,
                                            inputs.checkpoint->config()));
  }
  QUANT_ASSIGN_OR_RETURN(
      inputs.chat, ChatRenderer::Load(inputs.tokenizer_dir,
                                      ChatChoiceFromRecipe(context.recipe)));
  if (inputs.chat != nullptr && !context.chat_template_sha256.empty() &&
      inputs.chat->origin().sha256 != context.chat_template_sha256) {
    return absl::DataLossError(absl::StrCat(
        "calibration.chat_template: ", inputs.chat->origin().source,
        " has sha256 ", inputs.chat->origin().sha256,
        "; the job was submitted with ", context.chat_template_sha256,
        " (changed since?)"));
  }
  CalibrationSplitOptions split_options =
      SplitOptionsFromRecipe(context.recipe);
  split_options.chat = inputs.chat.get();
  if (context.calibration_sources.empty()) {
    QUANT_ASSIGN_OR_RETURN(
        CalibrationFile file,
        LoadCalibrationFile(context.calibration_path, {}, context.file_system));
    QUANT_ASSIGN_OR_RETURN(
        inputs.split,
        BuildCalibrationSplit(file, *inputs.tokenizer, split_options));
    return inputs;
  }
  std::vector<CalibrationFile> files;
  files.reserve(context.calibration_sources.size());
  for (size_t i = 0; i < context.calibration_sources.size(); ++i) {
    const CalibrationSourceFile& source = context.calibration_sources[i];
    absl::StatusOr<CalibrationFile> file =
        LoadCalibrationFile(source.path, {}, context.file_system);
    if (!file.ok()) {
      return absl::Status(file.status().code(),
                          absl::StrCat("calibration.sources[", i,
                                       "]: ", file.status().message()));
    }
    if (!source.sha256.empty() && file->sha256 != source.sha256) {
      // DataLoss as for a job's one set: not what the job was given.
      return absl::DataLossError(
          absl::StrCat("calibration.sources[", i, "]: ", source.path,
                       " has sha256 ", file->sha256, ", not ", source.sha256));
    }
    files.push_back(*std::move(file));
  }
  std::vector<WeightedCalibrationFile> mix;
  for (size_t i = 0; i < files.size(); ++i) {
    mix.push_back({&files[i], context.calibration_sources[i].weight});
  }
  QUANT_ASSIGN_OR_RETURN(
      inputs.split,
      BuildMixedCalibrationSplit(mix, *inputs.tokenizer, split_options));
  return inputs;
}

BlockTaskInput MakeBlockTaskInput(const JobInputs& inputs, const Recipe& recipe,
                                  int block, BlockWeights weights) {
  BlockTaskInput input;
  input.config = &inputs.checkpoint->config();
  input.recipe = &recipe;
  input.weights = std::move(weights);
  input.settings = inputs.plan.blocks[block];
  if (static_cast<size_t>(block) < inputs.plan.expert_blocks.size()) {
    input.expert_settings = inputs.plan.expert_blocks[block];
  }
  input.expert_policy = recipe.moe.value_or(MoeCalibration{});
  input.stored_dtypes = BlockDTypes(*inputs.checkpoint, block);
  return input;
}

bool BlockPublished(const std::string& work_dir, int block) {
  return FileExists(BlockOutputPrefix(work_dir, block) + ".layers.json");
}

}  // namespace pipeline_internal
}  // namespace quant

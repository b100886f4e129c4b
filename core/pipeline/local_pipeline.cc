// In-process driver of the block and finalize tasks.
#include "core/pipeline/local_pipeline.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/base/directory_util.h"
#include "core/base/file_util.h"
#include "core/base/status_macros.h"
#include "core/calib/calibration_split.h"
#include "core/model/checkpoint.h"
#include "core/pipeline/job_tasks.h"
#include "core/pipeline/task_io.h"

namespace quant {
namespace {

// What identifies a job's block outputs: a work directory is only reused
// for the same source, recipe and calibration set.
nlohmann::json JobIdentity(const Checkpoint& checkpoint, const Recipe& recipe,
                           const CalibrationSplit& split) {
  std::vector<std::string> files;
  for (const auto& file : checkpoint.tensors().files()) {
    files.push_back(file->path());
  }
  return {{"tool", ToolVersion()},
          {"source_files", files},
          {"recipe", RecipeToJson(recipe)},
          {"calibration_sha256", split.calibration_hash}};
}

absl::Status PrepareWorkDir(const std::string& dir,
                            const nlohmann::json& identity) {
  if (!IsDirectory(dir)) {
    absl::Status made = MakeDirectory(dir);
    if (!made.ok() && !absl::IsAlreadyExists(made)) return made;
  }
  const std::string path = JoinPath(dir, "job.json");
  if (!FileExists(path)) {
    return WriteFileAtomically(path, identity.dump(2) + "\n");
  }
  QUANT_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  if (nlohmann::json::parse(text, nullptr, false) != identity) {
    return absl::FailedPreconditionError(absl::StrCat(
        "work directory ", dir,
        " holds another job's blocks (source, recipe, calibration set or "
        "tool version differ); use a new one"));
  }
  return absl::OkStatus();
}

// Block `block`'s stored output: its tensors and layer results for the
// finalize task, the hidden states leaving it for the next block.
absl::Status ReadBackBlock(const std::string& work_dir, int block,
                           HiddenStates* calibration, HiddenStates* heldout,
                           FinalizeInput* finalize) {
  const std::string prefix = BlockOutputPrefix(work_dir, block);
  QUANT_ASSIGN_OR_RETURN(StoredBlockOutput stored,
                         ReadBlockOutput(work_dir, block));
  QUANT_ASSIGN_OR_RETURN(*calibration,
                         ReadHiddenStates(prefix + ".cal.safetensors"));
  QUANT_ASSIGN_OR_RETURN(*heldout,
                         ReadHiddenStates(prefix + ".heldout.safetensors"));
  finalize->block_tensors.push_back(std::move(stored.tensors));
  for (LayerResult& l : stored.layers) finalize->layers.push_back(std::move(l));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<LocalQuantizeResult> RunLocalQuantization(
    const LocalQuantizeOptions& options, PipelineObserver* observer) {
  PipelineObserver ignore;
  PipelineObserver& obs = observer != nullptr ? *observer : ignore;
  const Recipe& recipe = options.recipe;
  if (FileExists(options.out_dir) || IsDirectory(options.out_dir)) {
    return absl::AlreadyExistsError(absl::StrCat(
        "output ", options.out_dir, " already exists; choose a new path"));
  }

  JobTaskContext context;
  context.checkpoint_dir = options.checkpoint_dir;
  context.tokenizer_dir = options.tokenizer_dir;
  context.calibration_path = options.calibration_path;
  context.recipe = recipe;
  context.work_dir = options.work_dir;
  TaskControl control;
  control.on_stage = [&](const std::string& what) { obs.OnStage(what); };
  QUANT_ASSIGN_OR_RETURN(JobInputs inputs, OpenJobInputs(context, control));
  const Checkpoint* checkpoint = inputs.checkpoint.get();
  const ModelConfig& config = checkpoint->config();
  const CalibrationSplit& split = inputs.split;
  QUANT_ASSIGN_OR_RETURN(HiddenStates calibration,
                         EmbedWindows(*inputs.model, split.calibration));
  QUANT_ASSIGN_OR_RETURN(HiddenStates heldout,
                         EmbedWindows(*inputs.model, split.heldout));

  const bool use_files = !options.work_dir.empty();
  if (use_files) {
    QUANT_RETURN_IF_ERROR(PrepareWorkDir(
        options.work_dir, JobIdentity(*checkpoint, recipe, split)));
  }
  FinalizeInput finalize;
  const int blocks = config.num_hidden_layers;
  for (int b = 0; b < blocks; ++b) {
    if (use_files &&
        FileExists(BlockOutputPrefix(options.work_dir, b) + ".layers.json")) {
      obs.OnBlockResumed(b, blocks);
      QUANT_RETURN_IF_ERROR(ReadBackBlock(options.work_dir, b, &calibration,
                                          &heldout, &finalize));
      continue;
    }
    obs.OnBlockStart(b, blocks);
    const auto start = std::chrono::steady_clock::now();
    const BlockTaskInput input =
        MakeBlockTaskInput(inputs, recipe, b, inputs.model->block(b),
                           std::move(calibration), std::move(heldout));
    QUANT_ASSIGN_OR_RETURN(
        BlockTaskOutput output,
        RunBlockTask(input, [&](const LayerResult& l) { obs.OnLayer(l); }));
    if (use_files) {
      // Through the files, exactly as the next worker would see them.
      QUANT_RETURN_IF_ERROR(WriteBlockOutput(options.work_dir, output));
      QUANT_RETURN_IF_ERROR(ReadBackBlock(options.work_dir, b, &calibration,
                                          &heldout, &finalize));
    } else {
      calibration = std::move(output.calibration_out);
      heldout = std::move(output.heldout_out);
      finalize.block_tensors.push_back(std::move(output.tensors));
      for (LayerResult& l : output.layers) {
        l.layer = QuantizedLayer();  // Packed already; keep the audit only.
        finalize.layers.push_back(std::move(l));
      }
    }
    obs.OnBlockDone(
        b, blocks,
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count());
  }

  // The gates read the source a block at a time: the float model has done
  // its part.
  inputs.model.reset();
  finalize.source = checkpoint;
  finalize.recipe = &recipe;
  finalize.split = &split;
  finalize.tokenizer_dir = inputs.tokenizer_dir;
  finalize.out_dir = options.out_dir;
  finalize.max_shard_bytes = options.max_shard_bytes;
  finalize.eval_batch_windows = options.eval_batch_windows;
  QUANT_ASSIGN_OR_RETURN(
      FinalizeOutput out,
      RunFinalizeTask(std::move(finalize),
                      [&](const std::string& what) { obs.OnStage(what); }));
  LocalQuantizeResult result;
  result.passed = out.gates.passed;
  result.audit = std::move(out.audit);
  result.manifest = std::move(out.manifest);
  result.warnings = std::move(inputs.plan.warnings);
  return result;
}

}  // namespace quant

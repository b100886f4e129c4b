// In-process driver of the block and finalize tasks.
#include "core/pipeline/local_pipeline.h"

#include <stdlib.h>

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/base/directory_util.h"
#include "core/base/file_util.h"
#include "core/base/status_macros.h"
#include "core/calib/calibration_split.h"
#include "core/kernels/dispatch.h"
#include "core/model/checkpoint.h"
#include "core/pipeline/job_tasks.h"
#include "core/pipeline/task_io.h"

namespace quant {
namespace {

// What identifies a job's block outputs: a work directory is only reused
// for the same source, recipe, calibration set and kernel level.
nlohmann::json JobIdentity(const Checkpoint& checkpoint, const Recipe& recipe,
                           const CalibrationSplit& split) {
  std::vector<std::string> files;
  for (const auto& file : checkpoint.tensors().files()) {
    files.push_back(file->path());
  }
  return {{"tool", ToolVersion()},
          {"source_files", files},
          {"recipe", RecipeToJson(recipe)},
          {"calibration_sha256", split.calibration_hash},
          {"isa", std::string(kernels::IsaName(kernels::CurrentIsa()))}};
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
    const nlohmann::json stored = nlohmann::json::parse(text, nullptr, false);
    if (stored.is_object() && stored.contains("isa") &&
        stored["isa"] != identity["isa"]) {
      return absl::FailedPreconditionError(absl::StrCat(
          "work directory ", dir, " holds blocks computed with ",
          stored["isa"].dump(), " kernels, this run uses ",
          identity["isa"].dump(),
          ": rerun with that --isa to resume, or use a new work directory"));
    }
    return absl::FailedPreconditionError(absl::StrCat(
        "work directory ", dir,
        " holds another job's blocks (source, recipe, calibration set, "
        "kernel level or tool version differ); use a new one"));
  }
  return absl::OkStatus();
}

// Block `block`'s stored tensors and layer results, for the finalize task.
absl::Status ReadBackBlock(const std::string& work_dir, int block,
                           FinalizeInput* finalize) {
  QUANT_ASSIGN_OR_RETURN(StoredBlockOutput stored,
                         ReadBlockOutput(work_dir, block));
  finalize->block_tensors.push_back(std::move(stored.tensors));
  for (LayerResult& l : stored.layers) finalize->layers.push_back(std::move(l));
  return absl::OkStatus();
}

// A folder for hidden states that exceed the memory bound when no work
// directory was given: beside the output, removed with this object.
class SpillDirectory {
 public:
  absl::Status Create(const std::string& out_dir) {
    std::string pattern = out_dir;
    while (pattern.size() > 1 && pattern.back() == '/') pattern.pop_back();
    pattern += ".activations-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) {
      return absl::PermissionDeniedError(absl::StrCat(
          "cannot create a folder for spilled activations at ", pattern));
    }
    path_ = pattern;
    return absl::OkStatus();
  }
  ~SpillDirectory() {
    if (!path_.empty()) (void)RemoveTree(path_);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

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
  const bool use_files = !options.work_dir.empty();
  if (use_files) {
    QUANT_RETURN_IF_ERROR(PrepareWorkDir(
        options.work_dir, JobIdentity(*checkpoint, recipe, split)));
  }
  // Over the bound, the hidden states between blocks stay in files (the
  // work directory's block outputs, or spill files) read a chunk at a time.
  const bool spill = BlockStateBytes(inputs) > options.max_activation_bytes;
  // A block's own kept activations (block_task.h) beyond the bound go to
  // files too: in the work directory, else the spill folder.
  const int64_t state_rows =
      BlockStateBytes(inputs) /
      (static_cast<int64_t>(sizeof(float)) * config.hidden_size);
  const bool stash_in_files =
      BlockStashBytes(config, state_rows) > options.max_activation_bytes;
  SpillDirectory spill_dir;
  if ((spill || stash_in_files) && !use_files) {
    QUANT_RETURN_IF_ERROR(spill_dir.Create(options.out_dir));
  }
  const std::string& files_dir =
      use_files ? options.work_dir : spill_dir.path();
  if (spill) {
    obs.OnStage(DescribeSpill(BlockStateBytes(inputs),
                              options.max_activation_bytes, files_dir));
  }
  std::unique_ptr<HiddenStateSource> calibration, heldout;
  QUANT_RETURN_IF_ERROR(EmbedEnteringStates(
      inputs, spill ? JoinPath(files_dir, "embedded.cal.safetensors") : "",
      spill ? JoinPath(files_dir, "embedded.heldout.safetensors") : "",
      FileSystem::Default(), &calibration, &heldout));

  FinalizeInput finalize;
  const int blocks = config.num_hidden_layers;
  for (int b = 0; b < blocks; ++b) {
    if (use_files &&
        FileExists(BlockOutputPrefix(options.work_dir, b) + ".layers.json")) {
      obs.OnBlockResumed(b, blocks);
      QUANT_RETURN_IF_ERROR(ReadBackBlock(options.work_dir, b, &finalize));
      // Written by an earlier run: checked before it is built on.
      QUANT_RETURN_IF_ERROR(
          VerifyBlockFile(options.work_dir, b, ".cal.safetensors"));
      QUANT_RETURN_IF_ERROR(
          VerifyBlockFile(options.work_dir, b, ".heldout.safetensors"));
      QUANT_RETURN_IF_ERROR(OpenLeavingStates(options.work_dir, b, spill,
                                              &calibration, &heldout));
      continue;
    }
    obs.OnBlockStart(b, blocks);
    const auto start = std::chrono::steady_clock::now();
    BlockTaskInput input =
        MakeBlockTaskInput(inputs, recipe, b, inputs.model->block(b), {}, {});
    input.calibration_source = calibration.get();
    input.heldout_source = heldout.get();
    input.threads = options.threads;
    input.stash_dir = use_files ? options.work_dir : spill_dir.path();
    input.max_stash_bytes = options.max_activation_bytes;
    // Files: the leaving states go straight to them.
    std::unique_ptr<HiddenStateFileWriter> calibration_out, heldout_out;
    if (use_files || spill) {
      const std::string prefix = BlockOutputPrefix(files_dir, b);
      QUANT_ASSIGN_OR_RETURN(
          calibration_out,
          HiddenStateFileWriter::Create(
              prefix + ".cal.safetensors", calibration->seq_len(),
              calibration->lengths(), config.hidden_size));
      QUANT_ASSIGN_OR_RETURN(
          heldout_out, HiddenStateFileWriter::Create(
                           prefix + ".heldout.safetensors", heldout->seq_len(),
                           heldout->lengths(), config.hidden_size));
      input.calibration_sink = calibration_out.get();
      input.heldout_sink = heldout_out.get();
    }
    QUANT_ASSIGN_OR_RETURN(
        BlockTaskOutput output,
        RunBlockTask(input, [&](const LayerResult& l) { obs.OnLayer(l); }));
    if (use_files) {
      // Through the files, exactly as the next worker would see them.
      QUANT_RETURN_IF_ERROR(WriteBlockOutput(options.work_dir, output));
      QUANT_RETURN_IF_ERROR(ReadBackBlock(options.work_dir, b, &finalize));
      QUANT_RETURN_IF_ERROR(OpenLeavingStates(options.work_dir, b, spill,
                                              &calibration, &heldout));
    } else {
      if (spill) {
        QUANT_RETURN_IF_ERROR(OpenLeavingStates(spill_dir.path(), b, true,
                                                &calibration, &heldout));
        // The states entering this block are no longer needed.
        const std::string previous =
            b == 0 ? JoinPath(spill_dir.path(), "embedded")
                   : BlockOutputPrefix(spill_dir.path(), b - 1);
        (void)FileSystem::Default()->RemoveFile(previous + ".cal.safetensors");
        (void)FileSystem::Default()->RemoveFile(previous +
                                                ".heldout.safetensors");
      } else {
        calibration = std::make_unique<OwnedHiddenStateSource>(
            std::move(output.calibration_out));
        heldout = std::make_unique<OwnedHiddenStateSource>(
            std::move(output.heldout_out));
      }
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
  calibration.reset();
  heldout.reset();

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
  finalize.threads = options.threads;
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

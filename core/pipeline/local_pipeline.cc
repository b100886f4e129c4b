// The in-process executor of a job's task plan: the service's block tasks
// in order, then its finalize task, in one process.
#include "core/pipeline/local_pipeline.h"

#include <stdlib.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/base/directory_util.h"
#include "core/base/file_uri.h"
#include "core/base/file_util.h"
#include "core/base/status_macros.h"
#include "core/base/strict_json.h"
#include "core/calib/calibration_split.h"
#include "core/kernels/dispatch.h"
#include "core/model/checkpoint.h"
#include "core/pipeline/internal/job_inputs.h"
#include "core/pipeline/job_tasks.h"
#include "core/pipeline/previous_release.h"
#include "core/pipeline/task_io.h"

namespace quant {
namespace {

using pipeline_internal::BlockPublished;
using pipeline_internal::JobInputs;
using pipeline_internal::OpenJobInputs;
using pipeline_internal::RunBlockJobTaskOnInputs;
using pipeline_internal::RunFinalizeJobTaskOnInputs;

// The recipe's calibration.sources as files this process reads; none when
// the recipe names none. A local run reads files: a source named only by
// the sha256 of a set uploaded to quantd is refused, as is a --calibration
// beside sources.
absl::StatusOr<std::vector<CalibrationSourceFile>> LocalCalibrationSources(
    const Recipe& recipe, const std::string& calibration_path) {
  std::vector<CalibrationSourceFile> files;
  const std::vector<CalibrationSource>& sources = recipe.calibration.sources;
  if (sources.empty()) {
    if (calibration_path.empty()) {
      return absl::InvalidArgumentError(
          "no calibration set: give one, or name calibration.sources in the "
          "recipe");
    }
    return files;
  }
  if (!calibration_path.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the recipe names calibration.sources (", sources.size(),
                     " sets) and a calibration set was given too (",
                     calibration_path, "); use one or the other"));
  }
  for (size_t i = 0; i < sources.size(); ++i) {
    const CalibrationSource& source = sources[i];
    const std::string field = absl::StrCat("calibration.sources[", i, "]");
    if (source.file.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, ": sha256 ", source.sha256,
          " names a set uploaded to quantd; a local run needs its file"));
    }
    std::string path = source.file;
    if (absl::StartsWith(path, kFileUriScheme)) {
      QUANT_ASSIGN_OR_RETURN(path, FileUriPath(source.file, field + ".file"));
    }
    files.push_back({path, source.sha256, source.weight});
  }
  return files;
}

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
                            const nlohmann::json& identity, FileSystem* fs) {
  if (!IsDirectory(dir)) {
    absl::Status made = MakeDirectory(dir, fs);
    if (!made.ok() && !absl::IsAlreadyExists(made)) return made;
  }
  const std::string path = JoinPath(dir, "job.json");
  if (!FileExists(path)) {
    return WriteFileAtomically(path, identity.dump(2) + "\n", fs);
  }
  QUANT_ASSIGN_OR_RETURN(std::string text, fs->ReadFile(path, size_t{1} << 20));
  if (ParseJsonOrDiscarded(text) != identity) {
    const nlohmann::json stored = ParseJsonOrDiscarded(text);
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

// The job's work directory: the one the user gave (kept, so a rerun
// resumes), or a temporary one beside the output, removed with this object.
class WorkDirectory {
 public:
  explicit WorkDirectory(FileSystem* fs) : fs_(fs) {}
  WorkDirectory(const WorkDirectory&) = delete;
  WorkDirectory& operator=(const WorkDirectory&) = delete;
  ~WorkDirectory() {
    if (temporary_) (void)RemoveTree(path_, fs_);
  }

  absl::Status UseGiven(const std::string& dir,
                        const nlohmann::json& identity) {
    QUANT_RETURN_IF_ERROR(PrepareWorkDir(dir, identity, fs_));
    path_ = dir;
    return absl::OkStatus();
  }
  // Named after the hidden states it mostly holds.
  absl::Status CreateTemporary(const std::string& out_dir) {
    std::string pattern = out_dir;
    while (pattern.size() > 1 && pattern.back() == '/') pattern.pop_back();
    absl::StatusOr<std::string> made =
        fs_->MakeTemporaryDirectory(pattern + ".activations-");
    if (!made.ok()) {
      return absl::Status(
          made.status().code(),
          absl::StrCat("cannot create a folder for the blocks' hidden states: ",
                       made.status().message()));
    }
    path_ = *std::move(made);
    temporary_ = true;
    return absl::OkStatus();
  }

  const std::string& path() const { return path_; }
  bool temporary() const { return temporary_; }

 private:
  FileSystem* fs_;
  std::string path_;
  bool temporary_ = false;
};

// Progress from the tasks to the observer. The tasks describe their own
// steps; a description already given (the spill notice every block task
// repeats) is not repeated.
class StageReporter {
 public:
  explicit StageReporter(PipelineObserver* observer) : observer_(observer) {}
  void Report(const std::string& what) {
    if (reported_.insert(what).second) observer_->OnStage(what);
  }

 private:
  PipelineObserver* observer_;
  std::set<std::string> reported_;
};

// The leaving states of a block no later task reads any more (the next
// block's task has published its own): removed from a temporary work
// directory, so that it holds at most two blocks' states.
void RemoveLeavingStates(const std::string& work_dir, int block,
                         FileSystem* fs) {
  const std::string prefix = BlockOutputPrefix(work_dir, block);
  (void)fs->RemoveFile(prefix + ".cal.safetensors");
  (void)fs->RemoveFile(prefix + ".heldout.safetensors");
}

}  // namespace

absl::StatusOr<LocalQuantizeResult> RunLocalQuantization(
    const LocalQuantizeOptions& options, PipelineObserver* observer) {
  PipelineObserver ignore;
  PipelineObserver& obs = observer != nullptr ? *observer : ignore;
  if (FileExists(options.out_dir) || IsDirectory(options.out_dir)) {
    return absl::AlreadyExistsError(absl::StrCat(
        "output ", options.out_dir, " already exists; choose a new path"));
  }
  JobTaskContext context;
  context.checkpoint_dir = options.checkpoint_dir;
  context.tokenizer_dir = options.tokenizer_dir;
  context.calibration_path = options.calibration_path;
  QUANT_ASSIGN_OR_RETURN(
      context.calibration_sources,
      LocalCalibrationSources(options.recipe, options.calibration_path));
  context.recipe = options.recipe;
  context.file_system = options.file_system;
  context.max_activation_bytes = options.max_activation_bytes;
  context.threads = options.threads;
  context.eval_batch_windows = options.eval_batch_windows;
  StageReporter stages(&obs);
  TaskControl control;
  control.on_stage = [&](const std::string& what) { stages.Report(what); };
  control.on_layer = [&](const LayerResult& l) { obs.OnLayer(l); };
  // The observer hears of each block (OnBlockStart, OnBlockDone).
  control.announce_block_steps = false;

  // Opened once for every task; a bad recipe or calibration set fails here,
  // before anything is written. So is a previous release to compare with
  // that is missing, damaged (its files are hashed here, once for the run)
  // or of another model.
  if (!options.recipe.gates.compare_to.empty()) {
    QUANT_ASSIGN_OR_RETURN(
        context.previous_dir,
        LocalPreviousReleaseDir(options.recipe.gates.compare_to));
    context.verify_previous_at_open = true;
  }
  QUANT_ASSIGN_OR_RETURN(const JobInputs inputs,
                         OpenJobInputs(context, control));
  WorkDirectory work(options.file_system);
  if (!options.work_dir.empty()) {
    QUANT_RETURN_IF_ERROR(work.UseGiven(
        options.work_dir,
        JobIdentity(*inputs.checkpoint, options.recipe, inputs.split)));
  } else {
    QUANT_RETURN_IF_ERROR(work.CreateTemporary(options.out_dir));
  }
  context.work_dir = work.path();
  // Every block task writes its attempt here; removed after each.
  const std::string attempt_dir = JoinPath(work.path(), "attempt");

  // The task plan, in order: the block tasks, then the finalize.
  const int blocks = inputs.checkpoint->config().num_hidden_layers;
  for (int b = 0; b < blocks; ++b) {
    if (BlockPublished(work.path(), b)) {
      // Published by an earlier run; the next task checks what it reads.
      obs.OnBlockResumed(b, blocks);
      continue;
    }
    obs.OnBlockStart(b, blocks);
    const auto start = std::chrono::steady_clock::now();
    absl::Status ran =
        RunBlockJobTaskOnInputs(context, inputs, b, attempt_dir, control);
    (void)RemoveTree(attempt_dir, options.file_system);
    QUANT_RETURN_IF_ERROR(ran);
    if (work.temporary() && b > 0) {
      RemoveLeavingStates(work.path(), b - 1, options.file_system);
    }
    obs.OnBlockDone(
        b, blocks,
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count());
  }
  QUANT_ASSIGN_OR_RETURN(
      FinalizeJobResult out,
      RunFinalizeJobTaskOnInputs(context, inputs, options.out_dir,
                                 options.max_shard_bytes, control));
  LocalQuantizeResult result;
  result.passed = out.passed;
  result.audit = std::move(out.audit);
  result.manifest = std::move(out.manifest);
  result.warnings = inputs.plan.warnings;
  return result;
}

}  // namespace quant

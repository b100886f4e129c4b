// The pack, gate-part and finalize tasks of a finalize run in parts: where
// their files live in the job's work directory, and how each survives a
// retry.
#include "core/pipeline/finalize_part_tasks.h"

#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/directory_util.h"
#include "core/base/file_util.h"
#include "core/base/status_macros.h"
#include "core/pipeline/internal/job_inputs.h"
#include "core/pipeline/round_job_tasks.h"

namespace quant {
namespace {

void Stage(const TaskControl& control, const std::string& what) {
  if (control.on_stage) control.on_stage(what);
}

}  // namespace

std::string StagedFinalizeDir() { return "finalize-staged"; }

std::string StagedFinalizeRecordFile() {
  // finalize_task.h: the record lies beside the directory it describes.
  return absl::StrCat(StagedFinalizeDir(), ".staged.json");
}

std::string GatePartFile(int part) {
  return absl::StrCat("gate-part-", part, ".safetensors");
}

std::pair<int64_t, int64_t> GatePartBatches(int64_t batches, int part,
                                            int parts) {
  const int64_t first = batches * part / parts;
  const int64_t end = batches * (part + 1) / parts;
  return {first, end - first};
}

absl::StatusOr<std::string> RunFinalizePackJobTask(
    const JobTaskContext& context, const std::string& attempt_dir,
    int64_t max_shard_bytes, const TaskControl& control) {
  FileSystem* const fs = context.file_system;
  const std::string staged = JoinPath(context.work_dir, StagedFinalizeDir());
  const std::string record =
      JoinPath(context.work_dir, StagedFinalizeRecordFile());
  const std::string attempt_staged = JoinPath(attempt_dir, "staged");
  QUANT_RETURN_IF_ERROR(RemoveTree(attempt_staged, fs));
  QUANT_RETURN_IF_ERROR(fs->RemoveFile(attempt_staged + ".staged.json"));
  QUANT_RETURN_IF_ERROR(
      StageFinalizeJobTask(context, attempt_staged, max_shard_bytes, control));
  Stage(control, "publishing the staged checkpoint");
  // What an earlier attempt published is replaced, not trusted: this task
  // also runs again when a reader found the record changed on disk. Every
  // attempt stages the same bytes. The record goes first, so that a crash
  // in between leaves a directory without its record: unfinished.
  QUANT_RETURN_IF_ERROR(fs->RemoveFile(record));
  QUANT_RETURN_IF_ERROR(RemoveTree(staged, fs));
  QUANT_RETURN_IF_ERROR(fs->RenameFile(attempt_staged, staged));
  QUANT_RETURN_IF_ERROR(
      fs->RenameFile(attempt_staged + ".staged.json", record));
  QUANT_RETURN_IF_ERROR(SyncDirectory(context.work_dir, fs));
  return record;
}

absl::StatusOr<std::string> RunGatePartJobTask(const JobTaskContext& context,
                                               int part, int parts,
                                               const TaskControl& control) {
  if (parts < 1 || part < 0 || part >= parts) {
    return absl::InvalidArgumentError(
        absl::StrCat("gate part ", part, " of ", parts, " does not exist"));
  }
  QUANT_RETURN_IF_ERROR(
      VerifyRoundFile(context, StagedFinalizeRecordFile()).status());
  QUANT_ASSIGN_OR_RETURN(const int64_t batches,
                         FinalizeJobEvaluationBatches(context, control));
  const auto [first, count] = GatePartBatches(batches, part, parts);
  const std::string path = JoinPath(context.work_dir, GatePartFile(part));
  QUANT_RETURN_IF_ERROR(ScoreFinalizeJobPart(
      context, JoinPath(context.work_dir, StagedFinalizeDir()), first, count,
      path, control));
  return path;
}

absl::StatusOr<FinalizeJobResult> RunFinalizeFromPartsJobTask(
    const JobTaskContext& context, int parts, const std::string& artifact_dir,
    const TaskControl& control) {
  QUANT_ASSIGN_OR_RETURN(
      std::optional<FinalizeJobResult> published,
      pipeline_internal::PublishedFinalizeResult(context, artifact_dir));
  if (published.has_value()) return *std::move(published);
  if (parts < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("a finalize from parts needs one at least, got ", parts));
  }
  QUANT_RETURN_IF_ERROR(
      VerifyRoundFile(context, StagedFinalizeRecordFile()).status());
  std::vector<std::string> paths;
  for (int part = 0; part < parts; ++part) {
    QUANT_RETURN_IF_ERROR(
        VerifyRoundFile(context, GatePartFile(part)).status());
    paths.push_back(JoinPath(context.work_dir, GatePartFile(part)));
  }
  return CompleteFinalizeJobTask(
      context, JoinPath(context.work_dir, StagedFinalizeDir()), paths,
      artifact_dir, control);
}

}  // namespace quant

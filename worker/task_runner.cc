// RunTask: a leased task through core/pipeline/job_tasks.
#include "worker/task_runner.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/recipe_convert.h"
#include "core/base/directory_util.h"
#include "core/base/file_uri.h"
#include "core/base/file_util.h"
#include "core/base/sha256.h"
#include "core/pipeline/audit_report.h"
#include "core/pipeline/finalize_part_tasks.h"
#include "core/pipeline/job_tasks.h"
#include "core/pipeline/round_job_tasks.h"
#include "core/pipeline/task_io.h"
#include "google/protobuf/util/json_util.h"

namespace quant::worker {
namespace {

// mkdir -p for the job's directories (the artifact root exists).
absl::Status MakeDirectories(const std::string& path) {
  if (path.empty() || IsDirectory(path)) return absl::OkStatus();
  if (absl::Status s = MakeDirectories(ParentDirectory(path)); !s.ok()) {
    return s;
  }
  absl::Status made = MakeDirectory(path);
  if (!made.ok() && !absl::IsAlreadyExists(made)) return made;
  return absl::OkStatus();
}

absl::StatusOr<v1::LayerAudit> AuditProto(const LayerResult& layer) {
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;
  v1::LayerAudit audit;
  auto status = google::protobuf::util::JsonStringToMessage(
      LayerResultToJson(layer).dump(), &audit, options);
  if (!status.ok()) {
    return absl::InternalError(
        absl::StrCat(layer.name, ": audit: ", status.ToString()));
  }
  return audit;
}

// A round task (core/pipeline/round_job_tasks.h): its one published file,
// or nothing for a shard past its split's end.
absl::StatusOr<TaskOutcome> RunRoundTask(const v1::Task& task,
                                         const JobTaskContext& context,
                                         const TaskControl& control) {
  absl::StatusOr<std::string> attempt =
      FileUriPath(task.attempt_uri(), "attempt_uri");
  if (!attempt.ok()) return attempt.status();
  if (absl::Status s = MakeDirectories(*attempt); !s.ok()) return s;
  const bool sharded = task.kind() != v1::TASK_KIND_REDUCE;
  if (sharded && task.split() != v1::TASK_SPLIT_CALIBRATION &&
      task.split() != v1::TASK_SPLIT_HELDOUT) {
    return absl::InvalidArgumentError(
        absl::StrCat("split: a shard task needs one, got ", task.split()));
  }
  const bool calibration = task.split() == v1::TASK_SPLIT_CALIBRATION;
  absl::StatusOr<std::string> published;
  std::string expected;
  switch (task.kind()) {
    case v1::TASK_KIND_SHARD_STATS:
      expected = ShardStatisticsFile(task.block(), task.group(), calibration,
                                     task.shard());
      published = RunShardStatisticsJobTask(context, task.block(), task.group(),
                                            calibration, task.shard(), *attempt,
                                            control);
      break;
    case v1::TASK_KIND_REDUCE: {
      std::optional<LayerType> layer;
      if (!task.layer().empty()) {
        layer = LayerTypeFromName(task.layer());
        if (!layer.has_value()) {
          return absl::InvalidArgumentError(
              absl::StrCat("layer: \"", task.layer().substr(0, 32),
                           "\" is not a linear layer's type name"));
        }
      }
      published = RunRoundReduceJobTask(context, task.block(), task.group(),
                                        layer, *attempt, control);
      break;
    }
    default:
      expected = ShardOutputFile(task.block(), calibration, task.shard());
      published = RunShardOutputJobTask(context, task.block(), calibration,
                                        task.shard(), *attempt, control);
      break;
  }
  if (!published.ok()) return published.status();
  (void)RemoveTree(*attempt);
  TaskOutcome outcome;
  if (published->empty()) {
    outcome.empty_shard = true;
    outcome.output_uri =
        absl::StrCat("file://", JoinPath(context.work_dir, expected));
    return outcome;
  }
  const std::string path = JoinPath(context.work_dir, *published);
  // The last reduce publishes the block as a block task does: its output is
  // the block's prefix, its marker layers.json.
  outcome.output_uri = absl::StrCat(
      "file://", *published == BlockLayersFile(task.block())
                     ? BlockOutputPrefix(context.work_dir, task.block())
                     : path);
  absl::StatusOr<std::string> marker = Sha256File(path);
  if (!marker.ok()) return marker.status();
  outcome.output_sha256 = *std::move(marker);
  return outcome;
}

}  // namespace

bool IsRetryable(const absl::Status& status) {
  // ResourceExhausted is a full disk or a file-size limit on a write:
  // another attempt on the same artifact store fails the same way, after
  // hiding the cause behind a count of attempts.
  return !(absl::IsInvalidArgument(status) || absl::IsNotFound(status) ||
           absl::IsDataLoss(status) || absl::IsUnimplemented(status) ||
           absl::IsOutOfRange(status) || absl::IsResourceExhausted(status));
}

absl::StatusOr<TaskOutcome> RunTask(const v1::Task& task,
                                    const TaskProgressSink& sink,
                                    const std::atomic<bool>* cancelled,
                                    const TaskLimits& limits) {
  JobTaskContext context;
  context.job_id = task.job_id();
  context.max_activation_bytes = limits.max_activation_bytes;
  context.threads = limits.threads;
  context.inputs_cache = limits.inputs_cache;
  context.shard_stashes = limits.shard_stashes;
  context.round_blocks = limits.round_blocks;
  context.file_digests = limits.file_digests;
  context.round_layer_reduces = task.round_layer_reduces();
  context.round_heldout_later = task.round_heldout_later();
  absl::StatusOr<std::string> path =
      FileUriPath(task.checkpoint_uri(), "checkpoint_uri");
  if (!path.ok()) return path.status();
  context.checkpoint_dir = *path;
  for (int i = 0; i < task.calibration_sources_size(); ++i) {
    const v1::CalibrationSourceRef& source = task.calibration_sources(i);
    path = FileUriPath(source.uri(),
                       absl::StrCat("calibration_sources[", i, "].uri"));
    if (!path.ok()) return path.status();
    // OpenJobInputs checks each file against its sha256 as it reads it.
    context.calibration_sources.push_back(
        {*path, source.sha256(), source.weight()});
  }
  if (context.calibration_sources.empty()) {
    path = FileUriPath(task.calibration_uri(), "calibration_uri");
    if (!path.ok()) return path.status();
    context.calibration_path = *path;
  }
  path = FileUriPath(task.work_uri(), "work_uri");
  if (!path.ok()) return path.status();
  context.work_dir = *path;
  if (!task.previous_uri().empty()) {
    path = FileUriPath(task.previous_uri(), "previous_uri");
    if (!path.ok()) return path.status();
    context.previous_dir = *path;
  }
  for (const auto& [block, sha256] : task.block_output_sha256()) {
    context.block_output_sha256[block] = sha256;
  }
  for (const auto& [name, sha256] : task.round_file_sha256()) {
    context.round_file_sha256[name] = sha256;
  }
  absl::StatusOr<Recipe> recipe = common::RecipeFromProto(task.recipe());
  if (!recipe.ok()) return recipe.status();
  context.recipe = *std::move(recipe);
  context.chat_template_sha256 = task.chat_template_sha256();
  context.tasks_sha256 = task.tasks_sha256();

  // The set the job was submitted with, not one replaced since.
  if (context.calibration_sources.empty()) {
    absl::StatusOr<std::string> sha256 = Sha256File(context.calibration_path);
    if (!sha256.ok()) return sha256.status();
    if (*sha256 != task.calibration_sha256()) {
      return absl::DataLossError(absl::StrCat(
          "calibration_uri: ", context.calibration_path, " has sha256 ",
          *sha256, ", the job was submitted with ", task.calibration_sha256()));
    }
  }
  if (absl::Status s = MakeDirectories(context.work_dir); !s.ok()) return s;

  absl::Status layer_error;
  TaskControl control;
  control.cancelled = cancelled;
  control.on_stage = sink.on_stage;
  // A layer's audit row to the sink; false (the error kept) when it does
  // not convert.
  auto report = [&](const LayerResult& layer) {
    absl::StatusOr<v1::LayerAudit> audit = AuditProto(layer);
    if (!audit.ok()) {
      layer_error.Update(audit.status());
      return false;
    }
    if (sink.on_layer) sink.on_layer(*audit);
    return true;
  };
  // A layer another task quantized, its audit completed here: its work is
  // that task's.
  control.on_audited = [&](const LayerResult& layer) { report(layer); };
  control.on_layer = [&](const LayerResult& layer) {
    if (report(layer) && sink.on_core_work) {
      sink.on_core_work(layer.choices.hessian_flops,
                        layer.choices.hessian_seconds, layer.choices.gptq_flops,
                        layer.choices.gptq_seconds);
    }
  };

  TaskOutcome outcome;
  if (task.kind() == v1::TASK_KIND_BLOCK) {
    absl::StatusOr<std::string> attempt =
        FileUriPath(task.attempt_uri(), "attempt_uri");
    if (!attempt.ok()) return attempt.status();
    if (absl::Status s = MakeDirectories(*attempt); !s.ok()) return s;
    if (absl::Status s =
            RunBlockJobTask(context, task.block(), *attempt, control);
        !s.ok()) {
      return s;
    }
    if (!layer_error.ok()) return layer_error;
    // The attempt's area is empty once published.
    (void)RemoveTree(*attempt);
    const std::string prefix =
        BlockOutputPrefix(context.work_dir, task.block());
    outcome.output_uri = absl::StrCat("file://", prefix);
    absl::StatusOr<std::string> marker = Sha256File(prefix + ".layers.json");
    if (!marker.ok()) return marker.status();
    outcome.output_sha256 = *std::move(marker);
    return outcome;
  }
  if (task.kind() == v1::TASK_KIND_SHARD_STATS ||
      task.kind() == v1::TASK_KIND_REDUCE ||
      task.kind() == v1::TASK_KIND_SHARD_OUTPUT) {
    absl::StatusOr<TaskOutcome> round = RunRoundTask(task, context, control);
    if (round.ok() && !layer_error.ok()) return layer_error;
    return round;
  }
  if (task.kind() == v1::TASK_KIND_FINALIZE_PACK ||
      task.kind() == v1::TASK_KIND_GATE_PART) {
    absl::StatusOr<std::string> published;
    if (task.kind() == v1::TASK_KIND_FINALIZE_PACK) {
      absl::StatusOr<std::string> attempt =
          FileUriPath(task.attempt_uri(), "attempt_uri");
      if (!attempt.ok()) return attempt.status();
      if (absl::Status s = MakeDirectories(*attempt); !s.ok()) return s;
      published = RunFinalizePackJobTask(context, *attempt,
                                         kDefaultMaxShardBytes, control);
      if (published.ok()) (void)RemoveTree(*attempt);
    } else {
      published =
          RunGatePartJobTask(context, task.shard(), task.gate_parts(), control);
    }
    if (!published.ok()) return published.status();
    outcome.output_uri = absl::StrCat("file://", *published);
    absl::StatusOr<std::string> sha256 = Sha256File(*published);
    if (!sha256.ok()) return sha256.status();
    outcome.output_sha256 = *std::move(sha256);
    return outcome;
  }
  if (task.kind() == v1::TASK_KIND_FINALIZE) {
    absl::StatusOr<std::string> artifact =
        FileUriPath(task.artifact_uri(), "artifact_uri");
    if (!artifact.ok()) return artifact.status();
    if (absl::Status s = MakeDirectories(ParentDirectory(*artifact)); !s.ok()) {
      return s;
    }
    // In parts: the evaluation was scored by the gate-part tasks.
    absl::StatusOr<FinalizeJobResult> result =
        task.gate_parts() > 0
            ? RunFinalizeFromPartsJobTask(context, task.gate_parts(), *artifact,
                                          control)
            : RunFinalizeJobTask(context, *artifact, kDefaultMaxShardBytes,
                                 control);
    if (!result.ok()) return result.status();
    outcome.output_uri = task.artifact_uri();
    absl::StatusOr<std::string> marker =
        Sha256File(JoinPath(*artifact, "manifest.json"));
    if (!marker.ok()) return marker.status();
    outcome.output_sha256 = *std::move(marker);
    outcome.passed = result->passed;
    return outcome;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("kind: unknown task kind ", task.kind()));
}

}  // namespace quant::worker

// JobSpec <-> spec_json, and store::Job -> quant.v1.Job.
#include "server/job_spec.h"

#include <cmath>
#include <cstdint>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/job_constants.h"
#include "common/recipe_convert.h"
#include "core/base/json_fields.h"
#include "core/base/status_macros.h"
#include "core/base/strict_json.h"
#include "google/protobuf/util/time_util.h"
#include "nlohmann/json.hpp"

namespace quant::server {

std::string JobSpecToJson(const JobSpec& spec) {
  nlohmann::json json;
  json["checkpoint"] = {{"uri", spec.checkpoint_uri},
                        {"path", spec.checkpoint_path},
                        {"blocks", spec.num_blocks}};
  json["recipe"] = nlohmann::json::parse(RecipeToJson(spec.recipe));
  json["calibration"] = {{"sha256", spec.calibration_sha256},
                         {"path", spec.calibration_path}};
  json["labels"] = nlohmann::json::object();
  for (const auto& [key, value] : spec.labels) json["labels"][key] = value;
  if (!spec.warnings.empty()) json["warnings"] = spec.warnings;
  return json.dump();
}

namespace {

absl::StatusOr<JobSpec> ParseJobSpec(const std::string& text) {
  namespace fields = json_fields;
  QUANT_ASSIGN_OR_RETURN(const nlohmann::json json,
                         ParseJsonStrict(text, "spec_json"));
  QUANT_RETURN_IF_ERROR(fields::ExpectObject(json, "spec_json"));
  JobSpec spec;
  QUANT_ASSIGN_OR_RETURN(const nlohmann::json* checkpoint,
                         fields::GetObject(json, "checkpoint", ""));
  QUANT_ASSIGN_OR_RETURN(spec.checkpoint_uri,
                         fields::GetString(*checkpoint, "uri", "checkpoint"));
  QUANT_ASSIGN_OR_RETURN(spec.checkpoint_path,
                         fields::GetString(*checkpoint, "path", "checkpoint"));
  QUANT_ASSIGN_OR_RETURN(const int64_t blocks,
                         fields::GetInt(*checkpoint, "blocks", "checkpoint"));
  if (blocks < 0 || blocks > std::numeric_limits<int>::max()) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint.blocks: out of range: ", blocks));
  }
  spec.num_blocks = static_cast<int>(blocks);
  QUANT_ASSIGN_OR_RETURN(const nlohmann::json* calibration,
                         fields::GetObject(json, "calibration", ""));
  QUANT_ASSIGN_OR_RETURN(
      spec.calibration_sha256,
      fields::GetString(*calibration, "sha256", "calibration"));
  QUANT_ASSIGN_OR_RETURN(
      spec.calibration_path,
      fields::GetString(*calibration, "path", "calibration"));
  QUANT_ASSIGN_OR_RETURN(const nlohmann::json* labels,
                         fields::GetObject(json, "labels", ""));
  for (const auto& [key, value] : labels->items()) {
    QUANT_ASSIGN_OR_RETURN(spec.labels[key],
                           fields::GetString(*labels, key, "labels"));
  }
  QUANT_ASSIGN_OR_RETURN(spec.warnings,
                         fields::GetStringArrayOr(json, "warnings", ""));
  QUANT_ASSIGN_OR_RETURN(const nlohmann::json* recipe,
                         fields::GetObject(json, "recipe", ""));
  QUANT_ASSIGN_OR_RETURN(spec.recipe,
                         ParseRecipe(recipe->dump(), "spec_json.recipe"));
  return spec;
}

}  // namespace

absl::StatusOr<JobSpec> JobSpecFromJson(const std::string& text) {
  absl::StatusOr<JobSpec> spec = ParseJobSpec(text);
  if (!spec.ok()) {
    return absl::InternalError(
        absl::StrCat("stored job spec: ", spec.status().message()));
  }
  return spec;
}

v1::JobState JobStateToProto(store::JobState state) {
  switch (state) {
    case store::JobState::kQueued:
      return v1::JOB_STATE_QUEUED;
    case store::JobState::kRunning:
      return v1::JOB_STATE_RUNNING;
    case store::JobState::kSucceeded:
      return v1::JOB_STATE_SUCCEEDED;
    case store::JobState::kFailed:
      return v1::JOB_STATE_FAILED;
    case store::JobState::kCancelled:
      return v1::JOB_STATE_CANCELLED;
  }
  return v1::JOB_STATE_UNSPECIFIED;
}

absl::StatusOr<v1::Job> JobToProto(const store::Job& job,
                                   const std::vector<store::Task>& tasks) {
  absl::StatusOr<JobSpec> spec = JobSpecFromJson(job.spec_json);
  if (!spec.ok()) {
    return absl::InternalError(
        absl::StrCat("job ", job.id, ": ", spec.status().message()));
  }
  using google::protobuf::util::TimeUtil;
  v1::Job out;
  out.set_id(job.id);
  out.set_state(JobStateToProto(job.state));
  switch (job.verdict) {
    case store::Verdict::kNone:
      out.set_verdict(v1::VERDICT_UNSPECIFIED);
      break;
    case store::Verdict::kPass:
      out.set_verdict(v1::VERDICT_PASS);
      break;
    case store::Verdict::kFail:
      out.set_verdict(v1::VERDICT_FAIL);
      break;
  }
  out.set_checkpoint_uri(spec->checkpoint_uri);
  *out.mutable_recipe() = common::RecipeToProto(spec->recipe);
  out.set_calibration_sha256(spec->calibration_sha256);
  for (const auto& [key, value] : job.labels) {
    (*out.mutable_labels())[key] = value;
  }
  out.set_request_id(job.request_id);
  out.set_isa(job.isa);
  for (const std::string& warning : spec->warnings) out.add_warnings(warning);
  for (const std::string& warning : job.audit_warnings) {
    out.add_warnings(warning);
  }
  v1::Progress* progress = out.mutable_progress();
  const BlockProgress counts = CountBlockProgress(tasks);
  progress->set_blocks_total(counts.blocks_total);
  progress->set_blocks_done(counts.blocks_done);
  progress->set_layers_total(static_cast<int32_t>(counts.layers_total));
  progress->set_layers_done(static_cast<int32_t>(counts.layers_done));
  progress->set_fraction(job.progress);
  out.set_artifact_uri(job.artifact_uri);
  out.set_error(job.error);
  *out.mutable_create_time() =
      TimeUtil::MillisecondsToTimestamp(job.created_ms);
  *out.mutable_update_time() =
      TimeUtil::MillisecondsToTimestamp(job.updated_ms);
  return out;
}

BlockProgress CountBlockProgress(const std::vector<store::Task>& tasks) {
  BlockProgress counts;
  double layers_done = 0.0;
  for (const store::Task& task : tasks) {
    if (task.kind != store::TaskKind::kBlock) continue;
    ++counts.blocks_total;
    if (task.state == store::TaskState::kDone) {
      ++counts.blocks_done;
      layers_done += common::kLayersPerBlockTask;
    } else if (task.state == store::TaskState::kLeased) {
      layers_done += task.progress * common::kLayersPerBlockTask;
    }
  }
  counts.layers_total =
      static_cast<int64_t>(counts.blocks_total) * common::kLayersPerBlockTask;
  // A hair under a whole layer is still that layer unfinished, but the
  // sum of exact thirds and sevenths must not lose one to rounding.
  counts.layers_done = static_cast<int64_t>(std::floor(layers_done + 1e-9));
  return counts;
}

}  // namespace quant::server

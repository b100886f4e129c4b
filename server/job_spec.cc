// JobSpec <-> spec_json, and store::Job -> quant.v1.Job.
#include "server/job_spec.h"

#include <exception>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/recipe_convert.h"
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

absl::StatusOr<JobSpec> JobSpecFromJson(const std::string& text) {
  JobSpec spec;
  try {
    const nlohmann::json json = nlohmann::json::parse(text);
    spec.checkpoint_uri = json.at("checkpoint").at("uri").get<std::string>();
    spec.checkpoint_path = json.at("checkpoint").at("path").get<std::string>();
    spec.num_blocks = json.at("checkpoint").at("blocks").get<int>();
    spec.calibration_sha256 =
        json.at("calibration").at("sha256").get<std::string>();
    spec.calibration_path =
        json.at("calibration").at("path").get<std::string>();
    for (const auto& [key, value] : json.at("labels").items()) {
      spec.labels[key] = value.get<std::string>();
    }
    if (json.contains("warnings")) {
      spec.warnings = json.at("warnings").get<std::vector<std::string>>();
    }
    absl::StatusOr<Recipe> recipe =
        ParseRecipe(json.at("recipe").dump(), "spec_json.recipe");
    if (!recipe.ok()) {
      return absl::InternalError(
          absl::StrCat("stored job spec: ", recipe.status().message()));
    }
    spec.recipe = *std::move(recipe);
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("stored job spec: ", e.what()));
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
  int blocks_total = 0;
  int blocks_done = 0;
  for (const store::Task& task : tasks) {
    if (task.kind != store::TaskKind::kBlock) continue;
    ++blocks_total;
    if (task.state == store::TaskState::kDone) ++blocks_done;
  }
  progress->set_blocks_total(blocks_total);
  progress->set_blocks_done(blocks_done);
  progress->set_fraction(job.progress);
  out.set_artifact_uri(job.artifact_uri);
  out.set_error(job.error);
  *out.mutable_create_time() =
      TimeUtil::MillisecondsToTimestamp(job.created_ms);
  *out.mutable_update_time() =
      TimeUtil::MillisecondsToTimestamp(job.updated_ms);
  return out;
}

}  // namespace quant::server

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
#include "server/job_eta.h"

namespace quant::server {

std::string JobSpecToJson(const JobSpec& spec) {
  nlohmann::json json;
  json["checkpoint"] = {{"uri", spec.checkpoint_uri},
                        {"path", spec.checkpoint_path},
                        {"blocks", spec.num_blocks}};
  json["recipe"] = nlohmann::json::parse(RecipeToJson(spec.recipe));
  json["calibration"] = {{"sha256", spec.calibration_sha256},
                         {"path", spec.calibration_path}};
  if (!spec.calibration_sources.empty()) {
    nlohmann::json sources = nlohmann::json::array();
    for (const CalibrationSourceSpec& source : spec.calibration_sources) {
      sources.push_back({{"sha256", source.sha256},
                         {"path", source.path},
                         {"weight", source.weight}});
    }
    json["calibration"]["sources"] = std::move(sources);
  }
  if (!spec.chat_template_sha256.empty() || !spec.tasks_sha256.empty()) {
    json["pinned"] = {{"chat_template_sha256", spec.chat_template_sha256},
                      {"tasks_sha256", spec.tasks_sha256}};
  }
  json["labels"] = nlohmann::json::object();
  for (const auto& [key, value] : spec.labels) json["labels"][key] = value;
  if (!spec.warnings.empty()) json["warnings"] = spec.warnings;
  if (!spec.previous_job_id.empty() || !spec.previous_path.empty()) {
    json["previous"] = {{"job_id", spec.previous_job_id},
                        {"path", spec.previous_path}};
  }
  if (spec.rounds.has_value()) {
    json["rounds"] = {{"calibration_shards", spec.rounds->calibration},
                      {"heldout_shards", spec.rounds->heldout}};
    // Absent in a spec written before reduces were split by layer.
    if (spec.rounds->layer_reduces) json["rounds"]["layer_reduces"] = true;
    // Absent in a spec written before reduces stopped waiting for the
    // held-out shards.
    if (spec.rounds->heldout_later) json["rounds"]["heldout_later"] = true;
  }
  if (spec.gate_parts > 0) json["gate_parts"] = spec.gate_parts;
  if (spec.work.has_value()) {
    const auto flops = [](const TaskWork& task) {
      return nlohmann::json::array(
          {task.forward_flops, task.hessian_flops, task.gptq_flops});
    };
    nlohmann::json blocks = nlohmann::json::array();
    for (const TaskWork& block : spec.work->blocks) {
      blocks.push_back(flops(block));
    }
    json["work"] = {{"calibration_tokens", spec.work->calibration_tokens},
                    {"heldout_tokens", spec.work->heldout_tokens},
                    {"blocks", std::move(blocks)},
                    {"finalize", flops(spec.work->finalize)}};
  }
  return json.dump();
}

namespace {

// [forward, hessian, gptq] flops, each a finite number >= 0.
absl::StatusOr<TaskWork> ParseTaskWork(const nlohmann::json& value,
                                       const std::string& path) {
  if (!value.is_array() || value.size() != 3) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not [forward, hessian, gptq] flops"));
  }
  double flops[3];
  for (size_t i = 0; i < 3; ++i) {
    if (!value[i].is_number() || !std::isfinite(value[i].get<double>()) ||
        value[i].get<double>() < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, "[", i, "]: not a finite count >= 0"));
    }
    flops[i] = value[i].get<double>();
  }
  TaskWork task;
  task.forward_flops = flops[0];
  task.hessian_flops = flops[1];
  task.gptq_flops = flops[2];
  return task;
}

absl::StatusOr<std::optional<JobWork>> ParseWork(const nlohmann::json& json) {
  namespace fields = json_fields;
  auto it = json.find("work");
  if (it == json.end()) return std::nullopt;
  QUANT_RETURN_IF_ERROR(fields::ExpectObject(*it, "work"));
  JobWork work;
  QUANT_ASSIGN_OR_RETURN(work.calibration_tokens,
                         fields::GetInt(*it, "calibration_tokens", "work"));
  QUANT_ASSIGN_OR_RETURN(work.heldout_tokens,
                         fields::GetInt(*it, "heldout_tokens", "work"));
  auto blocks = it->find("blocks");
  if (blocks == it->end() || !blocks->is_array()) {
    return absl::InvalidArgumentError("work.blocks: required, an array");
  }
  for (size_t i = 0; i < blocks->size(); ++i) {
    QUANT_ASSIGN_OR_RETURN(
        TaskWork block,
        ParseTaskWork((*blocks)[i], absl::StrCat("work.blocks[", i, "]")));
    work.blocks.push_back(block);
  }
  auto finalize = it->find("finalize");
  if (finalize == it->end()) {
    return absl::InvalidArgumentError("work.finalize: required");
  }
  QUANT_ASSIGN_OR_RETURN(work.finalize,
                         ParseTaskWork(*finalize, "work.finalize"));
  return work;
}

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
  if (auto sources = calibration->find("sources");
      sources != calibration->end()) {
    if (!sources->is_array()) {
      return absl::InvalidArgumentError("calibration.sources: not an array");
    }
    for (size_t i = 0; i < sources->size(); ++i) {
      const std::string at = absl::StrCat("calibration.sources[", i, "]");
      const nlohmann::json& entry = (*sources)[i];
      QUANT_RETURN_IF_ERROR(fields::ExpectObject(entry, at));
      CalibrationSourceSpec source;
      QUANT_ASSIGN_OR_RETURN(source.sha256,
                             fields::GetString(entry, "sha256", at));
      QUANT_ASSIGN_OR_RETURN(source.path, fields::GetString(entry, "path", at));
      QUANT_ASSIGN_OR_RETURN(source.weight,
                             fields::GetNumber(entry, "weight", at));
      spec.calibration_sources.push_back(std::move(source));
    }
  }
  if (auto pinned = json.find("pinned"); pinned != json.end()) {
    QUANT_RETURN_IF_ERROR(fields::ExpectObject(*pinned, "pinned"));
    QUANT_ASSIGN_OR_RETURN(
        spec.chat_template_sha256,
        fields::GetString(*pinned, "chat_template_sha256", "pinned"));
    QUANT_ASSIGN_OR_RETURN(
        spec.tasks_sha256,
        fields::GetString(*pinned, "tasks_sha256", "pinned"));
  }
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
  QUANT_ASSIGN_OR_RETURN(spec.work, ParseWork(json));
  if (auto rounds = json.find("rounds"); rounds != json.end()) {
    QUANT_RETURN_IF_ERROR(fields::ExpectObject(*rounds, "rounds"));
    QUANT_ASSIGN_OR_RETURN(
        const int64_t calibration,
        fields::GetInt(*rounds, "calibration_shards", "rounds"));
    QUANT_ASSIGN_OR_RETURN(const int64_t heldout,
                           fields::GetInt(*rounds, "heldout_shards", "rounds"));
    // Bounded by what a recipe may ask for (calibration.samples).
    constexpr int64_t kMaxShards = int64_t{1} << 20;
    if (calibration < 1 || calibration > kMaxShards || heldout < 0 ||
        heldout > kMaxShards) {
      return absl::InvalidArgumentError(
          absl::StrCat("rounds: shard counts out of range: ", calibration,
                       " and ", heldout));
    }
    QUANT_ASSIGN_OR_RETURN(
        const bool layer_reduces,
        fields::GetBoolOr(*rounds, "layer_reduces", false, "rounds"));
    QUANT_ASSIGN_OR_RETURN(
        const bool heldout_later,
        fields::GetBoolOr(*rounds, "heldout_later", false, "rounds"));
    if (heldout_later && heldout == 0) {
      return absl::InvalidArgumentError(
          "rounds.heldout_later: the plan has no held-out shards to audit "
          "later");
    }
    spec.rounds.emplace();
    spec.rounds->calibration = static_cast<int>(calibration);
    spec.rounds->heldout = static_cast<int>(heldout);
    spec.rounds->layer_reduces = layer_reduces;
    spec.rounds->heldout_later = heldout_later;
  }
  QUANT_ASSIGN_OR_RETURN(const int64_t gate_parts,
                         fields::GetIntOr(json, "gate_parts", 0, ""));
  if (gate_parts < 0 || gate_parts > kMaxGateParts) {
    return absl::InvalidArgumentError(absl::StrCat(
        "gate_parts: ", gate_parts, " is outside 0..", kMaxGateParts));
  }
  spec.gate_parts = static_cast<int>(gate_parts);
  if (auto previous = json.find("previous"); previous != json.end()) {
    QUANT_RETURN_IF_ERROR(fields::ExpectObject(*previous, "previous"));
    QUANT_ASSIGN_OR_RETURN(spec.previous_job_id,
                           fields::GetString(*previous, "job_id", "previous"));
    QUANT_ASSIGN_OR_RETURN(spec.previous_path,
                           fields::GetString(*previous, "path", "previous"));
  }
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
                                   const std::vector<store::Task>& tasks,
                                   const JobEta* eta) {
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
  if (eta != nullptr) eta->Fill(job, *spec, tasks, progress);
  out.set_artifact_uri(job.artifact_uri);
  out.set_error(job.error);
  *out.mutable_create_time() =
      TimeUtil::MillisecondsToTimestamp(job.created_ms);
  *out.mutable_update_time() =
      TimeUtil::MillisecondsToTimestamp(job.updated_ms);
  return out;
}

std::string DescribeRoundProgress(const std::vector<store::Task>& tasks,
                                  const store::Task& done) {
  if (done.kind == store::TaskKind::kReduce) {
    if (done.group + 1 == kBlockRoundGroups) {
      return absl::StrCat("block ", done.block, " quantized");
    }
    if (done.layer.empty()) {
      return absl::StrCat("block ", done.block, " group ", done.group,
                          " quantized");
    }
    // A group reduced by layer: its layers done so far.
    int finished = 0;
    int total = 0;
    for (const store::Task& t : tasks) {
      if (t.kind != store::TaskKind::kReduce || t.block != done.block ||
          t.group != done.group) {
        continue;
      }
      ++total;
      finished += t.state == store::TaskState::kDone;
    }
    return absl::StrCat("block ", done.block, " group ", done.group, ": ",
                        done.layer, " quantized (", finished, "/", total,
                        " layers)");
  }
  int finished = 0;
  int total = 0;
  for (const store::Task& t : tasks) {
    if (t.kind != done.kind || t.block != done.block || t.group != done.group) {
      continue;
    }
    ++total;
    finished += t.state == store::TaskState::kDone;
  }
  return done.kind == store::TaskKind::kShardStats
             ? absl::StrCat("block ", done.block, " group ", done.group, ": ",
                            finished, "/", total, " shards gathered")
             : absl::StrCat("block ", done.block, ": ", finished, "/", total,
                            " shards out");
}

BlockProgress CountBlockProgress(const std::vector<store::Task>& tasks) {
  BlockProgress counts;
  double layers_done = 0.0;
  for (const store::Task& task : tasks) {
    if (task.kind == store::TaskKind::kReduce) {
      // A block run as rounds: its reduces quantize its layers, a group
      // at a time; the last one finishes the block.
      const int layers =
          task.layer.empty() ? common::LayersOfBlockGroup(task.group) : 1;
      if (task.group == kBlockRoundGroups - 1) {
        ++counts.blocks_total;
        counts.blocks_done += task.state == store::TaskState::kDone;
      }
      if (task.state == store::TaskState::kDone) layers_done += layers;
      continue;
    }
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

// JobLifecycle: shared job transitions and the scheduler's upkeep pass.
#include "server/job_lifecycle.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/job_constants.h"
#include "core/base/strict_json.h"
#include "core/pipeline/finalize_task.h"
#include "core/pipeline/manifest_signature.h"
#include "nlohmann/json.hpp"
#include "server/job_events.h"
#include "server/job_spec.h"
#include "server/task_plan.h"

namespace quant::server {

std::vector<std::string> AuditWarnings(const PublishedAudit& audit) {
  // (tokens, k) -> the layers with that rank-deficient Hessian.
  std::map<std::pair<int64_t, int64_t>, std::vector<std::string>> by_shape;
  for (const nlohmann::json& layer : audit.layers()) {
    const nlohmann::json flags = layer.value("flags", nlohmann::json::array());
    const nlohmann::json hessian =
        layer.value("hessian", nlohmann::json::object());
    if (!flags.is_array() || !hessian.is_object()) continue;
    bool rank_deficient = false;
    for (const nlohmann::json& flag : flags) {
      rank_deficient = rank_deficient || flag == "rank_deficient";
    }
    if (!rank_deficient) continue;
    const nlohmann::json tokens = hessian.value("tokens", nlohmann::json());
    const nlohmann::json k = hessian.value("k", nlohmann::json());
    const nlohmann::json name = layer.value("name", nlohmann::json());
    if (!tokens.is_number_integer() || !k.is_number_integer() ||
        !name.is_string()) {
      continue;
    }
    by_shape[{tokens.get<int64_t>(), k.get<int64_t>()}].push_back(
        name.get<std::string>());
  }
  std::vector<std::string> warnings;
  constexpr size_t kNamesShown = 3;
  for (const auto& [shape, names] : by_shape) {
    std::vector<std::string> shown(
        names.begin(), names.begin() + std::min(names.size(), kNamesShown));
    std::string list = absl::StrJoin(shown, ", ");
    if (names.size() > shown.size()) {
      absl::StrAppend(&list, " and ", names.size() - shown.size(), " more");
    }
    warnings.push_back(
        absl::StrCat(common::kAuditWarningPrefix, names.size(),
                     names.size() == 1 ? " layer" : " layers",
                     " calibrated on ", shape.first, " tokens, fewer than ",
                     names.size() == 1 ? "its " : "their ", shape.second,
                     " inputs (T < K), so GPTQ and AWQ leaned on damping "
                     "there (flag rank_deficient): ",
                     list));
  }
  return warnings;
}

absl::StatusOr<v1::Job> JobLifecycle::JobProto(const store::Job& job) {
  absl::StatusOr<std::vector<store::Task>> tasks = store_->ListTasks(job.id);
  if (!tasks.ok()) return tasks.status();
  return JobToProto(job, *tasks, eta_);
}

absl::StatusOr<v1::Job> JobLifecycle::JobProto(const std::string& job_id) {
  absl::StatusOr<store::Job> job = store_->GetJob(job_id);
  if (!job.ok()) return job.status();
  return JobProto(*job);
}

absl::Status JobLifecycle::FinishJob(const std::string& job_id) {
  absl::StatusOr<std::string> audit = artifacts_->ReadAudit(job_id);
  if (!audit.ok()) {
    return FailJob(job_id, absl::StrCat("every task finished but the packed "
                                        "checkpoint is missing: ",
                                        audit.status().message()));
  }
  // Tied to this job before it is reported: the manifest names the job and
  // its recipe, so an old checkpoint under a reused id is refused.
  if (absl::Status tied = CheckManifestNamesJob(job_id); !tied.ok()) {
    return FailJob(job_id, absl::StrCat("every task finished but the "
                                        "published checkpoint is not this "
                                        "job's: ",
                                        tied.message()));
  }
  absl::StatusOr<PublishedAudit> parsed = ParseAudit(*audit);
  if (!parsed.ok()) {
    return FailJob(job_id, absl::StrCat("every task finished but the "
                                        "published audit is damaged: ",
                                        parsed.status().message()));
  }
  if (signer_ != nullptr) {
    absl::StatusOr<std::string> manifest = artifacts_->ReadManifest(job_id);
    absl::StatusOr<std::string> signature =
        manifest.ok() ? signer_->Sign(*manifest) : manifest.status();
    absl::Status written =
        signature.ok() ? artifacts_->WriteManifestSignature(job_id, *signature)
                       : signature.status();
    if (!written.ok()) {
      return FailJob(job_id, absl::StrCat("every task finished but signing "
                                          "its manifest.json failed: ",
                                          written.message()));
    }
  }
  observer_->OnAudit(job_id, *parsed);
  absl::StatusOr<store::Job> job = store_->FinishJob(
      job_id, parsed->verdict, artifacts_->CheckpointUri(job_id),
      AuditWarnings(*parsed));
  if (!job.ok()) return job.status();
  absl::Status progress = Progress(job_id, "done");
  if (!progress.ok()) return progress;
  return StateChanged(job_id, job->state);
}

absl::Status JobLifecycle::CheckManifestNamesJob(const std::string& job_id) {
  absl::StatusOr<store::Job> job = store_->GetJob(job_id);
  if (!job.ok()) return job.status();
  absl::StatusOr<JobSpec> spec = JobSpecFromJson(job->spec_json);
  if (!spec.ok()) return spec.status();
  absl::StatusOr<std::string> manifest = artifacts_->ReadManifest(job_id);
  if (!manifest.ok()) return manifest.status();
  return quant::CheckManifestNamesJob(ParseJsonOrDiscarded(*manifest),
                                      "manifest.json", job_id, spec->recipe);
}

absl::Status JobLifecycle::FailJob(const std::string& job_id,
                                   const std::string& error) {
  absl::StatusOr<store::Job> job = store_->FailJob(job_id, error);
  if (!job.ok()) return job.status();
  return StateChanged(job_id, job->state);
}

absl::StatusOr<store::Job> JobLifecycle::RetryJob(const std::string& job_id) {
  absl::StatusOr<store::RetryJobResult> retried = store_->RetryJob(job_id);
  if (!retried.ok()) return retried.status();
  const store::Job& job = retried->job;
  absl::Status appended =
      AppendRetryEvent(*store_, job_id, job.state, retried->previous_error);
  observer_->OnJobState(job_id, job.state);
  signal_->Notify();  // Its tasks are runnable again.
  if (!appended.ok()) return appended;
  return job;
}

absl::Status JobLifecycle::StateChanged(const std::string& job_id,
                                        store::JobState state) {
  absl::Status appended = AppendStateEvent(*store_, job_id, state);
  observer_->OnJobState(job_id, state);
  signal_->Notify();
  return appended;
}

absl::Status JobLifecycle::Progress(const std::string& job_id,
                                    const std::string& current) {
  absl::StatusOr<v1::Job> job = JobProto(job_id);
  if (!job.ok()) return job.status();
  v1::Progress progress = job->progress();
  progress.set_current(current);
  absl::Status appended = AppendProgressEvent(*store_, job_id, progress);
  observer_->OnProgress(job_id);
  signal_->Notify();
  return appended;
}

absl::StatusOr<UpkeepResult> JobLifecycle::Upkeep() {
  UpkeepResult result;
  absl::StatusOr<std::vector<store::Job>> before = store_->UnfinishedJobs();
  if (!before.ok()) return before.status();
  absl::StatusOr<store::ExpiredLeases> expired = store_->ExpireLeases();
  if (!expired.ok()) return expired.status();
  result.expired_leases = expired->expired;
  if (expired->expired > 0) signal_->Notify();
  // Reported before the per-job work, so counts include this pass's
  // expiries even when a job below fails to finish.
  observer_->OnUpkeep(result);
  // Exactly the jobs this expiry failed: a state compared with `before`
  // would also see changes made meanwhile by other calls (a lease starting
  // the job), which record their own events.
  for (const std::string& job_id : expired->failed_jobs) {
    if (absl::Status s = StateChanged(job_id, store::JobState::kFailed);
        !s.ok()) {
      return s;
    }
  }
  for (const store::Job& job : *before) {
    absl::StatusOr<store::Job> now = store_->GetJob(job.id);
    if (!now.ok()) return now.status();
    if (store::IsTerminal(now->state)) continue;
    absl::StatusOr<std::vector<store::Task>> tasks = store_->ListTasks(job.id);
    if (!tasks.ok()) return tasks.status();
    if (tasks->empty()) {
      // Created, then the coordinator stopped before planning it (or
      // CreateJob is planning it right now: either way one plan results).
      absl::StatusOr<JobSpec> spec = JobSpecFromJson(now->spec_json);
      if (!spec.ok()) return spec.status();
      bool planned = false;
      if (absl::Status s = EnsureJobPlanned(*store_, job.id, *spec, &planned);
          !s.ok()) {
        return s;
      }
      if (planned) {
        ++result.planned_jobs;
        signal_->Notify();
      }
      continue;
    }
    bool all_done = true;
    for (const store::Task& task : *tasks) {
      all_done = all_done && task.state == store::TaskState::kDone;
    }
    if (all_done) {
      // The last CompleteTask was recorded but the job not finished.
      if (absl::Status s = FinishJob(job.id); !s.ok()) return s;
      ++result.finished_jobs;
    }
  }
  return result;
}

}  // namespace quant::server

// QuantdMetricsObserver: coordinator events -> QuantdMetrics.
#include "server/quantd_metrics_observer.h"

#include <cstdio>
#include <utility>

#include "server/job_spec.h"

namespace quant::server {
namespace {

metrics::TaskKind Kind(const store::Task& task) {
  switch (task.kind) {
    case store::TaskKind::kBlock:
      return metrics::TaskKind::kBlock;
    case store::TaskKind::kFinalize:
      return metrics::TaskKind::kFinalize;
    case store::TaskKind::kShardStats:
      return metrics::TaskKind::kShardStats;
    case store::TaskKind::kReduce:
      return metrics::TaskKind::kReduce;
    case store::TaskKind::kShardOutput:
      return metrics::TaskKind::kShardOutput;
    case store::TaskKind::kFinalizePack:
      return metrics::TaskKind::kFinalizePack;
    case store::TaskKind::kGatePart:
      return metrics::TaskKind::kGatePart;
  }
  return metrics::TaskKind::kBlock;
}

// Metrics never fail the change they describe; a refusal is a bug to see.
void Report(const absl::Status& status) {
  if (!status.ok()) {
    std::fprintf(stderr, "quantd: metrics: %s\n",
                 std::string(status.message()).c_str());
  }
}

}  // namespace

QuantdMetricsObserver::QuantdMetricsObserver(
    metrics::QuantdMetrics* metrics, store::JobStore* store,
    std::function<metrics::WorkerCounts()> workers)
    : metrics_(metrics), store_(store), workers_(std::move(workers)) {}

void QuantdMetricsObserver::OnTaskLeased(const store::Task& task) {
  metrics_->OnTaskStarted(Kind(task));
  OnProgress(task.job_id);
}

void QuantdMetricsObserver::OnTaskCompleted(const store::Task& task,
                                            absl::Duration duration) {
  metrics_->OnTaskCompleted(Kind(task), duration);
}

void QuantdMetricsObserver::OnTaskFailed(const store::Task& task,
                                         bool requeued) {
  metrics_->OnTaskFailed(Kind(task));
  if (requeued) metrics_->OnTaskRetried(Kind(task));
}

void QuantdMetricsObserver::OnLayerFinished(const std::string& job_id,
                                            const v1::LayerAudit& layer) {
  if (!layer.packed()) return;  // Kept layers have no error to show.
  // Shown once its audit is complete (the block's last reduce reports it).
  if (layer.heldout_pending()) return;
  metrics::LayerResult result;
  result.name = layer.name();
  result.type = layer.type();
  result.rel_output_error_cal = layer.rel_output_error_cal();
  result.rel_output_error_heldout = layer.rel_output_error_heldout();
  result.gain_cal = layer.gain_cal();
  result.gain_heldout = layer.gain_heldout();
  Report(metrics_->OnLayerFinished(job_id, result));
}

void QuantdMetricsObserver::OnProgress(const std::string& job_id) {
  absl::StatusOr<std::vector<store::Task>> tasks = store_->ListTasks(job_id);
  if (!tasks.ok()) return Report(tasks.status());
  absl::StatusOr<store::Job> job =
      eta_ ? store_->GetJob(job_id)
           : absl::StatusOr<store::Job>(absl::NotFoundError("no ETA source"));
  if (eta_ && !job.ok()) Report(job.status());
  PublishProgress(job_id, job.ok() ? &*job : nullptr, *tasks);
}

void QuantdMetricsObserver::PublishProgress(
    const std::string& job_id, const store::Job* job,
    const std::vector<store::Task>& tasks) {
  const BlockProgress counts = CountBlockProgress(tasks);
  metrics::JobProgress progress;
  progress.blocks_total = counts.blocks_total;
  progress.blocks_done = counts.blocks_done;
  progress.layers_total = counts.layers_total;
  progress.layers_done = counts.layers_done;
  if (eta_ && job != nullptr) progress.eta_seconds = eta_(*job, tasks);
  Report(metrics_->SetJobProgress(job_id, progress));
}

void QuantdMetricsObserver::OnJobState(const std::string& job_id,
                                       store::JobState state) {
  if (store::IsTerminal(state)) {
    OnProgress(job_id);
    Report(metrics_->OnJobFinished(job_id, absl::Now()));
  } else if (state == store::JobState::kQueued) {
    // QUEUED after a terminal state: the job was retried.
    Report(metrics_->OnJobRestarted(job_id));
  }
}

void QuantdMetricsObserver::OnAudit(const std::string& job_id,
                                    const PublishedAudit& audit) {
  metrics::GateValues values;
  values.ppl_ratio = audit.ppl_ratio;
  values.mean_kl = audit.mean_kl;
  values.top1_agreement = audit.top1_agreement;
  values.passed = audit.verdict == store::Verdict::kPass;
  Report(metrics_->SetGateValues(job_id, values));
}

void QuantdMetricsObserver::OnUpkeep(const UpkeepResult& result) {
  if (result.expired_leases > 0)
    metrics_->OnLeasesExpired(result.expired_leases);
  absl::StatusOr<std::map<store::JobState, int64_t>> counts =
      store_->CountJobs();
  if (counts.ok()) {
    metrics::JobCounts jobs;
    jobs.queued = (*counts)[store::JobState::kQueued];
    jobs.running = (*counts)[store::JobState::kRunning];
    jobs.succeeded = (*counts)[store::JobState::kSucceeded];
    jobs.failed = (*counts)[store::JobState::kFailed];
    jobs.cancelled = (*counts)[store::JobState::kCancelled];
    metrics_->SetJobCounts(jobs);
  } else {
    Report(counts.status());
  }
  absl::StatusOr<int64_t> runnable = store_->CountRunnableTasks();
  if (runnable.ok()) {
    metrics_->SetQueueDepth(*runnable);
  } else {
    Report(runnable.status());
  }
  if (workers_) metrics_->SetWorkerCounts(workers_());
  // Time passes between progress steps: the running jobs' ETAs move on.
  if (eta_) {
    absl::StatusOr<std::vector<store::Job>> unfinished =
        store_->UnfinishedJobs();
    if (unfinished.ok()) {
      for (const store::Job& job : *unfinished) {
        if (job.state != store::JobState::kRunning) continue;
        absl::StatusOr<std::vector<store::Task>> tasks =
            store_->ListTasks(job.id);
        if (!tasks.ok()) {
          Report(tasks.status());
          continue;
        }
        PublishProgress(job.id, &job, *tasks);
      }
    } else {
      Report(unfinished.status());
    }
  }
  metrics_->RemoveExpired(absl::Now());
}

}  // namespace quant::server

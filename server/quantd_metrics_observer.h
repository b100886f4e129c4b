// Feeds quantd's Prometheus metrics (metrics/quantd_metrics.h) from
// the coordinator's job and task changes (JobObserver) and its upkeep pass:
// per-job progress from the store's task states, per-layer errors as the
// workers report them, gate values from the published audit, task counts
// and durations, queue depth, jobs by state, workers by state, lease
// expiries. Finished jobs' series go after the retention window, checked on
// every upkeep pass.
#ifndef QUANT_SERVER_QUANTD_METRICS_OBSERVER_H_
#define QUANT_SERVER_QUANTD_METRICS_OBSERVER_H_

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "metrics/quantd_metrics.h"
#include "server/job_lifecycle.h"
#include "server/job_observer.h"

namespace quant::server {

class QuantdMetricsObserver : public JobObserver {
 public:
  // `workers` counts the workers now (from the worker service). The
  // pointers must outlive this.
  QuantdMetricsObserver(metrics::QuantdMetrics* metrics, store::JobStore* store,
                        std::function<metrics::WorkerCounts()> workers);

  void OnTaskLeased(const store::Task& task) override;
  void OnTaskCompleted(const store::Task& task,
                       absl::Duration duration) override;
  void OnTaskFailed(const store::Task& task, bool requeued) override;
  void OnLayerFinished(const std::string& job_id,
                       const v1::LayerAudit& layer) override;
  void OnProgress(const std::string& job_id) override;
  void OnJobState(const std::string& job_id, store::JobState state) override;
  void OnAudit(const std::string& job_id, const PublishedAudit& audit) override;
  void OnUpkeep(const UpkeepResult& result) override;

  // The job's predicted seconds left from its record and tasks
  // (quant_job_eta_seconds), set on every progress step and upkeep pass;
  // none set: no ETA series.
  using EtaSource = std::function<std::optional<double>(
      const store::Job&, const std::vector<store::Task>&)>;
  void set_eta_source(EtaSource eta) { eta_ = std::move(eta); }

 private:
  // Sets the job's progress series from its tasks; `job` (null when it
  // could not be read) feeds the ETA.
  void PublishProgress(const std::string& job_id, const store::Job* job,
                       const std::vector<store::Task>& tasks);

  metrics::QuantdMetrics* metrics_;
  store::JobStore* store_;
  std::function<metrics::WorkerCounts()> workers_;
  EtaSource eta_;
};

}  // namespace quant::server

#endif  // QUANT_SERVER_QUANTD_METRICS_OBSERVER_H_

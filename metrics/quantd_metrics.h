// QuantdMetrics: every metric the coordinator exports, in its own registry
// (serve it with MetricsEndpoint). The coordinator reports events and
// counts; this class names, labels and bounds the series.
//
// Job-scoped series (progress, per-layer error and gain, gates) carry a
// `job_id` label. They live while the job runs and for `retention` after
// OnJobFinished; RemoveExpired(now) then drops them, so the number of series
// stays bounded by the running jobs plus those finished within the window.
// Time is passed in, not read, so tests need not sleep.
//
// Thread-safe. Job-scoped calls return InvalidArgument naming the bad field
// and change nothing; a call for a job whose series were already removed
// starts tracking it afresh, as running.
#ifndef QUANT_METRICS_QUANTD_METRICS_H_
#define QUANT_METRICS_QUANTD_METRICS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "core/base/mutex.h"
#include "metrics/task_kind.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace quant::metrics {

struct QuantdMetricsOptions {
  // How long a finished job's series stay after OnJobFinished.
  absl::Duration retention = absl::Minutes(30);
};

// Jobs in each state, as the store counts them.
struct JobCounts {
  int64_t queued = 0;
  int64_t running = 0;
  int64_t succeeded = 0;
  int64_t failed = 0;
  int64_t cancelled = 0;
};

struct JobProgress {
  int64_t blocks_done = 0;
  int64_t blocks_total = 0;
  int64_t layers_done = 0;
  int64_t layers_total = 0;
  // Predicted seconds left (quant_job_eta_seconds); unset when unknown,
  // which removes the series.
  std::optional<double> eta_seconds;
};

// One quantized layer's audit figures (LayerAudit's fields of these names).
struct LayerResult {
  std::string name;  // "model.layers.0.self_attn.q_proj"
  std::string type;  // "q_proj"
  double rel_output_error_cal = 0;
  double rel_output_error_heldout = 0;
  double gain_cal = 0;  // RTN's output MSE / the method's.
  double gain_heldout = 0;
};

// The release-gate measurements of a job (GateReport's fields).
struct GateValues {
  double ppl_ratio = 0;
  double mean_kl = 0;
  double top1_agreement = 0;
  bool passed = false;  // Verdict PASS.
};

struct WorkerCounts {
  int64_t idle = 0;
  int64_t busy = 0;
  int64_t lost = 0;  // Registered, but missed their heartbeats.
};

class QuantdMetrics {
 public:
  explicit QuantdMetrics(QuantdMetricsOptions options = {});
  QuantdMetrics(const QuantdMetrics&) = delete;
  QuantdMetrics& operator=(const QuantdMetrics&) = delete;

  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }

  // quant_jobs{state}.
  void SetJobCounts(const JobCounts& counts);

  // quant_job_progress_ratio{job_id}: layers done / layers total, or blocks
  // done / blocks total while the layer count is unknown (0); and the four
  // counts as quant_job_{blocks,layers}_{done,planned}{job_id}. InvalidArgument
  // for an empty job_id, a negative count or done > total.
  absl::Status SetJobProgress(absl::string_view job_id,
                              const JobProgress& progress);

  // quant_layer_rel_output_error{job_id,layer,type,split} and
  // quant_layer_gain_over_rtn{job_id,layer,type,split}, split "calibration" and
  // "heldout". A mixture-of-experts expert's layer is one series per experts
  // module and type (layer "model.layers.3.mlp.experts") holding the worst
  // expert so far: the highest error, the lowest gain. InvalidArgument for
  // an empty job_id, layer name or type.
  absl::Status OnLayerFinished(absl::string_view job_id,
                               const LayerResult& layer);

  // quant_job_gate_ppl_ratio, quant_job_gate_mean_kl,
  // quant_job_gate_top1_agreement_ratio and quant_job_gates_passed, {job_id}.
  absl::Status SetGateValues(absl::string_view job_id, const GateValues& gates);

  // The job reached a terminal state at `now`: its series go after
  // `retention`. A second call keeps the first time.
  absl::Status OnJobFinished(absl::string_view job_id, absl::Time now);
  // The job runs again (a retry of a failed job): its series stay until it
  // finishes again.
  absl::Status OnJobRestarted(absl::string_view job_id);

  // Removes every series of the jobs finished at or before now - retention;
  // returns how many jobs that was.
  int RemoveExpired(absl::Time now);

  // quant_tasks_{started,completed,failed,retried}_total{kind}, and
  // quant_task_duration_seconds{kind} of completed tasks.
  void OnTaskStarted(TaskKind kind);
  void OnTaskCompleted(TaskKind kind, absl::Duration duration);
  void OnTaskFailed(TaskKind kind);
  // A failed or expired attempt was put back in the queue.
  void OnTaskRetried(TaskKind kind);

  // quant_queue_depth: tasks runnable now and not leased.
  void SetQueueDepth(int64_t runnable_tasks);
  // quant_workers{state}.
  void SetWorkerCounts(const WorkerCounts& counts);
  // quant_lease_expiries_total.
  void OnLeasesExpired(int64_t count);

  // quant_rpc_requests_total{method,code} and
  // quant_rpc_duration_seconds{method}; method "quant.v1.QuantService/
  // CreateJob", code as absl spells it ("OK", "INVALID_ARGUMENT"; gRPC's
  // codes have the same numbers).
  void OnRpcFinished(absl::string_view method, absl::StatusCode code,
                     absl::Duration duration);

 private:
  using GaugeFamily = prometheus::Family<prometheus::Gauge>;
  struct JobSeries {
    std::set<std::pair<GaugeFamily*, prometheus::Gauge*>> gauges;
    std::optional<absl::Time> finished;
  };

  // Sets the job's series of `family` with `labels` (job added) to `value`.
  void SetJobGauge(JobSeries& job, GaugeFamily& family,
                   prometheus::Labels labels, absl::string_view job_id,
                   double value) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Removes the job's series of `family` with only the job label, if any.
  void RemoveJobGauge(JobSeries& job, GaugeFamily& family,
                      absl::string_view job_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  JobSeries& FindOrAddJob(absl::string_view job_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const QuantdMetricsOptions options_;
  const std::shared_ptr<prometheus::Registry> registry_;

  GaugeFamily& jobs_;
  GaugeFamily& job_progress_ratio_;
  GaugeFamily& job_blocks_done_;
  GaugeFamily& job_blocks_planned_;
  GaugeFamily& job_layers_done_;
  GaugeFamily& job_layers_planned_;
  GaugeFamily& job_eta_seconds_;
  GaugeFamily& layer_rel_output_error_;
  GaugeFamily& layer_gain_over_rtn_;
  GaugeFamily& job_gate_ppl_ratio_;
  GaugeFamily& job_gate_mean_kl_;
  GaugeFamily& job_gate_top1_agreement_ratio_;
  GaugeFamily& job_gates_passed_;
  prometheus::Family<prometheus::Counter>& tasks_started_;
  prometheus::Family<prometheus::Counter>& tasks_completed_;
  prometheus::Family<prometheus::Counter>& tasks_failed_;
  prometheus::Family<prometheus::Counter>& tasks_retried_;
  prometheus::Family<prometheus::Histogram>& task_duration_;
  GaugeFamily& queue_depth_;
  GaugeFamily& workers_;
  prometheus::Family<prometheus::Counter>& lease_expiries_;
  prometheus::Family<prometheus::Counter>& rpc_requests_;
  prometheus::Family<prometheus::Histogram>& rpc_duration_;

  Mutex mu_;
  // Every job with series, running or within retention.
  std::map<std::string, JobSeries, std::less<>> jobs_by_id_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace quant::metrics

#endif  // QUANT_METRICS_QUANTD_METRICS_H_

// QuantdMetrics: the families, and the per-job bookkeeping that lets a
// finished job's series be removed after the retention window.
#include "metrics/quantd_metrics.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "metrics/buckets.h"

namespace quant::metrics {
namespace {

using prometheus::Counter;
using prometheus::Family;
using prometheus::Gauge;
using prometheus::Histogram;
using prometheus::Registry;

Family<Gauge>& AddGauges(Registry& registry, const std::string& name,
                         const std::string& help) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(registry);
}

Family<Counter>& AddCounters(Registry& registry, const std::string& name,
                             const std::string& help) {
  return prometheus::BuildCounter().Name(name).Help(help).Register(registry);
}

Family<Histogram>& AddHistograms(Registry& registry, const std::string& name,
                                 const std::string& help) {
  return prometheus::BuildHistogram().Name(name).Help(help).Register(registry);
}

absl::Status CheckJobId(absl::string_view job_id) {
  if (job_id.empty()) return absl::InvalidArgumentError("job_id: empty");
  return absl::OkStatus();
}

absl::Status CheckCount(absl::string_view done_name, int64_t done,
                        absl::string_view total_name, int64_t total) {
  if (done < 0 || total < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(done < 0 ? done_name : total_name, ": negative (",
                     done < 0 ? done : total, ")"));
  }
  if (done > total) {
    return absl::InvalidArgumentError(absl::StrCat(
        done_name, ": ", done, " exceeds ", total_name, " ", total));
  }
  return absl::OkStatus();
}

}  // namespace

QuantdMetrics::QuantdMetrics(QuantdMetricsOptions options)
    : options_(options),
      registry_(std::make_shared<Registry>()),
      jobs_(AddGauges(*registry_, "quant_jobs", "Jobs by state.")),
      job_progress_ratio_(AddGauges(
          *registry_, "quant_job_progress_ratio",
          "Layers quantized over layers planned (blocks while the layer "
          "count is unknown), 0..1.")),
      job_blocks_done_(AddGauges(*registry_, "quant_job_blocks_done",
                                 "Decoder blocks of the job finished.")),
      job_blocks_planned_(AddGauges(*registry_, "quant_job_blocks_planned",
                                    "Decoder blocks the job quantizes.")),
      job_layers_done_(AddGauges(*registry_, "quant_job_layers_done",
                                 "Layers of the job quantized.")),
      job_layers_planned_(AddGauges(*registry_, "quant_job_layers_planned",
                                    "Layers the job quantizes.")),
      job_eta_seconds_(AddGauges(
          *registry_, "quant_job_eta_seconds",
          "Predicted seconds until the job ends: its remaining tasks' work "
          "at the workers' measured rates, scaled by its finished tasks' "
          "times. Absent while unknown.")),
      layer_rel_output_error_(AddGauges(
          *registry_, "quant_layer_rel_output_error",
          "Relative output error ||X(W-Q)^T||_F / ||XW^T||_F of a quantized "
          "layer on the calibration or held-out split.")),
      layer_gain_over_rtn_(AddGauges(
          *registry_, "quant_layer_gain_over_rtn",
          "RTN's output MSE over the method's, per layer and split; below "
          "1 the method is worse than round-to-nearest.")),
      job_gate_ppl_ratio_(
          AddGauges(*registry_, "quant_job_gate_ppl_ratio",
                    "Perplexity of the packed checkpoint over the reference's, "
                    "held-out windows.")),
      job_gate_mean_kl_(AddGauges(
          *registry_, "quant_job_gate_mean_kl",
          "Mean KL divergence (nats per token) of the packed checkpoint's "
          "next-token distribution from the reference's.")),
      job_gate_top1_agreement_ratio_(AddGauges(
          *registry_, "quant_job_gate_top1_agreement_ratio",
          "Share of held-out tokens whose top-1 prediction matches the "
          "reference's.")),
      job_gates_passed_(AddGauges(
          *registry_, "quant_job_gates_passed",
          "1 when the job passed every release gate, 0 when it failed one.")),
      tasks_started_(AddCounters(*registry_, "quant_tasks_started_total",
                                 "Task attempts leased to a worker.")),
      tasks_completed_(AddCounters(*registry_, "quant_tasks_completed_total",
                                   "Task attempts completed.")),
      tasks_failed_(AddCounters(*registry_, "quant_tasks_failed_total",
                                "Task attempts that failed.")),
      tasks_retried_(AddCounters(
          *registry_, "quant_tasks_retried_total",
          "Tasks put back in the queue after a failed or expired attempt.")),
      task_duration_(AddHistograms(
          *registry_, "quant_task_duration_seconds",
          "Time from lease to completion of completed task attempts.")),
      queue_depth_(AddGauges(*registry_, "quant_queue_depth",
                             "Tasks runnable now and not leased.")),
      workers_(AddGauges(*registry_, "quant_workers",
                         "Registered workers by state.")),
      lease_expiries_(AddCounters(
          *registry_, "quant_lease_expiries_total",
          "Task leases that expired without completion or failure.")),
      rpc_requests_(AddCounters(*registry_, "quant_rpc_requests_total",
                                "gRPC calls handled, by method and code.")),
      rpc_duration_(AddHistograms(*registry_, "quant_rpc_duration_seconds",
                                  "gRPC call handling time, by method.")) {
  // Fixed label sets exist from the start, at 0, so rate() and absent()
  // work before the first event.
  SetJobCounts(JobCounts());
  for (TaskKind kind : kAllTaskKinds) {
    const prometheus::Labels labels = {{"kind", TaskKindLabel(kind)}};
    tasks_started_.Add(labels);
    tasks_completed_.Add(labels);
    tasks_failed_.Add(labels);
    tasks_retried_.Add(labels);
    task_duration_.Add(labels, TaskDurationBuckets());
  }
  queue_depth_.Add({});
  SetWorkerCounts(WorkerCounts());
  lease_expiries_.Add({});
}

void QuantdMetrics::SetJobCounts(const JobCounts& counts) {
  jobs_.Add({{"state", "queued"}}).Set(counts.queued);
  jobs_.Add({{"state", "running"}}).Set(counts.running);
  jobs_.Add({{"state", "succeeded"}}).Set(counts.succeeded);
  jobs_.Add({{"state", "failed"}}).Set(counts.failed);
  jobs_.Add({{"state", "cancelled"}}).Set(counts.cancelled);
}

QuantdMetrics::JobSeries& QuantdMetrics::FindOrAddJob(
    absl::string_view job_id) {
  auto it = jobs_by_id_.find(job_id);
  if (it == jobs_by_id_.end()) {
    it = jobs_by_id_.emplace(std::string(job_id), JobSeries()).first;
  }
  return it->second;
}

void QuantdMetrics::SetJobGauge(JobSeries& job, GaugeFamily& family,
                                prometheus::Labels labels,
                                absl::string_view job_id, double value) {
  labels["job_id"] = std::string(job_id);
  Gauge& gauge = family.Add(labels);
  gauge.Set(value);
  job.gauges.emplace(&family, &gauge);
}

void QuantdMetrics::RemoveJobGauge(JobSeries& job, GaugeFamily& family,
                                   absl::string_view job_id) {
  const prometheus::Labels labels = {{"job_id", std::string(job_id)}};
  if (!family.Has(labels)) return;
  Gauge& gauge = family.Add(labels);
  job.gauges.erase({&family, &gauge});
  family.Remove(&gauge);
}

absl::Status QuantdMetrics::SetJobProgress(absl::string_view job_id,
                                           const JobProgress& progress) {
  if (absl::Status s = CheckJobId(job_id); !s.ok()) return s;
  if (absl::Status s = CheckCount("blocks_done", progress.blocks_done,
                                  "blocks_total", progress.blocks_total);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckCount("layers_done", progress.layers_done,
                                  "layers_total", progress.layers_total);
      !s.ok()) {
    return s;
  }
  double ratio = 0;
  if (progress.layers_total > 0) {
    ratio = static_cast<double>(progress.layers_done) / progress.layers_total;
  } else if (progress.blocks_total > 0) {
    ratio = static_cast<double>(progress.blocks_done) / progress.blocks_total;
  }
  MutexLock lock(&mu_);
  JobSeries& job = FindOrAddJob(job_id);
  SetJobGauge(job, job_progress_ratio_, {}, job_id, ratio);
  SetJobGauge(job, job_blocks_done_, {}, job_id, progress.blocks_done);
  SetJobGauge(job, job_blocks_planned_, {}, job_id, progress.blocks_total);
  SetJobGauge(job, job_layers_done_, {}, job_id, progress.layers_done);
  SetJobGauge(job, job_layers_planned_, {}, job_id, progress.layers_total);
  if (progress.eta_seconds.has_value()) {
    SetJobGauge(job, job_eta_seconds_, {}, job_id,
                std::max(0.0, *progress.eta_seconds));
  } else {
    RemoveJobGauge(job, job_eta_seconds_, job_id);
  }
  return absl::OkStatus();
}

absl::Status QuantdMetrics::OnLayerFinished(absl::string_view job_id,
                                            const LayerResult& layer) {
  if (absl::Status s = CheckJobId(job_id); !s.ok()) return s;
  if (layer.name.empty()) {
    return absl::InvalidArgumentError("layer.name: empty");
  }
  if (layer.type.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("layer.type: empty (layer ", layer.name, ")"));
  }
  // A mixture-of-experts expert's layer ("model.layers.3.mlp.experts.7.
  // down_proj") goes into one series per experts module and layer type
  // holding the worst expert so far (highest error, lowest gain): series
  // per expert would be 128 experts x 3 x 48 layers of a Qwen3-30B-A3B.
  const size_t experts_at = layer.name.find(".experts.");
  const bool expert = experts_at != std::string::npos;
  const std::string series =
      expert ? layer.name.substr(0, experts_at + 8) : layer.name;
  const prometheus::Labels cal = {
      {"layer", series}, {"type", layer.type}, {"split", "calibration"}};
  const prometheus::Labels heldout = {
      {"layer", series}, {"type", layer.type}, {"split", "heldout"}};
  MutexLock lock(&mu_);
  JobSeries& job = FindOrAddJob(job_id);
  auto set = [&](GaugeFamily& family, const prometheus::Labels& labels,
                 double value, bool higher_is_worse) {
    if (!expert) {
      SetJobGauge(job, family, labels, job_id, value);
      return;
    }
    prometheus::Labels with_job = labels;
    with_job["job_id"] = std::string(job_id);
    const bool seen = family.Has(with_job);
    Gauge& gauge = family.Add(with_job);
    if (!seen ||
        (higher_is_worse ? value > gauge.Value() : value < gauge.Value())) {
      gauge.Set(value);
    }
    job.gauges.emplace(&family, &gauge);
  };
  set(layer_rel_output_error_, cal, layer.rel_output_error_cal, true);
  set(layer_rel_output_error_, heldout, layer.rel_output_error_heldout, true);
  set(layer_gain_over_rtn_, cal, layer.gain_cal, false);
  set(layer_gain_over_rtn_, heldout, layer.gain_heldout, false);
  return absl::OkStatus();
}

absl::Status QuantdMetrics::SetGateValues(absl::string_view job_id,
                                          const GateValues& gates) {
  if (absl::Status s = CheckJobId(job_id); !s.ok()) return s;
  MutexLock lock(&mu_);
  JobSeries& job = FindOrAddJob(job_id);
  SetJobGauge(job, job_gate_ppl_ratio_, {}, job_id, gates.ppl_ratio);
  SetJobGauge(job, job_gate_mean_kl_, {}, job_id, gates.mean_kl);
  SetJobGauge(job, job_gate_top1_agreement_ratio_, {}, job_id,
              gates.top1_agreement);
  SetJobGauge(job, job_gates_passed_, {}, job_id, gates.passed ? 1 : 0);
  return absl::OkStatus();
}

absl::Status QuantdMetrics::OnJobFinished(absl::string_view job_id,
                                          absl::Time now) {
  if (absl::Status s = CheckJobId(job_id); !s.ok()) return s;
  MutexLock lock(&mu_);
  JobSeries& job = FindOrAddJob(job_id);
  if (!job.finished.has_value()) job.finished = now;
  return absl::OkStatus();
}

absl::Status QuantdMetrics::OnJobRestarted(absl::string_view job_id) {
  if (absl::Status s = CheckJobId(job_id); !s.ok()) return s;
  MutexLock lock(&mu_);
  auto it = jobs_by_id_.find(std::string(job_id));
  if (it != jobs_by_id_.end()) it->second.finished.reset();
  return absl::OkStatus();
}

int QuantdMetrics::RemoveExpired(absl::Time now) {
  MutexLock lock(&mu_);
  int removed = 0;
  for (auto it = jobs_by_id_.begin(); it != jobs_by_id_.end();) {
    const JobSeries& job = it->second;
    if (job.finished.has_value() && now - *job.finished >= options_.retention) {
      for (const auto& [family, gauge] : job.gauges) family->Remove(gauge);
      it = jobs_by_id_.erase(it);
      ++removed;
    } else {
      ++it;
    }
  }
  return removed;
}

void QuantdMetrics::OnTaskStarted(TaskKind kind) {
  tasks_started_.Add({{"kind", TaskKindLabel(kind)}}).Increment();
}

void QuantdMetrics::OnTaskCompleted(TaskKind kind, absl::Duration duration) {
  const prometheus::Labels labels = {{"kind", TaskKindLabel(kind)}};
  tasks_completed_.Add(labels).Increment();
  task_duration_.Add(labels, TaskDurationBuckets())
      .Observe(absl::ToDoubleSeconds(duration));
}

void QuantdMetrics::OnTaskFailed(TaskKind kind) {
  tasks_failed_.Add({{"kind", TaskKindLabel(kind)}}).Increment();
}

void QuantdMetrics::OnTaskRetried(TaskKind kind) {
  tasks_retried_.Add({{"kind", TaskKindLabel(kind)}}).Increment();
}

void QuantdMetrics::SetQueueDepth(int64_t runnable_tasks) {
  queue_depth_.Add({}).Set(runnable_tasks);
}

void QuantdMetrics::SetWorkerCounts(const WorkerCounts& counts) {
  workers_.Add({{"state", "idle"}}).Set(counts.idle);
  workers_.Add({{"state", "busy"}}).Set(counts.busy);
  workers_.Add({{"state", "lost"}}).Set(counts.lost);
}

void QuantdMetrics::OnLeasesExpired(int64_t count) {
  // Counters only go up; a negative count is a caller bug, not an event.
  if (count > 0) lease_expiries_.Add({}).Increment(count);
}

void QuantdMetrics::OnRpcFinished(absl::string_view method,
                                  absl::StatusCode code,
                                  absl::Duration duration) {
  const std::string method_label(method);
  rpc_requests_
      .Add({{"method", method_label}, {"code", absl::StatusCodeToString(code)}})
      .Increment();
  rpc_duration_.Add({{"method", method_label}}, RpcDurationBuckets())
      .Observe(absl::ToDoubleSeconds(duration));
}

}  // namespace quant::metrics

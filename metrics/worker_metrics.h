// WorkerMetrics: what a quant-worker exports on its own /metrics: its task
// attempts and their durations, the throughput of the numerical cores, and
// the tasks it runs now. Its own registry; serve it with MetricsEndpoint.
//
// Thread-safe. Calls with a bad argument return InvalidArgument naming it
// and record nothing.
#ifndef QUANT_METRICS_WORKER_METRICS_H_
#define QUANT_METRICS_WORKER_METRICS_H_

#include <map>
#include <memory>
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

// How a task attempt ended on this worker.
enum class TaskOutcome {
  kCompleted,  // CompleteTask accepted.
  kFailed,     // The task failed (FailTask).
  kCancelled,  // The job was cancelled while it ran.
  kLeaseLost,  // The lease expired or was superseded; the result was dropped.
};

// "completed", "failed", "cancelled", "lease_lost".
const char* TaskOutcomeLabel(TaskOutcome outcome);

// The numerical cores whose throughput the worker measures.
enum class WorkerCore {
  kHessian,  // H += XᵀX accumulation over calibration activations.
  kGptq,     // The GPTQ column sweep.
};

// "hessian", "gptq".
const char* WorkerCoreLabel(WorkerCore core);

class WorkerMetrics {
 public:
  WorkerMetrics();
  WorkerMetrics(const WorkerMetrics&) = delete;
  WorkerMetrics& operator=(const WorkerMetrics&) = delete;

  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }

  // quant_worker_slots: tasks the worker runs at once.
  void SetSlots(int slots);

  // quant_worker_kernel_info{isa,runs} = 1: the kernel level the worker
  // chose (core/kernels/isa.h name) and every level it runs, lowest first
  // ("v2,v3,v4"). A second call replaces the series.
  void SetKernelLevels(absl::string_view isa, absl::string_view runs);

  // The attempt of task `task_index` of `job_id` started: sets
  // quant_worker_current_task{job_id,task} to 1 and counts it in
  // quant_worker_busy_slots. InvalidArgument for an empty job_id or a
  // negative index; AlreadyExists when it is already running here.
  absl::Status OnTaskStarted(absl::string_view job_id, int task_index);

  // The attempt ended: removes its current_task series, frees its slot,
  // counts quant_worker_tasks_total{kind,outcome} and observes
  // quant_worker_task_duration_seconds{kind}. NotFound when it was not
  // started (nothing recorded).
  absl::Status OnTaskFinished(absl::string_view job_id, int task_index,
                              TaskKind kind, TaskOutcome outcome,
                              absl::Duration duration);

  // quant_worker_core_flops_per_second{core}: `flops` floating-point
  // operations done in `elapsed`, the latest measurement.
  // InvalidArgument for negative or non-finite flops, or an elapsed time
  // that is not positive and finite.
  absl::Status RecordCoreThroughput(WorkerCore core, double flops,
                                    absl::Duration elapsed);

 private:
  const std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>& tasks_;
  prometheus::Family<prometheus::Histogram>& task_duration_;
  prometheus::Family<prometheus::Gauge>& core_flops_per_second_;
  prometheus::Family<prometheus::Gauge>& current_task_;
  prometheus::Gauge& busy_slots_;
  prometheus::Gauge& slots_;
  prometheus::Family<prometheus::Gauge>& kernel_info_;

  Mutex mu_;
  prometheus::Gauge* kernel_info_series_ ABSL_GUARDED_BY(mu_) = nullptr;
  // Running attempts by (job, task index), with their current_task series.
  std::map<std::pair<std::string, int>, prometheus::Gauge*> running_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace quant::metrics

#endif  // QUANT_METRICS_WORKER_METRICS_H_

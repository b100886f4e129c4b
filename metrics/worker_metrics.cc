// WorkerMetrics: the worker's families and its running-task bookkeeping.
#include "metrics/worker_metrics.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "metrics/buckets.h"

namespace quant::metrics {
namespace {

constexpr TaskOutcome kOutcomes[] = {
    TaskOutcome::kCompleted, TaskOutcome::kFailed, TaskOutcome::kCancelled,
    TaskOutcome::kLeaseLost};
constexpr WorkerCore kCores[] = {WorkerCore::kHessian, WorkerCore::kGptq};

std::string TaskName(absl::string_view job_id, int task_index) {
  return absl::StrCat("task ", task_index, " of job ", job_id);
}

}  // namespace

const char* TaskOutcomeLabel(TaskOutcome outcome) {
  switch (outcome) {
    case TaskOutcome::kCompleted:
      return "completed";
    case TaskOutcome::kFailed:
      return "failed";
    case TaskOutcome::kCancelled:
      return "cancelled";
    case TaskOutcome::kLeaseLost:
      return "lease_lost";
  }
  return "unknown";
}

const char* WorkerCoreLabel(WorkerCore core) {
  switch (core) {
    case WorkerCore::kHessian:
      return "hessian";
    case WorkerCore::kGptq:
      return "gptq";
  }
  return "unknown";
}

WorkerMetrics::WorkerMetrics()
    : registry_(std::make_shared<prometheus::Registry>()),
      tasks_(prometheus::BuildCounter()
                 .Name("quant_worker_tasks_total")
                 .Help("Task attempts this worker ended, by kind and outcome.")
                 .Register(*registry_)),
      task_duration_(prometheus::BuildHistogram()
                         .Name("quant_worker_task_duration_seconds")
                         .Help("Time this worker spent on a task attempt, "
                               "any outcome.")
                         .Register(*registry_)),
      core_flops_per_second_(
          prometheus::BuildGauge()
              .Name("quant_worker_core_flops_per_second")
              .Help("Throughput of a numerical core in floating-point "
                    "operations per second, as last measured.")
              .Register(*registry_)),
      current_task_(prometheus::BuildGauge()
                        .Name("quant_worker_current_task")
                        .Help("1 for each task attempt running on this "
                              "worker now.")
                        .Register(*registry_)),
      busy_slots_(prometheus::BuildGauge()
                      .Name("quant_worker_busy_slots")
                      .Help("Task attempts running on this worker now.")
                      .Register(*registry_)
                      .Add({})),
      slots_(prometheus::BuildGauge()
                 .Name("quant_worker_slots")
                 .Help("Task attempts this worker runs at once.")
                 .Register(*registry_)
                 .Add({})),
      kernel_info_(prometheus::BuildGauge()
                       .Name("quant_worker_kernel_info")
                       .Help("1, labelled with the kernel level this worker "
                             "chose (isa) and the levels it runs (runs): a "
                             "job runs at the level of its first task.")
                       .Register(*registry_)) {
  for (TaskKind kind : kAllTaskKinds) {
    for (TaskOutcome outcome : kOutcomes) {
      tasks_.Add({{"kind", TaskKindLabel(kind)},
                  {"outcome", TaskOutcomeLabel(outcome)}});
    }
    task_duration_.Add({{"kind", TaskKindLabel(kind)}}, TaskDurationBuckets());
  }
  for (WorkerCore core : kCores) {
    core_flops_per_second_.Add({{"core", WorkerCoreLabel(core)}});
  }
}

void WorkerMetrics::SetSlots(int slots) { slots_.Set(slots); }

void WorkerMetrics::SetKernelLevels(absl::string_view isa,
                                    absl::string_view runs) {
  MutexLock lock(&mu_);
  if (kernel_info_series_ != nullptr) kernel_info_.Remove(kernel_info_series_);
  kernel_info_series_ = &kernel_info_.Add(
      {{"isa", std::string(isa)}, {"runs", std::string(runs)}});
  kernel_info_series_->Set(1);
}

absl::Status WorkerMetrics::OnTaskStarted(absl::string_view job_id,
                                          int task_index) {
  if (job_id.empty()) return absl::InvalidArgumentError("job_id: empty");
  if (task_index < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("task_index: negative (", task_index, ")"));
  }
  MutexLock lock(&mu_);
  auto [it, added] = running_.try_emplace({std::string(job_id), task_index});
  if (!added) {
    return absl::AlreadyExistsError(
        absl::StrCat(TaskName(job_id, task_index), " is already running"));
  }
  it->second = &current_task_.Add(
      {{"job_id", std::string(job_id)}, {"task", absl::StrCat(task_index)}});
  it->second->Set(1);
  busy_slots_.Set(running_.size());
  return absl::OkStatus();
}

absl::Status WorkerMetrics::OnTaskFinished(absl::string_view job_id,
                                           int task_index, TaskKind kind,
                                           TaskOutcome outcome,
                                           absl::Duration duration) {
  {
    MutexLock lock(&mu_);
    auto it = running_.find({std::string(job_id), task_index});
    if (it == running_.end()) {
      return absl::NotFoundError(
          absl::StrCat(TaskName(job_id, task_index), " is not running"));
    }
    current_task_.Remove(it->second);
    running_.erase(it);
    busy_slots_.Set(running_.size());
  }
  tasks_
      .Add({{"kind", TaskKindLabel(kind)},
            {"outcome", TaskOutcomeLabel(outcome)}})
      .Increment();
  task_duration_.Add({{"kind", TaskKindLabel(kind)}}, TaskDurationBuckets())
      .Observe(absl::ToDoubleSeconds(duration));
  return absl::OkStatus();
}

absl::Status WorkerMetrics::RecordCoreThroughput(WorkerCore core, double flops,
                                                 absl::Duration elapsed) {
  if (!std::isfinite(flops) || flops < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("flops: ", flops, " is not a finite count >= 0"));
  }
  if (elapsed <= absl::ZeroDuration() || elapsed == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("elapsed: ", absl::FormatDuration(elapsed),
                     " is not positive and finite"));
  }
  core_flops_per_second_.Add({{"core", WorkerCoreLabel(core)}})
      .Set(flops / absl::ToDoubleSeconds(elapsed));
  return absl::OkStatus();
}

}  // namespace quant::metrics

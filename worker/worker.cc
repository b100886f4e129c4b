// Worker: register, lease, run with heartbeats, complete or fail.
#include "worker/worker.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <optional>
#include <thread>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "common/job_constants.h"
#include "core/base/allocator_tuning.h"
#include "core/base/file_util.h"
#include "core/base/read_roots.h"
#include "core/kernels/dispatch.h"
#include "core/pipeline/round_job_tasks.h"
#include "core/pipeline/task_io.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "worker/task_runner.h"

namespace quant::worker {
namespace {

std::string Describe(const v1::Task& task) {
  const char* split =
      task.split() == v1::TASK_SPLIT_HELDOUT ? "held-out" : "calibration";
  switch (task.kind()) {
    case v1::TASK_KIND_BLOCK:
      return absl::StrCat(task.job_id(), " block ", task.block());
    case v1::TASK_KIND_SHARD_STATS:
      return absl::StrCat(task.job_id(), " block ", task.block(), " group ",
                          task.group(), ": ", split, " shard ", task.shard());
    case v1::TASK_KIND_REDUCE:
      return absl::StrCat(task.job_id(), " block ", task.block(), " group ",
                          task.group(), ": reduce",
                          task.layer().empty() ? "" : " ",
                          task.layer().substr(0, 32));
    case v1::TASK_KIND_SHARD_OUTPUT:
      return absl::StrCat(task.job_id(), " block ", task.block(), ": ", split,
                          " shard ", task.shard(), " output");
    case v1::TASK_KIND_FINALIZE_PACK:
      return absl::StrCat(task.job_id(), " finalize: pack");
    case v1::TASK_KIND_GATE_PART:
      return absl::StrCat(task.job_id(), " finalize: gate part ", task.shard(),
                          " of ", task.gate_parts());
    default:
      return absl::StrCat(task.job_id(), " finalize");
  }
}

metrics::TaskKind MetricsKind(const v1::Task& task) {
  switch (task.kind()) {
    case v1::TASK_KIND_BLOCK:
      return metrics::TaskKind::kBlock;
    case v1::TASK_KIND_SHARD_STATS:
      return metrics::TaskKind::kShardStats;
    case v1::TASK_KIND_REDUCE:
      return metrics::TaskKind::kReduce;
    case v1::TASK_KIND_SHARD_OUTPUT:
      return metrics::TaskKind::kShardOutput;
    case v1::TASK_KIND_FINALIZE_PACK:
      return metrics::TaskKind::kFinalizePack;
    case v1::TASK_KIND_GATE_PART:
      return metrics::TaskKind::kGatePart;
    default:
      return metrics::TaskKind::kFinalize;
  }
}

}  // namespace

// One leased attempt: who holds it, and what the heartbeat thread and the
// task share.
struct Worker::RunningTask {
  const v1::Task* task = nullptr;
  std::string lease_id;
  std::string worker_id;  // The id that leased it (quantd ties them).
  std::string what;       // "JOB block 2", for logs.
  int64_t started_ms = 0;

  Mutex mu;
  CondVar wake;
  bool finished ABSL_GUARDED_BY(mu) = false;
  int layers_done ABSL_GUARDED_BY(mu) = 0;
  int layers_total ABSL_GUARDED_BY(mu) = 0;
  std::string current ABSL_GUARDED_BY(mu);
  std::vector<v1::LayerAudit> unsent ABSL_GUARDED_BY(mu);
  std::atomic<bool> cancel{false};
  bool cancelled_by_job ABSL_GUARDED_BY(mu) = false;
  bool lease_lost ABSL_GUARDED_BY(mu) = false;
  // quantd refused a heartbeat's contents (INVALID_ARGUMENT: a finished
  // layer it does not accept): why. Retrying cannot help, and the task's
  // layers would never reach the job, so the task is cancelled and failed
  // with this reason instead of running on until its lease expires.
  std::string refused ABSL_GUARDED_BY(mu);
  // Cancelled because it ran past WorkerOptions::max_task_ms.
  bool past_deadline ABSL_GUARDED_BY(mu) = false;
  // Declared stuck: its lease is no longer renewed, nothing is reported.
  bool abandoned ABSL_GUARDED_BY(mu) = false;

  // Why the task ended, as the heartbeat thread and Beat saw it.
  struct Ending {
    bool abandoned;
    bool lease_lost;
    bool cancelled_by_job;
    bool past_deadline;
    std::string refused;
  };
  Ending ending() {
    MutexLock lock(&mu);
    return {abandoned, lease_lost, cancelled_by_job, past_deadline, refused};
  }
};

absl::StatusOr<std::unique_ptr<Worker>> Worker::Create(WorkerOptions options) {
  if (options.slots < 1 || options.slots > 64) {
    return absl::InvalidArgumentError(
        absl::StrCat("--slots: must be in 1..64, got ", options.slots));
  }
  if (options.threads < 1 || options.threads > 1024) {
    return absl::InvalidArgumentError(
        absl::StrCat("--threads: must be in 1..1024, got ", options.threads));
  }
  if (options.server.empty()) {
    return absl::InvalidArgumentError("--server: required (HOST:PORT)");
  }
  if (options.max_task_ms < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max_task_seconds: must be >= 0 (0: no bound), got ",
                     options.max_task_ms / 1000.0));
  }
  if (options.cancel_grace_ms < 1000) {
    return absl::InvalidArgumentError(
        absl::StrCat("--cancel_grace_seconds: must be at least 1, got ",
                     options.cancel_grace_ms / 1000.0));
  }
  std::shared_ptr<grpc::ChannelCredentials> credentials =
      grpc::InsecureChannelCredentials();
  if (!options.tls_ca.empty()) {
    absl::StatusOr<std::string> ca = ReadFileToString(options.tls_ca, 1 << 20);
    if (!ca.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--tls_ca: ", ca.status().message()));
    }
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = *ca;
    credentials = grpc::SslCredentials(ssl);
  }
  if (options.metrics != nullptr) options.metrics->SetSlots(options.slots);
  if (options.clock == nullptr) options.clock = MonotonicClock::Default();
  std::unique_ptr<Worker> worker(new Worker(std::move(options)));
  worker->channel_ = grpc::CreateChannel(worker->options_.server, credentials);
  worker->stub_ = v1::WorkerService::NewStub(worker->channel_);
  return worker;
}

void Worker::OnStuckTask(const std::string& message) {
  if (options_.on_stuck_task != nullptr) {
    options_.on_stuck_task(message);
    return;
  }
  Log(absl::StrCat(message, "; exiting with code ", kStuckTaskExitCode,
                   " (the stuck thread cannot be stopped)"));
  std::fflush(stderr);
  std::_Exit(kStuckTaskExitCode);
}

void Worker::Log(const std::string& message) const {
  std::fprintf(stderr, "quant-worker[%s]: %s\n", options_.name.c_str(),
               message.c_str());
}

std::unique_ptr<grpc::ClientContext> Worker::Context(int64_t timeout_ms) const {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() +
                        std::chrono::milliseconds(timeout_ms));
  if (!options_.token.empty()) {
    context->AddMetadata("authorization", "Bearer " + options_.token);
  }
  return context;
}

void Worker::RequestStop() { stop_.store(true); }

std::string Worker::WorkerId(const std::string& stale) {
  MutexLock lock(&mu_);
  if (!worker_id_.empty() && worker_id_ != stale) return worker_id_;
  int64_t backoff_ms = 200;
  while (!stop_.load()) {
    v1::RegisterWorkerRequest request;
    request.set_name(options_.name);
    request.set_slots(options_.slots);
    request.set_version(options_.version);
    for (const std::string& level : options_.isa_levels) {
      request.add_isa_levels(level);
    }
    if (options_.rates.has_value()) {
      v1::WorkRates* rates = request.mutable_rates();
      rates->set_forward_flops_per_second(
          options_.rates->forward_flops_per_second);
      rates->set_hessian_flops_per_second(
          options_.rates->hessian_flops_per_second);
      rates->set_gptq_flops_per_second(options_.rates->gptq_flops_per_second);
    }
    v1::RegisterWorkerResponse response;
    grpc::Status status =
        stub_->RegisterWorker(Context(10'000).get(), request, &response);
    if (status.ok()) {
      worker_id_ = response.worker_id();
      if (response.heartbeat_interval_ms() > 0) {
        heartbeat_ms_ = response.heartbeat_interval_ms();
      }
      Log(absl::StrCat(
          "registered as ", worker_id_, " (", options_.slots, " slot(s) of ",
          options_.threads, " thread(s), kernels ",
          kernels::DescribeIsa(kernels::ProcessIsa()), "; runs jobs at ",
          options_.isa_levels.empty()
              ? std::string(kernels::IsaName(kernels::ProcessIsa()))
              : absl::StrJoin(options_.isa_levels, ", "),
          "; heartbeat every ", heartbeat_ms_.load(), " ms",
          options_.allocator.empty() ? "" : "; allocator ", options_.allocator,
          ")"));
      return worker_id_;
    }
    if (status.error_code() == grpc::StatusCode::UNAUTHENTICATED ||
        status.error_code() == grpc::StatusCode::PERMISSION_DENIED ||
        status.error_code() == grpc::StatusCode::INVALID_ARGUMENT) {
      Log(absl::StrCat("cannot register: ", status.error_message()));
      stop_.store(true);
      return "";
    }
    Log(absl::StrCat("coordinator unreachable (", status.error_message(),
                     "); retrying"));
    clock_->SleepForMs(backoff_ms);
    backoff_ms = std::min<int64_t>(backoff_ms * 2, 5'000);
  }
  return "";
}

absl::Status Worker::Run() {
  if (WorkerId().empty()) {
    // Never registered (WorkerId returns the id once there is one).
    return stop_.load() ? absl::UnauthenticatedError(
                              "could not register with the coordinator")
                        : absl::OkStatus();
  }
  std::vector<std::thread> slots;
  for (int slot = 0; slot < options_.slots; ++slot) {
    slots.emplace_back([this, slot] { SlotLoop(slot); });
  }
  for (std::thread& t : slots) t.join();
  return absl::OkStatus();
}

void Worker::SlotLoop(int /*slot*/) {
  int64_t backoff_ms = 200;
  // A task's matrices stay in the heap while it runs (allocator_tuning.h)
  // and after it: the next task, often the same job's next round, reuses
  // them without faulting its pages in again. A lease that finds no task
  // (an idle worker, within --lease_wait_ms) gives them back.
  bool holds_task_memory = false;
  while (!stop_.load()) {
    const std::string id = WorkerId();
    if (id.empty()) return;
    v1::LeaseTaskRequest request;
    request.set_worker_id(id);
    request.set_wait_ms(options_.lease_wait_ms);
    for (const std::string& level : options_.isa_levels) {
      request.add_isa_levels(level);
    }
    v1::LeaseTaskResponse response;
    const int64_t started_ms = clock_->NowMs();
    grpc::Status status = stub_->LeaseTask(
        Context(options_.lease_wait_ms + 10'000).get(), request, &response);
    if (status.error_code() == grpc::StatusCode::NOT_FOUND) {
      WorkerId(id);  // The coordinator restarted: register again.
      continue;
    }
    if (!status.ok()) {
      if (stop_.load()) return;
      Log(absl::StrCat("LeaseTask: ", status.error_message(), "; retrying"));
      clock_->SleepForMs(backoff_ms);
      backoff_ms = std::min<int64_t>(backoff_ms * 2, 5'000);
      continue;
    }
    backoff_ms = 200;
    if (!response.has_task()) {
      if (holds_task_memory) {
        ReleaseFreeMemory();
        holds_task_memory = false;
      }
      // A coordinator that is stopping answers at once: do not spin.
      if (clock_->NowMs() - started_ms < 100) clock_->SleepForMs(500);
      continue;
    }
    if (stop_.load()) {
      // Leased just as we were told to stop: hand it straight back.
      v1::FailTaskRequest fail;
      fail.set_lease_id(response.lease_id());
      fail.set_worker_id(id);
      fail.set_error("worker stopping before it started the task");
      fail.set_retryable(true);
      v1::FailTaskResponse ignored;
      stub_->FailTask(Context(10'000).get(), fail, &ignored);
      return;
    }
    RunLeased(response, id);
    holds_task_memory = true;
  }
}

void Worker::RunLeased(const v1::LeaseTaskResponse& leased,
                       const std::string& worker_id) {
  RunningTask running;
  running.task = &leased.task();
  running.lease_id = leased.lease_id();
  running.worker_id = worker_id;
  running.what = Describe(leased.task());
  const v1::Task& task = leased.task();
  const std::optional<kernels::IsaLevel> level = TaskLevel(running);
  if (!level.has_value()) return;
  Log(absl::StrCat("running ", running.what, " (attempt ", task.attempt(),
                   ") with ", kernels::IsaName(*level), " kernels"));
  running.started_ms = clock_->NowMs();
  {
    MutexLock lock(&running.mu);
    running.layers_total =
        task.kind() == v1::TASK_KIND_BLOCK ? common::kLayersPerBlockTask
        : task.kind() == v1::TASK_KIND_REDUCE
            ? std::max(1, common::LayersOfBlockGroup(task.group()))
            : 1;
  }
  const metrics::TaskKind kind = MetricsKind(task);
  if (options_.metrics != nullptr) {
    options_.metrics->OnTaskStarted(task.job_id(), task.index()).IgnoreError();
  }
  // How the attempt ended, recorded on every way out.
  metrics::TaskOutcome outcome_label = metrics::TaskOutcome::kFailed;
  absl::Cleanup record_outcome = [&] {
    if (options_.metrics == nullptr) return;
    options_.metrics
        ->OnTaskFinished(
            task.job_id(), task.index(), kind, outcome_label,
            absl::Milliseconds(clock_->NowMs() - running.started_ms))
        .IgnoreError();
  };

  std::thread heartbeat([this, &running] { WatchRunningTask(&running); });
  const absl::StatusOr<TaskOutcome> outcome = RunAtLevel(&running, *level);
  {
    MutexLock lock(&running.mu);
    running.finished = true;
    if (outcome.ok()) running.layers_done = running.layers_total;
  }
  running.wake.SignalAll();
  heartbeat.join();
  outcome_label = ReportOutcome(&running, outcome);
}

std::optional<kernels::IsaLevel> Worker::TaskLevel(const RunningTask& running) {
  // The job's level, exactly (results differ in the last bits between
  // levels); a coordinator that pins none leaves the worker's own.
  const v1::Task& task = *running.task;
  if (task.isa().empty()) return kernels::ProcessIsa();
  absl::StatusOr<kernels::IsaLevel> wanted = kernels::ParseIsaName(task.isa());
  if (wanted.ok() && kernels::CanRun(*wanted)) return *wanted;
  const std::string error =
      absl::StrCat("worker ", options_.name, " cannot run ", running.what,
                   " at kernel level ", task.isa(), ": ",
                   wanted.ok() ? kernels::DescribeIsa(kernels::ProcessIsa())
                               : std::string(wanted.status().message()));
  Log(error);
  v1::FailTaskRequest fail;
  fail.set_lease_id(running.lease_id);
  fail.set_worker_id(running.worker_id);
  fail.set_error(error);
  fail.set_retryable(true);
  v1::FailTaskResponse ignored;
  stub_->FailTask(Context(10'000).get(), fail, &ignored);
  failed_.fetch_add(1);
  return std::nullopt;
}

bool Worker::Beat(RunningTask* running) {
  v1::HeartbeatRequest request;
  request.set_lease_id(running->lease_id);
  request.set_worker_id(running->worker_id);
  std::vector<v1::LayerAudit> sending;
  {
    MutexLock lock(&running->mu);
    v1::TaskProgress* progress = request.mutable_progress();
    progress->set_layers_done(running->layers_done);
    progress->set_layers_total(running->layers_total);
    progress->set_current_layer(running->current);
    sending.swap(running->unsent);
    for (const v1::LayerAudit& layer : sending) {
      *progress->add_finished_layers() = layer;
    }
  }
  v1::HeartbeatResponse response;
  grpc::Status status =
      stub_->Heartbeat(Context(10'000).get(), request, &response);
  if (status.ok() && options_.log_heartbeats) {
    Log(absl::StrCat("heartbeat ", running->what, ": layers ",
                     request.progress().layers_done(), "/",
                     request.progress().layers_total()));
  }
  MutexLock lock(&running->mu);
  if (status.ok()) {
    if (response.cancelled()) {
      running->cancelled_by_job = true;
      running->cancel.store(true);
    }
    return true;
  }
  if (status.error_code() == grpc::StatusCode::FAILED_PRECONDITION ||
      status.error_code() == grpc::StatusCode::NOT_FOUND) {
    // Expired or superseded: another attempt owns the task now.
    running->lease_lost = true;
    running->cancel.store(true);
    return true;
  }
  if (status.error_code() == grpc::StatusCode::INVALID_ARGUMENT) {
    // Refused, not unreachable: sending the same layers again would be
    // refused again. The next beats carry progress only, which keeps the
    // lease while the task stops; the task then fails with this reason.
    if (running->refused.empty()) running->refused = status.error_message();
    running->cancel.store(true);
    return true;
  }
  // Unreachable for now: send these layers with the next beat.
  running->unsent.insert(running->unsent.begin(), sending.begin(),
                         sending.end());
  return false;
}

void Worker::WatchRunningTask(RunningTask* running) {
  // Wakes every 100 ms of real time (a condition-variable wait) and judges
  // the schedule, the task bound and the cancel grace on clock_, so that a
  // test moving a FakeClock sees them act at the next wake.
  running->mu.Lock();
  int64_t next_beat_ms = clock_->NowMs() + heartbeat_ms_.load();
  std::optional<int64_t> cancelled_at_ms;
  while (!running->finished) {
    running->wake.WaitFor(&running->mu, std::chrono::milliseconds(100));
    if (running->finished) break;
    if (stop_.load()) running->cancel.store(true);
    const int64_t now_ms = clock_->NowMs();
    if (options_.max_task_ms > 0 && !running->past_deadline &&
        now_ms - running->started_ms > options_.max_task_ms) {
      running->past_deadline = true;
      running->cancel.store(true);
    }
    if (running->cancel.load() && !cancelled_at_ms.has_value()) {
      cancelled_at_ms = now_ms;
    }
    if (cancelled_at_ms.has_value() &&
        now_ms - *cancelled_at_ms > options_.cancel_grace_ms) {
      // Renewing the lease now would keep the task from every other worker
      // for as long as this thread stays stuck.
      running->abandoned = true;
      const std::string why =
          running->past_deadline      ? "it ran past --max_task_seconds"
          : running->cancelled_by_job ? "its job was cancelled"
          : running->lease_lost       ? "its lease was lost"
          : !running->refused.empty() ? "quantd refused its heartbeat"
                                      : "the worker is stopping";
      running->mu.Unlock();
      OnStuckTask(absl::StrCat(
          running->what, " did not stop within ",
          options_.cancel_grace_ms / 1000.0, " s of being cancelled (", why,
          "): it is stuck where it cannot see the cancellation, most likely "
          "in a read that does not return; its lease is no longer renewed, "
          "so the task goes to another worker"));
      return;
    }
    if (now_ms < next_beat_ms) continue;
    running->mu.Unlock();
    Beat(running);
    running->mu.Lock();
    // The next beat is due an interval after this one was sent, not after
    // its answer came: a quantd slow to answer (a loaded host, a commit
    // waiting on the disk) must not stretch the gaps between renewals
    // towards the lease. A beat that took longer than an interval is
    // followed by the next at once.
    next_beat_ms = now_ms + heartbeat_ms_.load();
  }
  running->mu.Unlock();
}

absl::StatusOr<TaskOutcome> Worker::RunAtLevel(RunningTask* running,
                                               kernels::IsaLevel level) {
  TaskProgressSink sink;
  sink.on_stage = [running](const std::string& stage) {
    MutexLock lock(&running->mu);
    running->current = stage;
  };
  sink.on_layer = [running](const v1::LayerAudit& layer) {
    MutexLock lock(&running->mu);
    running->layers_done =
        std::min(running->layers_done + 1, running->layers_total);
    running->current = layer.name();
    running->unsent.push_back(layer);
  };
  sink.on_core_work = [this](double hessian_flops, double hessian_seconds,
                             double gptq_flops, double gptq_seconds) {
    if (options_.metrics == nullptr) return;
    if (hessian_seconds > 0) {
      options_.metrics
          ->RecordCoreThroughput(metrics::WorkerCore::kHessian, hessian_flops,
                                 absl::Seconds(hessian_seconds))
          .IgnoreError();
    }
    if (gptq_seconds > 0) {
      options_.metrics
          ->RecordCoreThroughput(metrics::WorkerCore::kGptq, gptq_flops,
                                 absl::Seconds(gptq_seconds))
          .IgnoreError();
    }
  };
  // This thread and the task's thread pool run at the job's level.
  kernels::ScopedIsa scoped(level);
  // Every file the task opens must lie under these (read_roots.h).
  const v1::Task& task = *running->task;
  std::optional<ScopedReadRoots> confined;
  if (task.read_roots_size() > 0) {
    confined.emplace(std::vector<std::string>(task.read_roots().begin(),
                                              task.read_roots().end()));
  }
  TaskLimits limits;
  limits.max_activation_bytes = options_.max_activation_bytes;
  limits.threads = options_.threads;
  limits.inputs_cache = &inputs_cache_;
  limits.shard_stashes = &shard_stashes_;
  limits.round_blocks = &round_blocks_;
  limits.file_digests = &file_digests_;
  return options_.run_task != nullptr
             ? options_.run_task(task, sink, &running->cancel, limits)
             : RunTask(task, sink, &running->cancel, limits);
}

metrics::TaskOutcome Worker::ReportOutcome(
    RunningTask* running, const absl::StatusOr<TaskOutcome>& outcome) {
  const std::string& what = running->what;
  if (running->ending().abandoned) {
    // Its lease went to another worker (or will): nothing to report.
    Log(absl::StrCat(what,
                     ": returned after it was declared stuck; result "
                     "not reported"));
    ++failed_;
    return metrics::TaskOutcome::kLeaseLost;
  }
  // A restarting coordinator is back within seconds and keeps the lease
  // (it is in its store): retry the last beat and the completion rather
  // than lose the layers or redo the task.
  const int64_t give_up_ms = clock_->NowMs() + 60'000;
  int64_t backoff_ms = 200;
  auto wait_a_bit = [&] {
    clock_->SleepForMs(backoff_ms);
    backoff_ms = std::min<int64_t>(backoff_ms * 2, 3'000);
  };
  if (outcome.ok() && !running->ending().lease_lost &&
      running->ending().refused.empty()) {
    // The last layers reach the job's events before the task ends.
    while (!Beat(running) && clock_->NowMs() < give_up_ms) wait_a_bit();
  }
  const RunningTask::Ending ending = running->ending();
  if (ending.lease_lost) {
    Log(absl::StrCat(what,
                     ": lease lost (expired or taken over); result "
                     "not reported"));
    ++failed_;
    return metrics::TaskOutcome::kLeaseLost;
  }
  const v1::Task& task = *running->task;
  if (outcome.ok() && ending.refused.empty()) {
    v1::CompleteTaskRequest request;
    request.set_lease_id(running->lease_id);
    request.set_worker_id(running->worker_id);
    request.set_output_uri(outcome->output_uri);
    request.set_output_sha256(outcome->output_sha256);
    request.set_empty_shard(outcome->empty_shard);
    v1::CompleteTaskResponse response;
    grpc::Status status =
        stub_->CompleteTask(Context(30'000).get(), request, &response);
    while ((status.error_code() == grpc::StatusCode::UNAVAILABLE ||
            status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) &&
           clock_->NowMs() < give_up_ms) {
      wait_a_bit();
      status = stub_->CompleteTask(Context(30'000).get(), request, &response);
    }
    if (!status.ok()) {
      ++failed_;
      Log(absl::StrCat(what, ": completion refused: ", status.error_message()));
      return metrics::TaskOutcome::kFailed;
    }
    ++completed_;
    const double seconds = (clock_->NowMs() - running->started_ms) / 1000.0;
    Log(absl::StrCat(what, " done in ", absl::StrFormat("%.2f", seconds), " s",
                     task.kind() == v1::TASK_KIND_FINALIZE
                         ? (outcome->passed ? " (gates PASS)" : " (gates FAIL)")
                         : ""));
    return metrics::TaskOutcome::kCompleted;
  }
  ++failed_;
  metrics::TaskOutcome label = metrics::TaskOutcome::kFailed;
  const absl::Status& error = outcome.status();
  v1::FailTaskRequest request;
  request.set_lease_id(running->lease_id);
  request.set_worker_id(running->worker_id);
  if (!ending.refused.empty()) {
    // What this worker reports is refused: a mismatch between this worker
    // and quantd that another attempt of the same code would repeat.
    request.set_error(
        absl::StrCat("quantd refused the task's progress: ", ending.refused));
    request.set_retryable(false);
  } else if (ending.cancelled_by_job) {
    label = metrics::TaskOutcome::kCancelled;
    request.set_error("job cancelled");
    request.set_retryable(true);
  } else if (ending.past_deadline && absl::IsCancelled(error)) {
    request.set_error(absl::StrCat("task exceeded --max_task_seconds (",
                                   options_.max_task_ms / 1000.0,
                                   " s) and was cancelled"));
    request.set_retryable(true);
  } else if (absl::IsCancelled(error)) {
    request.set_error("worker stopping (SIGTERM); task released");
    request.set_retryable(true);
  } else if (std::optional<int> changed = ChangedBlockOutput(error)) {
    // An input changed on disk since its task completed: quantd runs that
    // block again, then this task.
    request.set_error(std::string(error.message()));
    request.set_retryable(true);
    request.add_rerun_blocks(*changed);
  } else if (std::optional<std::string> file = ChangedRoundFile(error)) {
    // Likewise for a round file: quantd runs the task that wrote it again.
    request.set_error(std::string(error.message()));
    request.set_retryable(true);
    request.add_rerun_round_files(*file);
  } else {
    request.set_error(std::string(error.message()));
    request.set_retryable(IsRetryable(error));
  }
  Log(absl::StrCat(what, ": ", request.error()));
  v1::FailTaskResponse response;
  grpc::Status status =
      stub_->FailTask(Context(10'000).get(), request, &response);
  if (!status.ok()) {
    Log(absl::StrCat(what, ": FailTask: ", status.error_message()));
  }
  return label;
}

}  // namespace quant::worker

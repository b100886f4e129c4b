// quant-worker's main loop: registers with quantd, then each of its slots
// long-polls LeaseTask, runs the task through core/ (task_runner.h) while a
// heartbeat thread renews the lease, reports the layers finished since the
// last beat and learns of cancellation, and ends the attempt with
// CompleteTask or FailTask.
//
// Stopping (SIGTERM): no new leases; running tasks are cancelled at their
// next layer group and released with a retryable FailTask, so another
// worker picks them up at once instead of after the lease expires.
// A coordinator that restarted answers LeaseTask NOT_FOUND: the worker
// registers again. An unreachable coordinator is retried with backoff.
//
// Every task is time-bounded: past max_task_ms it is cancelled and failed
// (retryable). A task that does not return within cancel_grace_ms of being
// cancelled, for any reason, is stuck where it cannot see the cancellation
// (a read from storage that never returns): the worker stops renewing its
// lease, so that the task goes to another worker when the lease expires,
// and calls on_stuck_task, which by default ends the process (the stuck
// thread cannot be stopped; a supervisor restarts the worker).
#ifndef QUANT_WORKER_WORKER_H_
#define QUANT_WORKER_WORKER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/base/clock.h"
#include "core/base/mutex.h"
#include "core/estimate/work_model.h"
#include "core/kernels/isa.h"
#include "core/pipeline/job_tasks.h"
#include "grpcpp/channel.h"
#include "metrics/worker_metrics.h"
#include "quant/v1/worker.grpc.pb.h"
#include "worker/task_runner.h"

namespace quant::worker {

struct WorkerOptions {
  std::string server = "127.0.0.1:50051";
  std::string name;    // For listings and logs.
  int slots = 1;       // Tasks run at once.
  std::string token;   // Worker bearer token; empty: none sent.
  std::string tls_ca;  // PEM root certificate file: connect with TLS.
  int64_t lease_wait_ms = 10'000;
  // Log each acknowledged heartbeat ("heartbeat JOB block 2: layers 3/7"):
  // for debugging, and for fault tests that must act between two beats.
  bool log_heartbeats = false;
  std::string version;
  // How the allocator was tuned (core/base/allocator_tuning.h), for the
  // registration line.
  std::string allocator;
  // Hidden states a block task holds in memory; beyond, it spills them to
  // its attempt area (see JobTaskContext::max_activation_bytes).
  int64_t max_activation_bytes = kDefaultMaxActivationBytes;
  // Threads each block task runs on (>= 1).
  int threads = 1;
  // Kernel levels (core/kernels/isa.h names) this worker runs, lowest
  // first; the last is its own (the process level, from --isa). quantd
  // leases it only tasks of jobs at one of them, and each task runs at its
  // job's level. Empty: the process level only, not told to quantd.
  std::vector<std::string> isa_levels;
  // Its measured rates (core/estimate/rate_probe.h), sent when registering;
  // unset: none sent.
  std::optional<WorkRates> rates;
  // Where to record task and core metrics; null: none. Not owned.
  metrics::WorkerMetrics* metrics = nullptr;
  // A task running longer than this is cancelled and failed as retryable
  // ("exceeded --max_task_seconds"); 0: no bound.
  int64_t max_task_ms = kDefaultMaxTaskMs;
  // How long a cancelled task may take to return before it counts as stuck.
  // Cancellation is seen between layer groups, so this must exceed the
  // longest layer group's time.
  int64_t cancel_grace_ms = kDefaultCancelGraceMs;
  // Called (once, from the heartbeat thread) with a message naming the task
  // when it is stuck; its lease is no longer renewed. Null: log the message
  // and end the process with exit code kStuckTaskExitCode.
  std::function<void(const std::string&)> on_stuck_task;
  // Time for the task bound, the cancel grace, the heartbeat schedule and
  // every retry backoff. Null: MonotonicClock::Default(). Not owned.
  Clock* clock = nullptr;
  // Runs a leased task. Null: RunTask (task_runner.h). Tests inject tasks
  // that hang.
  std::function<absl::StatusOr<TaskOutcome>(
      const v1::Task&, const TaskProgressSink&, const std::atomic<bool>*,
      const TaskLimits&)>
      run_task;

  static constexpr int64_t kDefaultMaxTaskMs = 24LL * 3600 * 1000;
  static constexpr int64_t kDefaultCancelGraceMs = 600'000;
};

// The exit code of a worker that ended itself because a task was stuck
// (EX_TEMPFAIL: try again; the task is retried elsewhere).
inline constexpr int kStuckTaskExitCode = 75;

class Worker {
 public:
  // InvalidArgument for a bad option (slots, unreadable CA file).
  static absl::StatusOr<std::unique_ptr<Worker>> Create(WorkerOptions options);

  // Runs until RequestStop(); returns once every slot has ended its task.
  absl::Status Run();
  // Safe from any thread.
  void RequestStop();
  bool stopping() const { return stop_.load(); }

  // Tasks completed and failed by this process (for tests and logs).
  int completed() const { return completed_.load(); }
  int failed() const { return failed_.load(); }

 private:
  struct RunningTask;

  explicit Worker(WorkerOptions options)
      : options_(std::move(options)),
        clock_(options_.clock),
        shard_stashes_(options_.max_activation_bytes) {}

  void SlotLoop(int slot);
  // The current worker id, registering (again) when `stale` names it.
  std::string WorkerId(const std::string& stale = "");
  // Runs one leased task; `worker_id` is the id that leased it, which every
  // call about the lease carries (quantd ties a lease to its worker).
  void RunLeased(const v1::LeaseTaskResponse& leased,
                 const std::string& worker_id);
  // The steps of RunLeased. The kernel level the task must run at, or
  // nullopt after failing the task back when this CPU cannot run it.
  std::optional<kernels::IsaLevel> TaskLevel(const RunningTask& running);
  // The heartbeat thread: beats on schedule, cancels a task past its bound
  // or of a stopping worker, declares it stuck past the grace.
  void WatchRunningTask(RunningTask* running);
  // One heartbeat with the progress and the layers not yet reported; false
  // when quantd could not be reached (the layers are kept for the next).
  bool Beat(RunningTask* running);
  absl::StatusOr<TaskOutcome> RunAtLevel(RunningTask* running,
                                         kernels::IsaLevel level);
  // Completes or fails the lease as the outcome says; how it ended.
  metrics::TaskOutcome ReportOutcome(
      RunningTask* running, const absl::StatusOr<TaskOutcome>& outcome);
  std::unique_ptr<grpc::ClientContext> Context(int64_t timeout_ms) const;
  void Log(const std::string& message) const;
  // WorkerOptions::on_stuck_task, or log and exit.
  void OnStuckTask(const std::string& message);

  WorkerOptions options_;
  Clock* const clock_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::WorkerService::Stub> stub_;
  std::atomic<bool> stop_{false};
  std::atomic<int> completed_{0};
  std::atomic<int> failed_{0};
  // The last job's opened inputs, for its next round task on this worker.
  JobInputsCache inputs_cache_;
  // What its shard tasks computed, for the same shards' next rounds here;
  // bounded by --max_activation_mb.
  ShardStashCache shard_stashes_;
  // The block its round tasks last loaded, and the sha256 of the round
  // files they checked, for the next round task here.
  RoundBlockCache round_blocks_;
  FileDigests file_digests_;
  Mutex mu_;
  std::string worker_id_ ABSL_GUARDED_BY(mu_);
  std::atomic<int64_t> heartbeat_ms_{5'000};
};

}  // namespace quant::worker

#endif  // QUANT_WORKER_WORKER_H_

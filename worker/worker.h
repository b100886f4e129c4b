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
#ifndef QUANT_WORKER_WORKER_H_
#define QUANT_WORKER_WORKER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/pipeline/job_tasks.h"
#include "grpcpp/channel.h"
#include "quant/v1/worker.grpc.pb.h"
#include "server/metrics/worker_metrics.h"

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
  // Where to record task and core metrics; null: none. Not owned.
  metrics::WorkerMetrics* metrics = nullptr;
};

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
  explicit Worker(WorkerOptions options) : options_(std::move(options)) {}

  void SlotLoop(int slot);
  // The current worker id, registering (again) when `stale` names it.
  std::string WorkerId(const std::string& stale = "");
  // Runs one leased task; `worker_id` is the id that leased it, which every
  // call about the lease carries (quantd ties a lease to its worker).
  void RunLeased(const v1::LeaseTaskResponse& leased,
                 const std::string& worker_id);
  std::unique_ptr<grpc::ClientContext> Context(int64_t timeout_ms) const;
  void Log(const std::string& message) const;

  WorkerOptions options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::WorkerService::Stub> stub_;
  std::atomic<bool> stop_{false};
  std::atomic<int> completed_{0};
  std::atomic<int> failed_{0};
  std::mutex mu_;
  std::string worker_id_;
  std::atomic<int64_t> heartbeat_ms_{5'000};
};

}  // namespace quant::worker

#endif  // QUANT_WORKER_WORKER_H_

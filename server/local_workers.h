// `quantd --local_workers N`: quantd starts N quant-worker processes on this
// machine, pointed at its own address, and keeps them running: a worker
// that dies (a crash, an OOM kill) is started again after a short pause, up
// to a bound per minute so a worker that cannot start does not spin. On
// Stop they get SIGTERM (they release or finish their leases), then SIGKILL
// after the grace period.
//
// The worker token reaches them in the environment (QUANT_WORKER_TOKEN),
// never on the command line where `ps` would show it. Each gets
// --threads=cores/N unless the extra arguments say otherwise.
#ifndef QUANT_SERVER_LOCAL_WORKERS_H_
#define QUANT_SERVER_LOCAL_WORKERS_H_

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "core/base/mutex.h"

namespace quant::server {

struct LocalWorkersOptions {
  int count = 0;
  std::string binary;          // quant-worker; see FindWorkerBinary.
  std::string server_address;  // quantd's, e.g. "127.0.0.1:50051".
  std::string worker_token;    // Empty when the worker service is open.
  std::string tls_ca_file;     // Set when quantd serves TLS.
  std::vector<std::string> extra_args;
  int max_restarts_per_minute = 5;
};

class LocalWorkers {
 public:
  // Starts them. InvalidArgument when the binary is not executable.
  static absl::StatusOr<std::unique_ptr<LocalWorkers>> Start(
      LocalWorkersOptions options);
  ~LocalWorkers();  // Stop(5 s).

  // SIGTERM, wait up to `grace`, then SIGKILL. Idempotent.
  void Stop(std::chrono::milliseconds grace = std::chrono::seconds(5));
  // Process ids of the workers running now.
  std::vector<pid_t> pids() const;
  int restarts() const;

 private:
  explicit LocalWorkers(LocalWorkersOptions options)
      : options_(std::move(options)) {}
  absl::StatusOr<pid_t> Spawn(int slot);
  void Supervise();

  LocalWorkersOptions options_;
  mutable Mutex mu_;
  CondVar wake_;
  std::vector<pid_t> pids_ ABSL_GUARDED_BY(mu_);  // Per slot; 0 while down.
  std::vector<std::chrono::steady_clock::time_point> recent_restarts_
      ABSL_GUARDED_BY(mu_);
  int restarts_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread supervisor_;
};

// `flag_value` when set; otherwise quant-worker beside the running program
// (bin/quantd -> bin/quant-worker) or in the build tree
// (server/quantd -> worker/quant-worker).
std::string FindWorkerBinary(const std::string& flag_value);

}  // namespace quant::server

#endif  // QUANT_SERVER_LOCAL_WORKERS_H_

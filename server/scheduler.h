// The coordinator's background loop: runs JobLifecycle::Upkeep at a fixed
// interval (expired leases go back to the queue or fail their job, jobs left
// half-planned or half-finished by a crash are completed). Leasing itself
// happens in the worker service's LeaseTask; this only keeps the state
// moving when no call arrives.
#ifndef QUANT_SERVER_SCHEDULER_H_
#define QUANT_SERVER_SCHEDULER_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "core/base/mutex.h"
#include "server/job_lifecycle.h"

namespace quant::server {

class Scheduler {
 public:
  // `on_upkeep` (optional) sees every pass's result, for metrics.
  Scheduler(JobLifecycle* lifecycle, std::chrono::milliseconds interval,
            std::function<void(const UpkeepResult&)> on_upkeep = nullptr);
  ~Scheduler();  // Stops.

  void Start();
  void Stop();  // Idempotent; waits for a running pass.

 private:
  void Loop();

  JobLifecycle* lifecycle_;
  std::chrono::milliseconds interval_;
  std::function<void(const UpkeepResult&)> on_upkeep_;
  Mutex mu_;
  CondVar wake_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace quant::server

#endif  // QUANT_SERVER_SCHEDULER_H_

// Scheduler: the upkeep thread.
#include "server/scheduler.h"

#include <cstdio>
#include <string>
#include <utility>

namespace quant::server {

Scheduler::Scheduler(JobLifecycle* lifecycle,
                     std::chrono::milliseconds interval,
                     std::function<void(const UpkeepResult&)> on_upkeep)
    : lifecycle_(lifecycle),
      interval_(interval),
      on_upkeep_(std::move(on_upkeep)) {}

Scheduler::~Scheduler() { Stop(); }

void Scheduler::Start() {
  thread_ = std::thread([this] { Loop(); });
}

void Scheduler::Stop() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  wake_.SignalAll();
  if (thread_.joinable()) thread_.join();
}

void Scheduler::Loop() {
  MutexLock lock(&mu_);
  while (!stop_) {
    mu_.Unlock();
    absl::StatusOr<UpkeepResult> result = lifecycle_->Upkeep();
    if (!result.ok()) {
      // The store is the only source of truth; log and try again next pass.
      std::fprintf(stderr, "quantd: upkeep: %s\n",
                   std::string(result.status().message()).c_str());
    } else if (on_upkeep_) {
      on_upkeep_(*result);
    }
    mu_.Lock();
    const auto next_pass = std::chrono::steady_clock::now() + interval_;
    while (!stop_ && wake_.WaitUntil(&mu_, next_pass)) {
    }
  }
}

}  // namespace quant::server

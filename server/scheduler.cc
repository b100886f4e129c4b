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
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Scheduler::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    lock.unlock();
    absl::StatusOr<UpkeepResult> result = lifecycle_->Upkeep();
    if (!result.ok()) {
      // The store is the only source of truth; log and try again next pass.
      std::fprintf(stderr, "quantd: upkeep: %s\n",
                   std::string(result.status().message()).c_str());
    } else if (on_upkeep_) {
      on_upkeep_(*result);
    }
    lock.lock();
    wake_.wait_for(lock, interval_, [this] { return stop_; });
  }
}

}  // namespace quant::server

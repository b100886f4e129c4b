// A broadcast "something changed" signal: a task became runnable, an event
// was appended, the server is stopping. Long polls (LeaseTask) and streams
// (WatchJob) wait on it instead of spinning, with a timeout so they also
// notice changes made by time alone (an expired lease).
#ifndef QUANT_SERVER_CHANGE_SIGNAL_H_
#define QUANT_SERVER_CHANGE_SIGNAL_H_

#include <chrono>
#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "core/base/mutex.h"

namespace quant::server {

class ChangeSignal {
 public:
  // The current generation; pass it to WaitFor to wait for a later one.
  uint64_t generation() const {
    MutexLock lock(&mu_);
    return generation_;
  }
  void Notify() {
    {
      MutexLock lock(&mu_);
      ++generation_;
    }
    changed_.SignalAll();
  }
  // Until the generation passes `seen`, `timeout` passes or Stop() is
  // called. True when something changed.
  bool WaitFor(uint64_t seen, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    MutexLock lock(&mu_);
    while (generation_ == seen && !stopping_) {
      if (!changed_.WaitUntil(&mu_, deadline)) break;
    }
    return generation_ != seen || stopping_;
  }
  // Wakes every waiter now and at once from now on.
  void Stop() {
    {
      MutexLock lock(&mu_);
      stopping_ = true;
    }
    changed_.SignalAll();
  }
  bool stopping() const {
    MutexLock lock(&mu_);
    return stopping_;
  }

 private:
  mutable Mutex mu_;
  CondVar changed_;
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace quant::server

#endif  // QUANT_SERVER_CHANGE_SIGNAL_H_

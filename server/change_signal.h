// A broadcast "something changed" signal: a task became runnable, an event
// was appended, the server is stopping. Long polls (LeaseTask) and streams
// (WatchJob) wait on it instead of spinning, with a timeout so they also
// notice changes made by time alone (an expired lease).
#ifndef QUANT_SERVER_CHANGE_SIGNAL_H_
#define QUANT_SERVER_CHANGE_SIGNAL_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace quant::server {

class ChangeSignal {
 public:
  // The current generation; pass it to WaitFor to wait for a later one.
  uint64_t generation() const {
    std::lock_guard<std::mutex> lock(mu_);
    return generation_;
  }
  void Notify() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++generation_;
    }
    changed_.notify_all();
  }
  // Until the generation passes `seen`, `timeout` passes or Stop() is
  // called. True when something changed.
  bool WaitFor(uint64_t seen, std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return changed_.wait_for(lock, timeout,
                             [&] { return generation_ != seen || stopping_; });
  }
  // Wakes every waiter now and at once from now on.
  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    changed_.notify_all();
  }
  bool stopping() const {
    std::lock_guard<std::mutex> lock(mu_);
    return stopping_;
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable changed_;
  uint64_t generation_ = 0;
  bool stopping_ = false;
};

}  // namespace quant::server

#endif  // QUANT_SERVER_CHANGE_SIGNAL_H_

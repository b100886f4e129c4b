// Time behind an interface, so that tests move it instead of sleeping: the
// store's lease expiry reads a wall clock, the worker's task bounds, cancel
// grace, heartbeat schedule and retry backoff read a monotonic one.
#ifndef QUANT_CORE_BASE_CLOCK_H_
#define QUANT_CORE_BASE_CLOCK_H_

#include <atomic>
#include <cstdint>

namespace quant {

class Clock {
 public:
  virtual ~Clock() = default;
  // Milliseconds on this clock's timeline (see each implementation).
  virtual int64_t NowMs() const = 0;
  // Waits `ms` of this clock's time (returns at once for ms <= 0).
  virtual void SleepForMs(int64_t ms) = 0;
};

// Real time since 1970-01-01T00:00:00Z: for times stored and compared
// across processes (lease expiry in the job store). Default() is a
// process-wide instance.
class SystemClock : public Clock {
 public:
  int64_t NowMs() const override;
  void SleepForMs(int64_t ms) override;
  static SystemClock* Default();
};

// Monotonic time since an unspecified start: for bounds and backoff inside
// one process, immune to the wall clock being set.
class MonotonicClock : public Clock {
 public:
  int64_t NowMs() const override;
  void SleepForMs(int64_t ms) override;
  static MonotonicClock* Default();
};

// A clock that moves only when told to; SleepForMs moves it by the time
// slept and returns at once. Thread-safe.
class FakeClock : public Clock {
 public:
  explicit FakeClock(int64_t start_ms = 1'700'000'000'000)
      : now_ms_(start_ms) {}
  int64_t NowMs() const override { return now_ms_.load(); }
  void SleepForMs(int64_t ms) override {
    if (ms > 0) now_ms_.fetch_add(ms);
  }
  void AdvanceMs(int64_t delta_ms) { now_ms_.fetch_add(delta_ms); }
  void SetMs(int64_t now_ms) { now_ms_.store(now_ms); }

 private:
  std::atomic<int64_t> now_ms_;
};

}  // namespace quant

#endif  // QUANT_CORE_BASE_CLOCK_H_

// Time source for the store: wall-clock milliseconds since the Unix epoch.
// Leases expire against it; tests drive a FakeClock instead of sleeping.
#ifndef QUANT_SERVER_STORE_CLOCK_H_
#define QUANT_SERVER_STORE_CLOCK_H_

#include <atomic>
#include <cstdint>

namespace quant::store {

class Clock {
 public:
  virtual ~Clock() = default;
  // Milliseconds since 1970-01-01T00:00:00Z.
  virtual int64_t NowMs() const = 0;
};

// The system's real-time clock. Default() is a process-wide instance.
class SystemClock : public Clock {
 public:
  int64_t NowMs() const override;
  static SystemClock* Default();
};

// A clock that moves only when told to. Thread-safe.
class FakeClock : public Clock {
 public:
  explicit FakeClock(int64_t start_ms = 1'700'000'000'000)
      : now_ms_(start_ms) {}
  int64_t NowMs() const override { return now_ms_.load(); }
  void AdvanceMs(int64_t delta_ms) { now_ms_.fetch_add(delta_ms); }
  void SetMs(int64_t now_ms) { now_ms_.store(now_ms); }

 private:
  std::atomic<int64_t> now_ms_;
};

}  // namespace quant::store

#endif  // QUANT_SERVER_STORE_CLOCK_H_

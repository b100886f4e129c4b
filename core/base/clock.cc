// The real clocks.
#include "core/base/clock.h"

#include <chrono>
#include <thread>

namespace quant {
namespace {

void RealSleep(int64_t ms) {
  if (ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

}  // namespace

int64_t SystemClock::NowMs() const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void SystemClock::SleepForMs(int64_t ms) { RealSleep(ms); }

SystemClock* SystemClock::Default() {
  static SystemClock* const clock = new SystemClock();
  return clock;
}

int64_t MonotonicClock::NowMs() const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void MonotonicClock::SleepForMs(int64_t ms) { RealSleep(ms); }

MonotonicClock* MonotonicClock::Default() {
  static MonotonicClock* const clock = new MonotonicClock();
  return clock;
}

}  // namespace quant

// Mutex, MutexLock and CondVar: exclusion, waking, and timed waits that end.
#include "core/base/mutex.h"

#include <chrono>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "gtest/gtest.h"

namespace quant {
namespace {

struct Counter {
  Mutex mu;
  int64_t value ABSL_GUARDED_BY(mu) = 0;
};

struct Flag {
  Mutex mu;
  CondVar changed;
  bool ready ABSL_GUARDED_BY(mu) = false;
};

// Unprotected, four threads' increments would be lost (and TSan would
// report the race); under the lock every one counts.
TEST(MutexTest, LockedIncrementsAreNeverLost) {
  Counter counter;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&counter] {
      for (int i = 0; i < 10'000; ++i) {
        MutexLock lock(&counter.mu);
        ++counter.value;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  MutexLock lock(&counter.mu);
  EXPECT_EQ(counter.value, 40'000);
}

TEST(CondVarTest, WaitReturnsOnceSignalledAndTheConditionHolds) {
  Flag flag;
  std::thread setter([&flag] {
    MutexLock lock(&flag.mu);
    flag.ready = true;
    flag.changed.SignalAll();
  });
  {
    MutexLock lock(&flag.mu);
    while (!flag.ready) flag.changed.Wait(&flag.mu);
    EXPECT_TRUE(flag.ready);
  }
  setter.join();
}

TEST(CondVarTest, TimedWaitsEndAtTheirDeadlineWithoutASignal) {
  Mutex mu;
  CondVar never_signalled;
  MutexLock lock(&mu);
  const auto started = std::chrono::steady_clock::now();
  // Spurious wake-ups return true; the deadline is what must end the loop.
  while (never_signalled.WaitFor(&mu, std::chrono::milliseconds(30))) {
  }
  EXPECT_GE(std::chrono::steady_clock::now() - started,
            std::chrono::milliseconds(30));
  EXPECT_FALSE(never_signalled.WaitUntil(
      &mu, std::chrono::steady_clock::now() - std::chrono::seconds(1)));
}

TEST(CondVarTest, SignalWakesATimedWaitBeforeItsDeadline) {
  Flag flag;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(60);
  std::thread setter([&flag] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    MutexLock lock(&flag.mu);
    flag.ready = true;
    flag.changed.Signal();
  });
  {
    MutexLock lock(&flag.mu);
    bool in_time = true;
    while (!flag.ready && in_time) {
      in_time = flag.changed.WaitUntil(&flag.mu, deadline);
    }
    EXPECT_TRUE(flag.ready);
    EXPECT_TRUE(in_time);
  }
  setter.join();
}

}  // namespace
}  // namespace quant

// ThreadPool: every iteration once, real concurrency, inline nesting.
#include "core/base/thread_pool.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace quant {
namespace {

TEST(ThreadPoolTest, RunsEveryIterationExactlyOnce) {
  for (int threads : {1, 2, 5}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.threads(), threads);
    for (int64_t n : {0, 1, 3, 1000}) {
      std::vector<std::atomic<int>> runs(n);
      pool.ParallelFor(n, [&](int64_t i) { runs[i].fetch_add(1); });
      for (int64_t i = 0; i < n; ++i) {
        EXPECT_EQ(runs[i].load(), 1) << threads << " threads, n=" << n;
      }
    }
  }
}

TEST(ThreadPoolTest, OneThreadRunsInlineInOrder) {
  ThreadPool pool(0);  // Taken as 1.
  EXPECT_EQ(pool.threads(), 1);
  std::vector<int64_t> order;
  const std::thread::id caller = std::this_thread::get_id();
  pool.ParallelFor(4, [&](int64_t i) {
    EXPECT_EQ(std::this_thread::get_id(), caller);
    order.push_back(i);
  });
  EXPECT_EQ(order, (std::vector<int64_t>{0, 1, 2, 3}));
}

// Two iterations that each wait for the other: only finishes if two threads
// run them at the same time (a timeout turns a hang into a failure).
TEST(ThreadPoolTest, IterationsRunConcurrently) {
  ThreadPool pool(2);
  std::mutex mutex;
  std::condition_variable arrived;
  int waiting = 0;
  bool both_met = true;
  pool.ParallelFor(2, [&](int64_t) {
    std::unique_lock<std::mutex> lock(mutex);
    ++waiting;
    arrived.notify_all();
    if (!arrived.wait_for(lock, std::chrono::seconds(20),
                          [&] { return waiting == 2; })) {
      both_met = false;
    }
  });
  EXPECT_TRUE(both_met);
}

TEST(ThreadPoolTest, NestedLoopOnTheSamePoolRunsInline) {
  ThreadPool pool(3);
  std::atomic<int> inner{0};
  pool.ParallelFor(6, [&](int64_t) {
    pool.ParallelFor(5, [&](int64_t) { inner.fetch_add(1); });
  });
  EXPECT_EQ(inner.load(), 30);
}

TEST(ThreadPoolTest, CallersOnSeveralThreadsTakeTurns) {
  ThreadPool pool(3);
  std::atomic<int64_t> sum{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < 4; ++c) {
    callers.emplace_back([&] {
      for (int round = 0; round < 50; ++round) {
        pool.ParallelFor(10, [&](int64_t i) { sum.fetch_add(i); });
      }
    });
  }
  for (std::thread& t : callers) t.join();
  EXPECT_EQ(sum.load(), 4 * 50 * 45);
}

TEST(ThreadPoolTest, NullPoolRunsInline) {
  std::vector<int64_t> order;
  ParallelFor(nullptr, 3, [&](int64_t i) { order.push_back(i); });
  EXPECT_EQ(order, (std::vector<int64_t>{0, 1, 2}));
  EXPECT_GE(ThreadPool::AvailableCores(), 1);
}

}  // namespace
}  // namespace quant

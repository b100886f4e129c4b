// ThreadPool: see thread_pool.h.
#include "core/base/thread_pool.h"

#include <sched.h>

#include <algorithm>

#include "core/base/read_roots.h"
#include "core/kernels/dispatch.h"

namespace quant {
namespace {

// The pool whose iteration this thread is running, if any: a ParallelFor
// on it from here runs inline.
thread_local const ThreadPool* current_pool = nullptr;

}  // namespace

ThreadPool::ThreadPool(int threads) {
  const int started = std::max(threads, 1) - 1;
  workers_.reserve(started);
  for (int i = 0; i < started; ++i) {
    workers_.emplace_back([this] { WorkerLoop(); });
  }
}

ThreadPool::~ThreadPool() {
  {
    MutexLock lock(&mutex_);
    stopping_ = true;
  }
  work_ready_.SignalAll();
  for (std::thread& worker : workers_) worker.join();
}

void ThreadPool::RunIterations(absl::FunctionRef<void(int64_t)> fn, int64_t n) {
  mutex_.Lock();
  while (next_ < n) {
    const int64_t i = next_++;
    mutex_.Unlock();
    fn(i);
    mutex_.Lock();
  }
  mutex_.Unlock();
}

void ThreadPool::WorkerLoop() {
  current_pool = this;
  uint64_t seen = 0;
  MutexLock lock(&mutex_);
  for (;;) {
    while (!stopping_ && generation_ == seen) work_ready_.Wait(&mutex_);
    if (stopping_) return;
    seen = generation_;
    const absl::FunctionRef<void(int64_t)> fn = *fn_;
    const int64_t n = n_;
    const kernels::KernelTable* table = kernels_;
    std::shared_ptr<const ReadRootList> roots = read_roots_;
    mutex_.Unlock();
    kernels::SetThreadOverride(table);
    SetThreadReadRoots(std::move(roots));
    RunIterations(fn, n);
    kernels::SetThreadOverride(nullptr);
    SetThreadReadRoots(nullptr);
    mutex_.Lock();
    if (--busy_workers_ == 0) work_done_.Signal();
  }
}

void ThreadPool::ParallelFor(int64_t n, absl::FunctionRef<void(int64_t)> fn) {
  if (n <= 0) return;
  if (workers_.empty() || n == 1 || current_pool == this) {
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
  MutexLock call(&call_mutex_);
  {
    MutexLock lock(&mutex_);
    fn_ = &fn;
    kernels_ = &kernels::CurrentKernels();
    read_roots_ = ThreadReadRoots();
    n_ = n;
    next_ = 0;
    busy_workers_ = static_cast<int>(workers_.size());
    ++generation_;
  }
  work_ready_.SignalAll();
  const ThreadPool* saved = current_pool;
  current_pool = this;
  RunIterations(fn, n);
  current_pool = saved;
  MutexLock lock(&mutex_);
  while (busy_workers_ != 0) work_done_.Wait(&mutex_);
  fn_ = nullptr;
  kernels_ = nullptr;
  read_roots_ = nullptr;
  n_ = 0;
}

int ThreadPool::AvailableCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    return std::max(CPU_COUNT(&set), 1);
  }
  return std::max(static_cast<int>(std::thread::hardware_concurrency()), 1);
}

void ParallelFor(ThreadPool* pool, int64_t n,
                 absl::FunctionRef<void(int64_t)> fn) {
  if (pool == nullptr) {
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
  pool->ParallelFor(n, fn);
}

}  // namespace quant

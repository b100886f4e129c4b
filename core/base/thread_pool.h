// A fixed set of threads that runs the iterations of a loop.
//
// Used for coarse work only (a chunk of sequences through a decoder block, a
// tile of a Hessian, a layer's GPTQ sweep), where one iteration is
// milliseconds or more, so handing iterations out through one mutex costs
// nothing measurable. Callers make their results independent of the thread
// count by fixing the work split and the order in which partial results are
// combined; the pool only decides which thread runs an iteration.
//
// The calling thread takes part, so a pool of one thread runs everything
// inline and starts no thread. A ParallelFor issued from inside one of the
// pool's iterations runs inline on that thread (no deadlock, no
// oversubscription).
//
// Every iteration runs at the kernel level (core/kernels/dispatch.h) of the
// thread that called ParallelFor, whichever thread runs it, and under its
// read roots (core/base/read_roots.h).
#ifndef QUANT_CORE_BASE_THREAD_POOL_H_
#define QUANT_CORE_BASE_THREAD_POOL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "core/base/mutex.h"

namespace quant {
namespace kernels {
struct KernelTable;
}  // namespace kernels

class ThreadPool {
 public:
  // `threads` >= 1 (values below are taken as 1): the caller plus
  // threads - 1 started here.
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Runs fn(i) once for every i in [0, n) and returns when all have
  // returned. Iterations start in index order; which thread runs which is
  // unspecified. Calls from different threads take turns.
  void ParallelFor(int64_t n, absl::FunctionRef<void(int64_t)> fn);

  // The cores this process may run on (at least 1).
  static int AvailableCores();

 private:
  void WorkerLoop();
  // Runs iterations of the current loop until none is left.
  void RunIterations(absl::FunctionRef<void(int64_t)> fn, int64_t n);

  Mutex call_mutex_;  // One ParallelFor at a time.
  Mutex mutex_ ABSL_ACQUIRED_AFTER(call_mutex_);
  CondVar work_ready_;
  CondVar work_done_;
  // The current loop (set while a ParallelFor runs) and its next index.
  const absl::FunctionRef<void(int64_t)>* fn_ ABSL_GUARDED_BY(mutex_) = nullptr;
  // The caller's kernels, which the helper threads run the loop with.
  const kernels::KernelTable* kernels_ ABSL_GUARDED_BY(mutex_) = nullptr;
  // The caller's read roots (read_roots.h), for the same reason.
  std::shared_ptr<const std::vector<std::string>> read_roots_
      ABSL_GUARDED_BY(mutex_);
  int64_t n_ ABSL_GUARDED_BY(mutex_) = 0;
  int64_t next_ ABSL_GUARDED_BY(mutex_) = 0;
  uint64_t generation_ ABSL_GUARDED_BY(mutex_) = 0;
  int busy_workers_ ABSL_GUARDED_BY(mutex_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mutex_) = false;
  std::vector<std::thread> workers_;
};

// Runs fn(i) for i in [0, n) on `pool`, or inline when it is null.
void ParallelFor(ThreadPool* pool, int64_t n,
                 absl::FunctionRef<void(int64_t)> fn);

}  // namespace quant

#endif  // QUANT_CORE_BASE_THREAD_POOL_H_

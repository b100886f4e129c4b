// The project's mutex, its scoped lock and its condition variable.
//
// Why not absl::Mutex: Debian's libabsl is built without ThreadSanitizer, so
// a TSan build cannot see the ordering absl::Mutex provides and reports a
// race on every member it guards. These wrap std::mutex and
// std::condition_variable, whose pthread calls TSan intercepts, and carry
// Clang's thread-safety attributes, so that with -Wthread-safety every
// ABSL_GUARDED_BY member is checked to be touched only with its mutex held.
//
// Waits take no predicate: callers loop on their condition themselves
// (`while (!ready_) ready_changed_.Wait(&mu_);`), which the analysis can
// check, where a predicate lambda would be analysed without the lock.
#ifndef QUANT_CORE_BASE_MUTEX_H_
#define QUANT_CORE_BASE_MUTEX_H_

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "absl/base/thread_annotations.h"

namespace quant {

class ABSL_LOCKABLE Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mutex_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mutex_.unlock(); }

 private:
  friend class CondVar;
  std::mutex mutex_;
};

// Holds `mutex` for its scope.
class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex* mutex) ABSL_EXCLUSIVE_LOCK_FUNCTION(mutex)
      : mutex_(mutex) {
    mutex_->Lock();
  }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mutex_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mutex_;
};

class CondVar {
 public:
  CondVar() = default;
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;

  // Releases `mutex`, waits for a signal (or a spurious wake-up) and takes
  // it again.
  void Wait(Mutex* mutex) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex) {
    std::unique_lock<std::mutex> lock(mutex->mutex_, std::adopt_lock);
    condition_.wait(lock);
    lock.release();
  }
  // Like Wait, but returns false once `deadline` has passed.
  bool WaitUntil(Mutex* mutex, std::chrono::steady_clock::time_point deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex) {
    std::unique_lock<std::mutex> lock(mutex->mutex_, std::adopt_lock);
    const bool signalled =
        condition_.wait_until(lock, deadline) == std::cv_status::no_timeout;
    lock.release();
    return signalled;
  }
  // Like Wait, for at most `timeout`; false when it ran out.
  bool WaitFor(Mutex* mutex, std::chrono::milliseconds timeout)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex) {
    return WaitUntil(mutex, std::chrono::steady_clock::now() + timeout);
  }

  void Signal() { condition_.notify_one(); }
  void SignalAll() { condition_.notify_all(); }

 private:
  std::condition_variable condition_;
};

}  // namespace quant

#endif  // QUANT_CORE_BASE_MUTEX_H_

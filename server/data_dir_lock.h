// An exclusive lock on quantd's data directory, held while quantd runs: a
// second coordinator on the same directory would lease the same tasks and
// interleave writes to one SQLite file, so it refuses to start instead.
#ifndef QUANT_SERVER_DATA_DIR_LOCK_H_
#define QUANT_SERVER_DATA_DIR_LOCK_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace quant::server {

class DataDirLock {
 public:
  // Takes DIR/quantd.lock (flock, released by the kernel when the process
  // dies, so a crash leaves nothing to clean up). FailedPrecondition naming
  // the holder's pid when another process holds it.
  static absl::StatusOr<std::unique_ptr<DataDirLock>> Acquire(
      const std::string& data_dir);
  ~DataDirLock();
  DataDirLock(const DataDirLock&) = delete;
  DataDirLock& operator=(const DataDirLock&) = delete;

 private:
  explicit DataDirLock(int fd) : fd_(fd) {}
  int fd_;
};

}  // namespace quant::server

#endif  // QUANT_SERVER_DATA_DIR_LOCK_H_

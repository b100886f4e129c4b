// Where the files a job reads may lie, checked on the file actually opened.
//
// quantd resolves a submitted URI against its allowed roots, but a job then
// opens many files inside the checkpoint directory (shards, tokenizer,
// generation_config.json), any of which may be a symlink leading elsewhere,
// and the directory itself may be swapped for a symlink after submit. So
// every read through core/base (ReadFileToString, MappedFile, Sha256File)
// opens the file first and then checks the real path of the open descriptor
// against the calling thread's roots: what is checked is what is read.
//
// Roots are per thread (a quantd request handler, a worker task) and
// ThreadPool hands them to its helper threads with each loop, like the
// kernel level. A thread without roots is not confined (quantctl --local).
#ifndef QUANT_CORE_BASE_READ_ROOTS_H_
#define QUANT_CORE_BASE_READ_ROOTS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace quant {

// Real paths (no symlinks, no trailing '/').
using ReadRootList = std::vector<std::string>;

// Confines the calling thread's reads to `roots` while in scope; each root is
// made a real path first (a missing root confines to nothing). An empty list
// confines to nothing either: every read is refused.
class ScopedReadRoots {
 public:
  explicit ScopedReadRoots(const std::vector<std::string>& roots);
  ~ScopedReadRoots();
  ScopedReadRoots(const ScopedReadRoots&) = delete;
  ScopedReadRoots& operator=(const ScopedReadRoots&) = delete;

 private:
  std::shared_ptr<const ReadRootList> roots_;
  std::shared_ptr<const ReadRootList> saved_;
};

// The calling thread's roots (null: not confined), and setting them: for
// thread pools handing a loop's roots to their helper threads.
std::shared_ptr<const ReadRootList> ThreadReadRoots();
void SetThreadReadRoots(std::shared_ptr<const ReadRootList> roots);

// Opens `path` for reading without blocking on a FIFO or a device, and
// refuses anything that is not a regular file (InvalidArgument "<path> is a
// FIFO, not a regular file") or, on a confined thread, whose real path lies
// outside the roots (PermissionDenied). Returns the descriptor (blocking
// mode, close-on-exec); the caller closes it.
absl::StatusOr<int> OpenRegularFileForRead(const std::string& path);

// True when `real_path` is one of `roots` or lies under one.
bool PathUnderRoots(const std::string& real_path, const ReadRootList& roots);

}  // namespace quant

#endif  // QUANT_CORE_BASE_READ_ROOTS_H_

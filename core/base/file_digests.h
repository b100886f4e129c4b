// Remembers the sha256 of the files a process hashed, by their identity
// (FileSystem::Identify), so that a worker checking the same round files
// task after task (round_job_tasks.h: every reduce and shard task checks
// what it reads against the coordinator's record) reads each file once.
// A file rewritten or replaced since has another identity and is read
// again; a file system that cannot identify files is always read, and so
// is a file changed less than a second ago (a second write within one tick
// of the file system's clock would keep its identity).
#ifndef QUANT_CORE_BASE_FILE_DIGESTS_H_
#define QUANT_CORE_BASE_FILE_DIGESTS_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "core/base/file_system.h"
#include "core/base/mutex.h"

namespace quant {

class FileDigests {
 public:
  struct Options {
    // Past this many remembered files, all are forgotten.
    int max_files = 4096;
    // A file whose status changed less than this long ago is not
    // remembered.
    int64_t racy_ns = 1'000'000'000;
  };
  FileDigests() : FileDigests(Options()) {}
  explicit FileDigests(const Options& options) : options_(options) {}
  FileDigests(const FileDigests&) = delete;
  FileDigests& operator=(const FileDigests&) = delete;

  // Sha256File (sha256.h) of `path` through `fs`, or the digest remembered
  // for it when the file's identity is the one it had when hashed. A file
  // that changed while being hashed is not remembered. Thread-safe.
  absl::StatusOr<std::string> Sha256File(const std::string& path,
                                         FileSystem* fs);

  // How many calls read their file (tests).
  int files_read() const;

 private:
  const Options options_;
  mutable Mutex mu_;
  std::map<std::string, std::pair<FileIdentity, std::string>> digests_
      ABSL_GUARDED_BY(mu_);
  int files_read_ ABSL_GUARDED_BY(mu_) = 0;
};

// `digests`->Sha256File, or Sha256File when `digests` is null.
absl::StatusOr<std::string> Sha256FileWith(FileDigests* digests,
                                           const std::string& path,
                                           FileSystem* fs);

}  // namespace quant

#endif  // QUANT_CORE_BASE_FILE_DIGESTS_H_

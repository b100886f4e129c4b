// A FileSystem for tests that wraps another and injects storage faults
// deterministically: a disk that fills after N bytes, directories where
// nothing may be created, renames that fail. Errors carry the errno a real
// disk would give, mapped by ErrnoToStatus, so code under test sees exactly
// what it would see in production. DirectoryEntries shows what a fault left
// behind.
#ifndef QUANT_TESTS_SUPPORT_FAULT_INJECTING_FILE_SYSTEM_H_
#define QUANT_TESTS_SUPPORT_FAULT_INJECTING_FILE_SYSTEM_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "core/base/file_system.h"
#include "core/base/mutex.h"

namespace quant::testing {

class FaultInjectingFileSystem : public FileSystem {
 public:
  // `base` (not owned) does the real work; the default is POSIX.
  explicit FaultInjectingFileSystem(FileSystem* base = FileSystem::Default())
      : base_(base) {}

  // The disk fills once `bytes` have been appended in total (counting from
  // now, over every file): the Append that crosses the limit writes what
  // still fits and fails with ENOSPC, as do later ones.
  void SetDiskFullAfter(int64_t bytes);
  // Creating a file or directory at `prefix` or below it fails with `err`
  // (EACCES or EROFS).
  void FailCreatesUnder(std::string prefix, int err);
  // A rename whose destination is `prefix` or below it fails with `err`.
  void FailRenamesTo(std::string prefix, int err);
  // Reading a file at `prefix` or below fails with `err` (EIO; ENOENT for a
  // file that vanished): ReadFile and MapFile at once, a sequential file at
  // its first read (at its opening for ENOENT).
  void FailReadsOf(std::string prefix, int err);
  // Reading a file at `prefix` or below gives only its first `bytes` bytes,
  // as a read racing a writer would: ReadFile's string, MapFile's mapping
  // and a sequential file's stream all end there.
  void ShortReadsOf(std::string prefix, int64_t bytes);
  // Drops every fault; the byte count keeps running.
  void ClearFaults();

  // Bytes appended through this file system so far (what reached `base`).
  int64_t bytes_written() const;
  // How many operations failed because of an injected fault.
  int faults_injected() const;

  absl::StatusOr<std::string> ReadFile(const std::string& path,
                                       size_t max_bytes) override;
  absl::StatusOr<std::unique_ptr<MappedFile>> MapFile(
      const std::string& path) override;
  absl::StatusOr<std::unique_ptr<SequentialFile>> NewSequentialFile(
      const std::string& path) override;
  absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(
      const std::string& path) override;
  absl::Status RenameFile(const std::string& from,
                          const std::string& to) override;
  absl::Status RemoveFile(const std::string& path) override;
  absl::Status MakeDirectory(const std::string& path) override;
  absl::StatusOr<std::string> MakeTemporaryDirectory(
      const std::string& prefix) override;
  absl::Status RemoveTree(const std::string& path) override;
  absl::Status SyncDirectory(const std::string& dir) override;

 private:
  friend class FaultInjectingWritableFile;

  // The read fault injected for `path` (counted): an errno, or how many
  // bytes to keep; neither when it is read as it is.
  struct ReadFault {
    std::optional<int> err;
    std::optional<int64_t> keep;
  };
  ReadFault ReadFaultFor(const std::string& path);
  // How many of `size` bytes may be written now; counts them as written.
  // Sets *full when the rest do not fit.
  int64_t Reserve(int64_t size, bool* full);
  // The injected error for creating `path`, if any.
  std::optional<int> CreateFault(const std::string& path);
  void CountFault();

  FileSystem* const base_;
  mutable Mutex mutex_;
  int64_t bytes_written_ ABSL_GUARDED_BY(mutex_) = 0;
  std::optional<int64_t> disk_full_at_ ABSL_GUARDED_BY(mutex_);
  std::optional<std::pair<std::string, int>> create_fault_
      ABSL_GUARDED_BY(mutex_);
  std::optional<std::pair<std::string, int>> rename_fault_
      ABSL_GUARDED_BY(mutex_);
  std::optional<std::pair<std::string, int>> read_fault_
      ABSL_GUARDED_BY(mutex_);
  std::optional<std::pair<std::string, int64_t>> short_read_
      ABSL_GUARDED_BY(mutex_);
  int faults_ ABSL_GUARDED_BY(mutex_) = 0;
};

// True when `path` is `prefix` or lies below it ("/a/b" is under "/a", but
// "/a.partial" is not).
bool PathIsUnder(const std::string& path, const std::string& prefix);

// The names directly in `dir`, sorted: where a fault left something behind
// (a temporary file, a partial directory) it shows here. A `dir` that cannot
// be listed fails the calling test and gives {}.
std::vector<std::string> DirectoryEntries(const std::string& dir);

}  // namespace quant::testing

#endif  // QUANT_TESTS_SUPPORT_FAULT_INJECTING_FILE_SYSTEM_H_

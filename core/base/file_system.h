// The file system as the pipeline uses it: writable files, renames,
// directories, the reads of small files that decide what a task does (a
// block's layers.json, a job's manifest and audit), and the tensor files a
// task maps (a checkpoint's safetensors, hidden states, a block's outputs)
// or hashes as a stream. They go through a FileSystem so tests can inject
// disk-full, unwritable, failed-rename, EIO, short-read and vanished-file
// faults deterministically (tests/support/fault_injecting_file_system.h);
// production code uses FileSystem::Default(), plain POSIX calls.
#ifndef QUANT_CORE_BASE_FILE_SYSTEM_H_
#define QUANT_CORE_BASE_FILE_SYSTEM_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/base/mapped_file.h"

namespace quant {

// A file open for writing. Errors name the file and map errno as
// ErrnoToStatus does (a full disk is ResourceExhausted).
class WritableFile {
 public:
  virtual ~WritableFile() = default;  // Closes the file if still open.

  virtual absl::Status Append(absl::string_view data) = 0;
  virtual absl::Status Sync() = 0;
  // Further calls after Close are errors.
  virtual absl::Status Close() = 0;
};

// A file open for reading from its start to its end.
class SequentialFile {
 public:
  virtual ~SequentialFile() = default;  // Closes the file.

  // Reads up to `n` bytes into `buffer`: how many it read, 0 at the end of
  // the file. Errors name the file (ErrnoToStatus).
  virtual absl::StatusOr<size_t> Read(char* buffer, size_t n) = 0;
};

// What tells a file's present contents apart without reading them: a
// rewrite or a replacement changes at least one field (the status-change
// time moves on every write and rename, and no user call sets it back).
struct FileIdentity {
  uint64_t device = 0;
  uint64_t inode = 0;
  int64_t size = 0;
  int64_t modified_ns = 0;
  int64_t changed_ns = 0;

  bool operator==(const FileIdentity& other) const {
    return device == other.device && inode == other.inode &&
           size == other.size && modified_ns == other.modified_ns &&
           changed_ns == other.changed_ns;
  }
  bool operator!=(const FileIdentity& other) const { return !(*this == other); }
};

class FileSystem {
 public:
  virtual ~FileSystem() = default;

  // The process-wide POSIX file system; never null, never deleted.
  static FileSystem* Default();

  // A whole file, as ReadFileToString (file_util.h) reads it:
  // InvalidArgument past `max_bytes`, errno mapped by ErrnoToStatus.
  virtual absl::StatusOr<std::string> ReadFile(const std::string& path,
                                               size_t max_bytes) = 0;
  // A whole file mapped read-only, as MappedFile::Open maps it (a regular
  // file under the thread's read roots): tensor files.
  virtual absl::StatusOr<std::unique_ptr<MappedFile>> MapFile(
      const std::string& path) = 0;
  // A file to read once from start to end (hashing a tensor file), with the
  // same checks as MapFile.
  virtual absl::StatusOr<std::unique_ptr<SequentialFile>> NewSequentialFile(
      const std::string& path) = 0;
  // Creates `path`, which must not exist yet (AlreadyExists otherwise),
  // mode 0644.
  virtual absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(
      const std::string& path) = 0;
  // rename(2): replaces a file at `to`.
  virtual absl::Status RenameFile(const std::string& from,
                                  const std::string& to) = 0;
  // Removes one file; OK when it does not exist.
  virtual absl::Status RemoveFile(const std::string& path) = 0;
  // Creates `path` (its parent must exist). AlreadyExists when it does.
  virtual absl::Status MakeDirectory(const std::string& path) = 0;
  // Creates a new directory named `prefix` followed by six unique
  // characters (mkdtemp(3)), mode 0700; its path.
  virtual absl::StatusOr<std::string> MakeTemporaryDirectory(
      const std::string& prefix) = 0;
  // Removes `path` and everything under it; OK when it does not exist.
  virtual absl::Status RemoveTree(const std::string& path) = 0;
  // fsync of a directory, so renames and new entries in it are durable.
  virtual absl::Status SyncDirectory(const std::string& dir) = 0;
  // The identity of a regular file under the thread's read roots (the
  // checks of NewSequentialFile). This default says Unimplemented: a file
  // system that cannot tell (a fault-injecting one) is then always read
  // (FileDigests).
  virtual absl::StatusOr<FileIdentity> Identify(const std::string& path);
};

}  // namespace quant

#endif  // QUANT_CORE_BASE_FILE_SYSTEM_H_

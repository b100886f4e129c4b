// Deterministic storage faults over a real FileSystem.
#include "tests/support/fault_injecting_file_system.h"

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <memory>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "core/base/file_util.h"
#include "core/base/status_macros.h"
#include "gtest/gtest.h"

namespace quant::testing {

// Counts bytes against the owner's disk-full limit before passing them on.
class FaultInjectingWritableFile : public WritableFile {
 public:
  FaultInjectingWritableFile(FaultInjectingFileSystem* owner, std::string path,
                             std::unique_ptr<WritableFile> base)
      : owner_(owner), path_(std::move(path)), base_(std::move(base)) {}

  absl::Status Append(absl::string_view data) override {
    bool full = false;
    const int64_t fits =
        owner_->Reserve(static_cast<int64_t>(data.size()), &full);
    if (fits > 0) {
      QUANT_RETURN_IF_ERROR(base_->Append(data.substr(0, fits)));
    }
    if (full) {
      owner_->CountFault();
      return ErrnoToStatus("cannot write", path_, ENOSPC);
    }
    return absl::OkStatus();
  }
  absl::Status Sync() override { return base_->Sync(); }
  absl::Status Close() override { return base_->Close(); }

 private:
  FaultInjectingFileSystem* const owner_;
  const std::string path_;
  std::unique_ptr<WritableFile> base_;
};

bool PathIsUnder(const std::string& path, const std::string& prefix) {
  if (path.compare(0, prefix.size(), prefix) != 0) return false;
  return path.size() == prefix.size() || path[prefix.size()] == '/' ||
         (!prefix.empty() && prefix.back() == '/');
}

void FaultInjectingFileSystem::SetDiskFullAfter(int64_t bytes) {
  MutexLock lock(&mutex_);
  disk_full_at_ = bytes_written_ + bytes;
}

void FaultInjectingFileSystem::FailCreatesUnder(std::string prefix, int err) {
  MutexLock lock(&mutex_);
  create_fault_.emplace(std::move(prefix), err);
}

void FaultInjectingFileSystem::FailRenamesTo(std::string prefix, int err) {
  MutexLock lock(&mutex_);
  rename_fault_.emplace(std::move(prefix), err);
}

void FaultInjectingFileSystem::FailReadsOf(std::string prefix, int err) {
  MutexLock lock(&mutex_);
  read_fault_.emplace(std::move(prefix), err);
}

void FaultInjectingFileSystem::ShortReadsOf(std::string prefix, int64_t bytes) {
  MutexLock lock(&mutex_);
  short_read_.emplace(std::move(prefix), bytes);
}

void FaultInjectingFileSystem::ClearFaults() {
  MutexLock lock(&mutex_);
  disk_full_at_.reset();
  create_fault_.reset();
  rename_fault_.reset();
  read_fault_.reset();
  short_read_.reset();
}

int64_t FaultInjectingFileSystem::bytes_written() const {
  MutexLock lock(&mutex_);
  return bytes_written_;
}

int FaultInjectingFileSystem::faults_injected() const {
  MutexLock lock(&mutex_);
  return faults_;
}

int64_t FaultInjectingFileSystem::Reserve(int64_t size, bool* full) {
  MutexLock lock(&mutex_);
  int64_t fits = size;
  if (disk_full_at_.has_value() && bytes_written_ + size > *disk_full_at_) {
    fits = std::max<int64_t>(0, *disk_full_at_ - bytes_written_);
    *full = true;
  }
  bytes_written_ += fits;
  return fits;
}

std::optional<int> FaultInjectingFileSystem::CreateFault(
    const std::string& path) {
  MutexLock lock(&mutex_);
  if (create_fault_.has_value() && PathIsUnder(path, create_fault_->first)) {
    ++faults_;
    return create_fault_->second;
  }
  return std::nullopt;
}

void FaultInjectingFileSystem::CountFault() {
  MutexLock lock(&mutex_);
  ++faults_;
}

FaultInjectingFileSystem::ReadFault FaultInjectingFileSystem::ReadFaultFor(
    const std::string& path) {
  MutexLock lock(&mutex_);
  ReadFault fault;
  if (read_fault_.has_value() && PathIsUnder(path, read_fault_->first)) {
    ++faults_;
    fault.err = read_fault_->second;
  } else if (short_read_.has_value() && PathIsUnder(path, short_read_->first)) {
    ++faults_;
    fault.keep = short_read_->second;
  }
  return fault;
}

absl::StatusOr<std::string> FaultInjectingFileSystem::ReadFile(
    const std::string& path, size_t max_bytes) {
  const ReadFault fault = ReadFaultFor(path);
  if (fault.err.has_value()) {
    return ErrnoToStatus("cannot read", path, *fault.err);
  }
  QUANT_ASSIGN_OR_RETURN(std::string bytes, base_->ReadFile(path, max_bytes));
  if (fault.keep.has_value() &&
      static_cast<int64_t>(bytes.size()) > *fault.keep) {
    bytes.resize(static_cast<size_t>(*fault.keep));
  }
  return bytes;
}

absl::StatusOr<std::unique_ptr<MappedFile>> FaultInjectingFileSystem::MapFile(
    const std::string& path) {
  const ReadFault fault = ReadFaultFor(path);
  if (fault.err.has_value()) {
    return ErrnoToStatus("cannot read", path, *fault.err);
  }
  QUANT_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> file,
                         base_->MapFile(path));
  if (fault.keep.has_value()) {
    return MappedFile::Prefix(std::move(file),
                              static_cast<size_t>(*fault.keep));
  }
  return file;
}

// A stream that fails with `err` at its first read (an I/O error once the
// file is open), or ends after `keep` bytes (a read racing a writer).
class FaultInjectingSequentialFile : public SequentialFile {
 public:
  FaultInjectingSequentialFile(std::string path,
                               std::unique_ptr<SequentialFile> base,
                               std::optional<int> err,
                               std::optional<int64_t> keep)
      : path_(std::move(path)),
        base_(std::move(base)),
        err_(err),
        left_(keep) {}

  absl::StatusOr<size_t> Read(char* buffer, size_t n) override {
    if (err_.has_value()) return ErrnoToStatus("cannot read", path_, *err_);
    if (left_.has_value()) n = std::min<size_t>(n, static_cast<size_t>(*left_));
    if (n == 0) return size_t{0};
    QUANT_ASSIGN_OR_RETURN(const size_t got, base_->Read(buffer, n));
    if (left_.has_value()) *left_ -= static_cast<int64_t>(got);
    return got;
  }

 private:
  const std::string path_;
  std::unique_ptr<SequentialFile> base_;
  const std::optional<int> err_;
  std::optional<int64_t> left_;
};

absl::StatusOr<std::unique_ptr<SequentialFile>>
FaultInjectingFileSystem::NewSequentialFile(const std::string& path) {
  const ReadFault fault = ReadFaultFor(path);
  // A vanished file cannot be opened; other errors come with the reads.
  if (fault.err == ENOENT) return ErrnoToStatus("cannot read", path, ENOENT);
  QUANT_ASSIGN_OR_RETURN(std::unique_ptr<SequentialFile> file,
                         base_->NewSequentialFile(path));
  return std::make_unique<FaultInjectingSequentialFile>(path, std::move(file),
                                                        fault.err, fault.keep);
}

absl::StatusOr<std::unique_ptr<WritableFile>>
FaultInjectingFileSystem::NewWritableFile(const std::string& path) {
  if (std::optional<int> err = CreateFault(path)) {
    return ErrnoToStatus("cannot create", path, *err);
  }
  QUANT_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file,
                         base_->NewWritableFile(path));
  return std::make_unique<FaultInjectingWritableFile>(this, path,
                                                      std::move(file));
}

absl::Status FaultInjectingFileSystem::RenameFile(const std::string& from,
                                                  const std::string& to) {
  {
    MutexLock lock(&mutex_);
    if (rename_fault_.has_value() && PathIsUnder(to, rename_fault_->first)) {
      ++faults_;
      return ErrnoToStatus(absl::StrCat("cannot rename ", from, " to"), to,
                           rename_fault_->second);
    }
  }
  return base_->RenameFile(from, to);
}

absl::Status FaultInjectingFileSystem::RemoveFile(const std::string& path) {
  return base_->RemoveFile(path);
}

absl::Status FaultInjectingFileSystem::MakeDirectory(const std::string& path) {
  if (std::optional<int> err = CreateFault(path)) {
    return ErrnoToStatus("cannot create directory", path, *err);
  }
  return base_->MakeDirectory(path);
}

absl::StatusOr<std::string> FaultInjectingFileSystem::MakeTemporaryDirectory(
    const std::string& prefix) {
  if (std::optional<int> err = CreateFault(prefix)) {
    return ErrnoToStatus("cannot create directory", prefix + "XXXXXX", *err);
  }
  return base_->MakeTemporaryDirectory(prefix);
}

absl::Status FaultInjectingFileSystem::RemoveTree(const std::string& path) {
  return base_->RemoveTree(path);
}

absl::Status FaultInjectingFileSystem::SyncDirectory(const std::string& dir) {
  return base_->SyncDirectory(dir);
}

std::vector<std::string> DirectoryEntries(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code error;
  for (std::filesystem::directory_iterator it(dir, error), end;
       !error && it != end; it.increment(error)) {
    names.push_back(it->path().filename().string());
  }
  if (error) {
    ADD_FAILURE() << "cannot list " << dir << ": " << error.message();
    return {};
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace quant::testing

// FileSystem::Default(): the POSIX implementation.
#include "core/base/file_system.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/base/file_util.h"
#include "core/base/read_roots.h"

namespace quant {
namespace {

class PosixWritableFile : public WritableFile {
 public:
  PosixWritableFile(std::string path, int fd)
      : path_(std::move(path)), fd_(fd) {}
  ~PosixWritableFile() override {
    if (fd_ >= 0) ::close(fd_);
  }

  absl::Status Append(absl::string_view data) override {
    if (fd_ < 0) return Closed();
    while (!data.empty()) {
      const ssize_t n = ::write(fd_, data.data(), data.size());
      if (n < 0) {
        if (errno == EINTR) continue;
        return ErrnoToStatus("cannot write", path_, errno);
      }
      data.remove_prefix(static_cast<size_t>(n));
    }
    return absl::OkStatus();
  }

  absl::Status Sync() override {
    if (fd_ < 0) return Closed();
    if (::fsync(fd_) != 0) return ErrnoToStatus("cannot sync", path_, errno);
    return absl::OkStatus();
  }

  absl::Status Close() override {
    if (fd_ < 0) return Closed();
    const int rc = ::close(fd_);
    fd_ = -1;
    if (rc != 0) return ErrnoToStatus("cannot close", path_, errno);
    return absl::OkStatus();
  }

 private:
  absl::Status Closed() const {
    return absl::FailedPreconditionError(
        absl::StrCat(path_, " is already closed"));
  }

  std::string path_;
  int fd_;
};

class PosixSequentialFile : public SequentialFile {
 public:
  PosixSequentialFile(std::string path, int fd)
      : path_(std::move(path)), fd_(fd) {}
  ~PosixSequentialFile() override { ::close(fd_); }

  absl::StatusOr<size_t> Read(char* buffer, size_t n) override {
    for (;;) {
      const ssize_t got = ::read(fd_, buffer, n);
      if (got >= 0) return static_cast<size_t>(got);
      if (errno != EINTR) return ErrnoToStatus("cannot read", path_, errno);
    }
  }

 private:
  std::string path_;
  int fd_;
};

class PosixFileSystem : public FileSystem {
 public:
  absl::StatusOr<std::unique_ptr<MappedFile>> MapFile(
      const std::string& path) override {
    return MappedFile::Open(path);
  }

  absl::StatusOr<std::unique_ptr<SequentialFile>> NewSequentialFile(
      const std::string& path) override {
    // A regular file under the thread's read roots (read_roots.h).
    absl::StatusOr<int> fd = OpenRegularFileForRead(path);
    if (!fd.ok()) return fd.status();
    return std::make_unique<PosixSequentialFile>(path, *fd);
  }

  absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(
      const std::string& path) override {
    const int fd =
        ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) {
      if (errno == EEXIST) {
        return absl::AlreadyExistsError(absl::StrCat(path, " already exists"));
      }
      return ErrnoToStatus("cannot create", path, errno);
    }
    return std::make_unique<PosixWritableFile>(path, fd);
  }

  absl::Status RenameFile(const std::string& from,
                          const std::string& to) override {
    if (std::rename(from.c_str(), to.c_str()) != 0) {
      return ErrnoToStatus(absl::StrCat("cannot rename ", from, " to"), to,
                           errno);
    }
    return absl::OkStatus();
  }

  absl::Status RemoveFile(const std::string& path) override {
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
      return ErrnoToStatus("cannot remove", path, errno);
    }
    return absl::OkStatus();
  }

  absl::Status MakeDirectory(const std::string& path) override {
    if (::mkdir(path.c_str(), 0755) != 0) {
      if (errno == EEXIST) {
        return absl::AlreadyExistsError(absl::StrCat(path, " already exists"));
      }
      return ErrnoToStatus("cannot create directory", path, errno);
    }
    return absl::OkStatus();
  }

  absl::StatusOr<std::string> ReadFile(const std::string& path,
                                       size_t max_bytes) override {
    return ReadFileToString(path, max_bytes);
  }

  absl::StatusOr<std::string> MakeTemporaryDirectory(
      const std::string& prefix) override {
    std::string pattern = prefix + "XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) {
      return ErrnoToStatus("cannot create directory", pattern, errno);
    }
    return pattern;
  }

  absl::Status RemoveTree(const std::string& path) override {
    std::error_code error;
    std::filesystem::remove_all(path, error);
    if (error) {
      return absl::InternalError(
          absl::StrCat("cannot remove ", path, ": ", error.message()));
    }
    return absl::OkStatus();
  }

  absl::Status SyncDirectory(const std::string& dir) override {
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return ErrnoToStatus("cannot open directory", dir, errno);
    const int rc = ::fsync(fd);
    const int err = errno;
    ::close(fd);
    if (rc != 0) return ErrnoToStatus("cannot sync directory", dir, err);
    return absl::OkStatus();
  }

  absl::StatusOr<FileIdentity> Identify(const std::string& path) override {
    absl::StatusOr<int> fd = OpenRegularFileForRead(path);
    if (!fd.ok()) return fd.status();
    struct stat st;
    const int rc = ::fstat(*fd, &st);
    const int err = errno;
    ::close(*fd);
    if (rc != 0) return ErrnoToStatus("cannot stat", path, err);
    FileIdentity identity;
    identity.device = static_cast<uint64_t>(st.st_dev);
    identity.inode = static_cast<uint64_t>(st.st_ino);
    identity.size = static_cast<int64_t>(st.st_size);
    identity.modified_ns =
        int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec;
    identity.changed_ns =
        int64_t{st.st_ctim.tv_sec} * 1'000'000'000 + st.st_ctim.tv_nsec;
    return identity;
  }
};

}  // namespace

absl::StatusOr<FileIdentity> FileSystem::Identify(const std::string& path) {
  return absl::UnimplementedError(absl::StrCat(
      "this file system cannot identify ", path, " without reading it"));
}

FileSystem* FileSystem::Default() {
  static FileSystem* const posix = new PosixFileSystem();
  return posix;
}

}  // namespace quant

// Whole-file reads and crash-safe writes.
#include "core/base/file_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "core/base/read_roots.h"
#include "core/base/status_macros.h"

namespace quant {

absl::Status ErrnoToStatus(absl::string_view what, const std::string& path,
                           int err) {
  const std::string message =
      absl::StrCat(what, " ", path, ": ", std::strerror(err));
  if (err == ENOENT) return absl::NotFoundError(message);
  if (err == EACCES || err == EPERM || err == EROFS) {
    return absl::PermissionDeniedError(message);
  }
  // EFBIG: the file size limit; EDQUOT: the user's quota. Both mean "no room
  // for these bytes", like a full disk.
  if (err == ENOSPC || err == EFBIG || err == EDQUOT) {
    return absl::ResourceExhaustedError(message);
  }
  // The path names the wrong kind of thing (a file where a directory is
  // expected, a directory where a file is, a symlink loop): the caller's
  // input is bad, not the service.
  if (err == ENOTDIR || err == EISDIR || err == ELOOP || err == ENAMETOOLONG) {
    return absl::InvalidArgumentError(message);
  }
  return absl::InternalError(message);
}

absl::StatusOr<std::string> ReadFileToString(const std::string& path,
                                             size_t max_bytes) {
  QUANT_ASSIGN_OR_RETURN(const int fd, OpenRegularFileForRead(path));
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return ErrnoToStatus("cannot stat", path, err);
  }
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat(
        path, " is ", st.st_size, " bytes, over the limit of ", max_bytes));
  }
  std::string contents(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  while (done < contents.size()) {
    const ssize_t n = ::read(fd, &contents[done], contents.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : EIO;
      ::close(fd);
      return ErrnoToStatus("cannot read", path, err);
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  return contents;
}

absl::Status WriteFileAtomically(const std::string& path,
                                 absl::string_view contents, FileSystem* fs) {
  std::random_device random;
  const std::string temp =
      absl::StrCat(path, ".tmp-", ::getpid(), "-", random() & 0xFFFFFFu);
  QUANT_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file,
                         fs->NewWritableFile(temp));
  absl::Status status = file->Append(contents);
  if (status.ok()) status = file->Sync();
  // Closed whatever happened, so the temporary file can go.
  const absl::Status closed = file->Close();
  if (status.ok()) status = closed;
  if (status.ok()) status = fs->RenameFile(temp, path);
  if (!status.ok()) fs->RemoveFile(temp).IgnoreError();
  return status;
}

std::string JoinPath(absl::string_view a, absl::string_view b) {
  if (a.empty()) return std::string(b);
  if (b.empty()) return std::string(a);
  absl::ConsumeSuffix(&a, "/");
  absl::ConsumePrefix(&b, "/");
  return absl::StrCat(a, "/", b);
}

bool FileExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

bool IsDirectory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

}  // namespace quant

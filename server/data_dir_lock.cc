// DataDirLock: flock on DIR/quantd.lock, with the holder's pid inside.
#include "server/data_dir_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "core/base/file_util.h"

namespace quant::server {

absl::StatusOr<std::unique_ptr<DataDirLock>> DataDirLock::Acquire(
    const std::string& data_dir) {
  const std::string path = JoinPath(data_dir, "quantd.lock");
  const int fd =
      ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) return ErrnoToStatus("--data_dir: cannot open", path, errno);
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    char pid[32] = {0};
    const ssize_t n = ::pread(fd, pid, sizeof(pid) - 1, 0);
    ::close(fd);
    if (err != EWOULDBLOCK)
      return ErrnoToStatus("--data_dir: cannot lock", path, err);
    const std::string holder(absl::StripAsciiWhitespace(
        absl::string_view(pid, n > 0 ? static_cast<size_t>(n) : 0)));
    return absl::FailedPreconditionError(absl::StrCat(
        "--data_dir: ", data_dir, " is in use by another quantd",
        holder.empty() ? "" : absl::StrCat(" (pid ", holder, ")"),
        ", which holds ", path,
        "; two coordinators on one data directory would corrupt its state"));
  }
  // The pid, for the message above; a failure to write it is harmless.
  const std::string pid = absl::StrCat(::getpid(), "\n");
  if (::ftruncate(fd, 0) == 0) {
    (void)!::pwrite(fd, pid.data(), pid.size(), 0);
  }
  return std::unique_ptr<DataDirLock>(new DataDirLock(fd));
}

DataDirLock::~DataDirLock() { ::close(fd_); }

}  // namespace quant::server

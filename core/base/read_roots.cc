// Per-thread read confinement and the one place files are opened for reading.
#include "core/base/read_roots.h"

#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/file_util.h"

namespace quant {
namespace {

thread_local std::shared_ptr<const ReadRootList> thread_roots;

const char* FileKind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "not a plain file";
}

// The real path of what `fd` refers to, from /proc (the kernel's answer for
// the open file, immune to renames and symlink swaps after the open).
absl::StatusOr<std::string> RealPathOfDescriptor(int fd) {
  const std::string link = absl::StrCat("/proc/self/fd/", fd);
  char buffer[PATH_MAX];
  const ssize_t n = ::readlink(link.c_str(), buffer, sizeof(buffer) - 1);
  if (n <= 0) return ErrnoToStatus("cannot resolve", link, errno);
  return std::string(buffer, static_cast<size_t>(n));
}

}  // namespace

bool PathUnderRoots(const std::string& real_path, const ReadRootList& roots) {
  for (const std::string& root : roots) {
    if (root == "/") return true;
    if (real_path == root || absl::StartsWith(real_path, root + "/")) {
      return true;
    }
  }
  return false;
}

ScopedReadRoots::ScopedReadRoots(const std::vector<std::string>& roots)
    : saved_(thread_roots) {
  auto real = std::make_shared<ReadRootList>();
  for (const std::string& root : roots) {
    char buffer[PATH_MAX];
    if (::realpath(root.c_str(), buffer) != nullptr) real->emplace_back(buffer);
  }
  roots_ = std::move(real);
  thread_roots = roots_;
}

ScopedReadRoots::~ScopedReadRoots() { thread_roots = std::move(saved_); }

std::shared_ptr<const ReadRootList> ThreadReadRoots() { return thread_roots; }

void SetThreadReadRoots(std::shared_ptr<const ReadRootList> roots) {
  thread_roots = std::move(roots);
}

absl::StatusOr<int> OpenRegularFileForRead(const std::string& path) {
  // O_NONBLOCK: opening a FIFO without a writer would block forever (and a
  // blocked open cannot be cancelled). Cleared below for regular files.
  const int fd =
      ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return ErrnoToStatus("cannot open", path, errno);
  const auto fail = [fd](absl::Status status) {
    ::close(fd);
    return status;
  };
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    return fail(ErrnoToStatus("cannot stat", path, errno));
  }
  if (!S_ISREG(st.st_mode)) {
    return fail(absl::InvalidArgumentError(absl::StrCat(
        path, " is ", FileKind(st.st_mode), ", not a regular file")));
  }
  if (const std::shared_ptr<const ReadRootList> roots = thread_roots) {
    absl::StatusOr<std::string> real = RealPathOfDescriptor(fd);
    if (!real.ok()) return fail(real.status());
    if (!PathUnderRoots(*real, *roots)) {
      return fail(absl::PermissionDeniedError(
          absl::StrCat(path, " leads outside the allowed roots (",
                       roots->empty() ? "none" : absl::StrJoin(*roots, ", "),
                       "): a symlink or a swapped directory")));
    }
  }
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
    return fail(ErrnoToStatus("cannot set blocking mode on", path, errno));
  }
  return fd;
}

}  // namespace quant

// Directory helpers on POSIX calls and std::filesystem without exceptions.
#include "core/base/directory_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "core/base/file_util.h"

namespace quant {

absl::Status MakeDirectory(const std::string& path) {
  if (::mkdir(path.c_str(), 0755) != 0) {
    if (errno == EEXIST) {
      return absl::AlreadyExistsError(absl::StrCat(path, " already exists"));
    }
    return ErrnoToStatus("cannot create directory", path, errno);
  }
  return absl::OkStatus();
}

absl::Status RemoveTree(const std::string& path) {
  std::error_code error;
  std::filesystem::remove_all(path, error);
  if (error) {
    return absl::InternalError(
        absl::StrCat("cannot remove ", path, ": ", error.message()));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> ListFiles(const std::string& dir) {
  std::error_code error;
  std::filesystem::directory_iterator it(dir, error);
  if (error) {
    return absl::NotFoundError(
        absl::StrCat("cannot list ", dir, ": ", error.message()));
  }
  std::vector<std::string> names;
  for (; it != std::filesystem::directory_iterator(); it.increment(error)) {
    if (error) break;
    if (it->is_regular_file(error)) {
      names.push_back(it->path().filename().string());
    }
  }
  if (error) {
    return absl::InternalError(
        absl::StrCat("cannot list ", dir, ": ", error.message()));
  }
  std::sort(names.begin(), names.end());
  return names;
}

absl::Status SyncDirectory(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoToStatus("cannot open directory", dir, errno);
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) return ErrnoToStatus("cannot sync directory", dir, err);
  return absl::OkStatus();
}

std::string ParentDirectory(const std::string& path) {
  const std::string parent = std::filesystem::path(path).parent_path().string();
  return parent.empty() ? "." : parent;
}

absl::Status RenameDirectoryIntoPlace(const std::string& from,
                                      const std::string& to) {
  struct stat st;
  if (::lstat(to.c_str(), &st) == 0) {
    return absl::AlreadyExistsError(absl::StrCat(to, " already exists"));
  }
  if (std::rename(from.c_str(), to.c_str()) != 0) {
    return ErrnoToStatus(absl::StrCat("cannot rename ", from, " to"), to,
                         errno);
  }
  return SyncDirectory(ParentDirectory(to));
}

}  // namespace quant

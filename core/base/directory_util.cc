// Directory helpers on POSIX calls and std::filesystem without exceptions;
// the writes go through a FileSystem.
#include "core/base/directory_util.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"

namespace quant {

absl::Status MakeDirectory(const std::string& path, FileSystem* fs) {
  return fs->MakeDirectory(path);
}

absl::Status RemoveTree(const std::string& path, FileSystem* fs) {
  return fs->RemoveTree(path);
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

absl::Status SyncDirectory(const std::string& dir, FileSystem* fs) {
  return fs->SyncDirectory(dir);
}

std::string ParentDirectory(const std::string& path) {
  const std::string parent = std::filesystem::path(path).parent_path().string();
  return parent.empty() ? "." : parent;
}

absl::Status RenameDirectoryIntoPlace(const std::string& from,
                                      const std::string& to, FileSystem* fs) {
  struct stat st;
  if (::lstat(to.c_str(), &st) == 0) {
    return absl::AlreadyExistsError(absl::StrCat(to, " already exists"));
  }
  QUANT_RETURN_IF_ERROR(fs->RenameFile(from, to));
  return fs->SyncDirectory(ParentDirectory(to));
}

}  // namespace quant

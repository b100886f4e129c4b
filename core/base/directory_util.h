// Directory operations for outputs that appear all at once: a result is
// assembled in a temporary directory beside its destination, synced, then
// renamed into place, so nobody sees half of it. Writes go through a
// FileSystem (default: POSIX) so tests can inject faults.
#ifndef QUANT_CORE_BASE_DIRECTORY_UTIL_H_
#define QUANT_CORE_BASE_DIRECTORY_UTIL_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/base/file_system.h"

namespace quant {

// Creates `path` (its parent must exist). AlreadyExists when it does.
absl::Status MakeDirectory(const std::string& path,
                           FileSystem* fs = FileSystem::Default());

// Removes `path` and everything under it; OK when it does not exist.
absl::Status RemoveTree(const std::string& path,
                        FileSystem* fs = FileSystem::Default());

// Names of the regular files directly in `dir`, sorted.
absl::StatusOr<std::vector<std::string>> ListFiles(const std::string& dir);

// fsync of a directory, so renames and new entries in it are durable.
absl::Status SyncDirectory(const std::string& dir,
                           FileSystem* fs = FileSystem::Default());

// Renames `from` to `to`, failing (AlreadyExists) if `to` exists, then syncs
// the parent of `to`.
absl::Status RenameDirectoryIntoPlace(const std::string& from,
                                      const std::string& to,
                                      FileSystem* fs = FileSystem::Default());

// The directory part of `path` ("." when it has none).
std::string ParentDirectory(const std::string& path);

}  // namespace quant

#endif  // QUANT_CORE_BASE_DIRECTORY_UTIL_H_

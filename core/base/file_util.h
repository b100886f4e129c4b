// Whole-file reads and crash-safe writes: a file is written under a temporary
// name in the same folder, synced, then renamed into place, so a reader sees
// the old file or the new one, never a partial one.
#ifndef QUANT_CORE_BASE_FILE_UTIL_H_
#define QUANT_CORE_BASE_FILE_UTIL_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/base/file_system.h"

namespace quant {

// "<what> <path>: <strerror>" with the status code that fits errno `err`
// (NotFound; PermissionDenied for EACCES, EPERM, EROFS; ResourceExhausted for
// ENOSPC, EFBIG, EDQUOT; InvalidArgument for ENOTDIR, EISDIR, ELOOP,
// ENAMETOOLONG; else Internal).
absl::Status ErrnoToStatus(absl::string_view what, const std::string& path,
                           int err);

// Reads a whole file. Fails with InvalidArgument when it exceeds `max_bytes`.
absl::StatusOr<std::string> ReadFileToString(const std::string& path,
                                             size_t max_bytes = size_t{1}
                                                                << 32);

// Writes `contents` to `path` atomically (temp file, fsync, rename) through
// `fs`. On failure the temporary file is removed and `path` is untouched.
absl::Status WriteFileAtomically(const std::string& path,
                                 absl::string_view contents,
                                 FileSystem* fs = FileSystem::Default());

// Joins two path pieces with exactly one '/'.
std::string JoinPath(absl::string_view a, absl::string_view b);

bool FileExists(const std::string& path);
bool IsDirectory(const std::string& path);

}  // namespace quant

#endif  // QUANT_CORE_BASE_FILE_UTIL_H_

// RealPath and MakeTempDir; see temp_dir.h.
#include "bench/load/temp_dir.h"

#include <limits.h>
#include <stdlib.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace quant::load {

absl::StatusOr<std::string> RealPath(const std::string& path) {
  char buffer[PATH_MAX];
  if (realpath(path.c_str(), buffer) == nullptr) {
    return absl::NotFoundError(absl::StrCat("no such path: ", path));
  }
  return std::string(buffer);
}

absl::StatusOr<std::string> MakeTempDir(absl::string_view prefix) {
  const char* tmp = getenv("TMPDIR");
  std::string pattern = absl::StrCat(
      tmp != nullptr && *tmp != '\0' ? tmp : "/tmp", "/", prefix, "-XXXXXX");
  if (mkdtemp(pattern.data()) == nullptr) {
    return absl::InternalError(absl::StrCat("mkdtemp ", pattern, " failed"));
  }
  return RealPath(pattern);
}

}  // namespace quant::load

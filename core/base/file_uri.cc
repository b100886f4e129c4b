// file:// URIs to absolute paths.
#include "core/base/file_uri.h"

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace quant {

std::string QuotedUri(absl::string_view uri) {
  constexpr size_t kMax = 256;
  if (uri.size() <= kMax) return absl::StrCat("\"", uri, "\"");
  return absl::StrCat("\"", uri.substr(0, kMax), "...\" (", uri.size(),
                      " characters)");
}

absl::StatusOr<std::string> FileUriPath(absl::string_view uri,
                                        absl::string_view field) {
  if (uri.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": required"));
  }
  if (!absl::StartsWith(uri, kFileUriScheme)) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": ", QuotedUri(uri),
                     " is not a file:// URI (file:///ABSOLUTE/PATH)"));
  }
  absl::string_view path = uri.substr(kFileUriScheme.size());
  if (!absl::StartsWith(path, "/")) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": ", QuotedUri(uri),
                     " must be file:///ABSOLUTE/PATH (no host part)"));
  }
  if (path.find_first_of("?#") != absl::string_view::npos ||
      path.find('\0') != absl::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": ", QuotedUri(uri),
                     " has a query, fragment or NUL character"));
  }
  return std::string(path);
}

}  // namespace quant

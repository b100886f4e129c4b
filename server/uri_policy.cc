// UriPolicy: file:// URIs checked against allowed roots by real path.
#include "server/uri_policy.h"

#include <limits.h>
#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/base/file_uri.h"

namespace quant::server {
namespace {

// Collapses "//", "." and ".." without touching the file system.
std::string LexicallyNormal(absl::string_view path) {
  std::vector<absl::string_view> parts;
  for (absl::string_view part : absl::StrSplit(path, '/')) {
    if (part.empty() || part == ".") continue;
    if (part == "..") {
      if (!parts.empty()) parts.pop_back();
      continue;
    }
    parts.push_back(part);
  }
  return absl::StrCat("/", absl::StrJoin(parts, "/"));
}

bool IsUnder(const std::string& path, const std::string& root) {
  if (root == "/") return true;
  return path == root || absl::StartsWith(path, absl::StrCat(root, "/"));
}

bool UnderAny(const std::string& path, const std::vector<std::string>& roots) {
  for (const std::string& root : roots) {
    if (IsUnder(path, root)) return true;
  }
  return false;
}

}  // namespace

absl::StatusOr<UriPolicy> UriPolicy::Create(
    const std::vector<std::string>& roots) {
  std::vector<std::string> real_roots;
  std::vector<std::string> lexical_roots;
  for (const std::string& root : roots) {
    if (root.empty() || root[0] != '/') {
      return absl::InvalidArgumentError(absl::StrCat(
          "allowed root \"", root, "\" is not an absolute directory path"));
    }
    char buffer[PATH_MAX];
    if (realpath(root.c_str(), buffer) == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("allowed root ", root, ": ", std::strerror(errno)));
    }
    real_roots.emplace_back(buffer);
    lexical_roots.push_back(LexicallyNormal(root));
    lexical_roots.emplace_back(buffer);
  }
  return UriPolicy(std::move(real_roots), std::move(lexical_roots));
}

absl::StatusOr<std::string> UriPolicy::Resolve(absl::string_view uri,
                                               absl::string_view field) const {
  absl::StatusOr<std::string> path = FileUriPath(uri, field);
  if (!path.ok()) return path.status();
  const auto denied = [&] {
    return absl::PermissionDeniedError(absl::StrCat(
        field, ": ", QuotedUri(uri), " is outside the allowed roots (",
        absl::StrJoin(roots_, ", "), ")"));
  };
  // Lexically outside: refused before the file system is asked, so the
  // answer says nothing about what exists elsewhere.
  if (!UnderAny(LexicallyNormal(*path), lexical_roots_)) return denied();
  char buffer[PATH_MAX];
  if (realpath(path->c_str(), buffer) == nullptr) {
    const int err = errno;
    if (err == ENOENT || err == ENOTDIR) {
      return absl::NotFoundError(
          absl::StrCat(field, ": ", QuotedUri(uri), " does not exist"));
    }
    return absl::PermissionDeniedError(
        absl::StrCat(field, ": ", QuotedUri(uri),
                     " cannot be resolved: ", std::strerror(err)));
  }
  std::string real(buffer);
  if (!UnderAny(real, roots_)) return denied();
  return real;
}

}  // namespace quant::server

// Which file:// URIs quantd may read: only those whose real path (symlinks
// resolved) lies under one of the allowed roots. Traversal ("../") and
// symlinks that lead out of every root are refused.
#ifndef QUANT_SERVER_URI_POLICY_H_
#define QUANT_SERVER_URI_POLICY_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace quant::server {

class UriPolicy {
 public:
  // Every root must be an existing directory; it is kept as its real path.
  static absl::StatusOr<UriPolicy> Create(
      const std::vector<std::string>& roots);

  // The real path of `uri`. Errors name `field` and the URI:
  // InvalidArgument (not a file:/// URI), PermissionDenied (outside every
  // root, lexically or once symlinks are resolved), NotFound (under a root
  // but missing).
  absl::StatusOr<std::string> Resolve(absl::string_view uri,
                                      absl::string_view field) const;

  const std::vector<std::string>& roots() const { return roots_; }

 private:
  UriPolicy(std::vector<std::string> roots,
            std::vector<std::string> lexical_roots)
      : roots_(std::move(roots)), lexical_roots_(std::move(lexical_roots)) {}

  std::vector<std::string> roots_;          // Real paths.
  std::vector<std::string> lexical_roots_;  // As given, normalized, and real.
};

}  // namespace quant::server

#endif  // QUANT_SERVER_URI_POLICY_H_

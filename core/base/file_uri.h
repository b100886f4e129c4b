// file:// URIs, the one form in which quantd, its workers and recipes name
// local files: "file:///ABS/PATH" maps to "/ABS/PATH" (no host, no query,
// no percent-decoding).
#ifndef QUANT_CORE_BASE_FILE_URI_H_
#define QUANT_CORE_BASE_FILE_URI_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace quant {

inline constexpr absl::string_view kFileUriScheme = "file://";

// The absolute path of a "file:///ABS/PATH" URI. InvalidArgument
// "<field>: ..." for an empty URI, another scheme, a host part, a query,
// a fragment or a NUL character.
absl::StatusOr<std::string> FileUriPath(absl::string_view uri,
                                        absl::string_view field);

// `uri` quoted for an error message, cut to a few hundred characters.
std::string QuotedUri(absl::string_view uri);

}  // namespace quant

#endif  // QUANT_CORE_BASE_FILE_URI_H_

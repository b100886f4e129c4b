// Bearer tokens as quantd, quant-worker and quantctl read them: from a file
// (or an environment variable), checked so that they can travel in an
// "authorization: Bearer" header and never reach a log.
#ifndef QUANT_COMMON_TOKEN_FILE_H_
#define QUANT_COMMON_TOKEN_FILE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace quant::common {

// OK when `token` can travel in an "authorization: Bearer" header: at least
// 16 characters, each visible ASCII (0x21..0x7E). Otherwise InvalidArgument
// naming `source` and the first bad byte's position and value, never the
// token itself (it must not reach a log).
absl::Status CheckToken(absl::string_view token, absl::string_view source);

// A token file's contents less one trailing newline ("\n" or "\r\n"), checked
// by CheckToken; InvalidArgument naming `flag` otherwise.
absl::StatusOr<std::string> ReadTokenFile(const std::string& path,
                                          const std::string& flag);

}  // namespace quant::common

#endif  // QUANT_COMMON_TOKEN_FILE_H_

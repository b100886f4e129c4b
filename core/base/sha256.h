// SHA-256 (through OpenSSL) of bytes and of files, as lowercase hex. Used for
// calibration-set identity, checkpoint fingerprints and manifests.
#ifndef QUANT_CORE_BASE_SHA256_H_
#define QUANT_CORE_BASE_SHA256_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/base/file_system.h"

namespace quant {

std::string Sha256Hex(absl::string_view data);

// Streams the file in chunks through `fs`, so any size works.
absl::StatusOr<std::string> Sha256File(const std::string& path,
                                       FileSystem* fs = FileSystem::Default());

// Whether `text` is a sha256 as the functions above write it: 64 lowercase
// hex digits.
bool IsSha256Hex(absl::string_view text);

}  // namespace quant

#endif  // QUANT_CORE_BASE_SHA256_H_

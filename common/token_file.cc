// CheckToken and ReadTokenFile.
#include "common/token_file.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "core/base/file_util.h"
#include "core/base/status_macros.h"

namespace quant::common {
namespace {

constexpr size_t kMinTokenLength = 16;

}  // namespace

absl::Status CheckToken(absl::string_view token, absl::string_view source) {
  if (token.size() < kMinTokenLength) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, " holds a token of ", token.size(),
                     " characters; use at least ", kMinTokenLength));
  }
  for (size_t i = 0; i < token.size(); ++i) {
    const auto byte = static_cast<unsigned char>(token[i]);
    if (byte < 0x21 || byte > 0x7E) {
      return absl::InvalidArgumentError(absl::StrCat(
          source, ": the token's byte ", i + 1, " is 0x",
          absl::Hex(byte, absl::kZeroPad2),
          ", not visible ASCII (0x21..0x7E); a token must fit an HTTP header "
          "(one line, no spaces, no control or non-ASCII bytes)"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadTokenFile(const std::string& path,
                                          const std::string& flag) {
  absl::StatusOr<std::string> text = ReadFileToString(path, 4096);
  if (!text.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": ", text.status().message()));
  }
  absl::string_view token = *text;
  // One trailing newline, as `echo` or an editor leaves it; anything else
  // is part of the token and must pass the check.
  if (absl::ConsumeSuffix(&token, "\n")) absl::ConsumeSuffix(&token, "\r");
  QUANT_RETURN_IF_ERROR(CheckToken(token, absl::StrCat(flag, ": ", path)));
  return std::string(token);
}

}  // namespace quant::common

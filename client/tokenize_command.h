// `quantctl tokenize`: encodes text to token ids (and token strings) with a
// checkpoint's tokenizer, or decodes ids back to text, locally.
#ifndef QUANT_CLIENT_TOKENIZE_COMMAND_H_
#define QUANT_CLIENT_TOKENIZE_COMMAND_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "client/command.h"

namespace quant {

Command TokenizeCommand();

// Parses the --decode list: ids separated by commas and/or whitespace,
// optionally inside [ ] (so a JSON array pastes as is), e.g. "1,403, 407".
// Errors name the bad item.
absl::StatusOr<std::vector<int32_t>> ParseTokenIdList(absl::string_view text);

// A token string made printable on one line: control characters and
// backslash escaped (\n, \t, \r, \\, \xNN); other bytes, UTF-8 included,
// kept.
std::string EscapeTokenForDisplay(absl::string_view token);

}  // namespace quant

#endif  // QUANT_CLIENT_TOKENIZE_COMMAND_H_

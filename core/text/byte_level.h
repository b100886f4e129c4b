// GPT-2's reversible byte <-> printable character mapping, used by the
// byte-level BPE family (Llama 3, Qwen): every byte becomes one visible
// code point ("Ġ" for a space) so that BPE works on any byte string.
#ifndef QUANT_CORE_TEXT_BYTE_LEVEL_H_
#define QUANT_CORE_TEXT_BYTE_LEVEL_H_

#include <string>

#include "absl/strings/string_view.h"

namespace quant {

// Each byte of `bytes` replaced by the UTF-8 of its mapped character.
std::string BytesToByteLevel(absl::string_view bytes);

// The inverse: appends the bytes of a byte-level token to `out` and returns
// true, or returns false (leaving `out` unchanged) when some character of
// `token` is not one of the 256 mapped characters. `token` must be valid
// UTF-8.
bool ByteLevelToBytes(absl::string_view token, std::string* out);

}  // namespace quant

#endif  // QUANT_CORE_TEXT_BYTE_LEVEL_H_

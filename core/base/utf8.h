// UTF-8 helpers: validation (of safetensors headers, tokenizer vocabularies
// and whatever else is dumped as JSON), U+FFFD replacement, code point
// iteration and encoding.
#ifndef QUANT_CORE_BASE_UTF8_H_
#define QUANT_CORE_BASE_UTF8_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace quant {

// The replacement character U+FFFD, UTF-8 encoded.
inline constexpr absl::string_view kReplacementCharacter = "\xEF\xBF\xBD";

// Length in bytes of the valid UTF-8 sequence starting at text[pos], or 0
// when the bytes there are not a valid, complete, shortest-form sequence
// (surrogates and values above U+10FFFF are invalid).
size_t ValidUtf8SequenceLength(absl::string_view text, size_t pos);

bool IsValidUtf8(absl::string_view text);

// Replaces each maximal invalid subsequence with U+FFFD, the Unicode
// "best practice" that WHATWG TextDecoder and Rust's from_utf8_lossy follow.
std::string ReplaceInvalidUtf8(absl::string_view text);

// Decodes the code point of a valid sequence at text[pos] and advances pos.
// The text must be valid UTF-8.
char32_t DecodeUtf8At(absl::string_view text, size_t* pos);

void AppendUtf8(char32_t code_point, std::string* out);

// The Unicode White_Space property (what Rust's char::is_whitespace tests).
bool IsUnicodeWhitespace(char32_t code_point);

}  // namespace quant

#endif  // QUANT_CORE_BASE_UTF8_H_

// UTF-8 validation, lossy repair, decoding and encoding.
#include "core/base/utf8.h"

namespace quant {
namespace {

// Bounds of the second byte for each lead byte (Unicode Table 3-7), so that
// overlong forms, surrogates and values above U+10FFFF are rejected as early
// as the standard's "maximal subpart" rule wants.
bool SecondByteInRange(unsigned char lead, unsigned char second) {
  switch (lead) {
    case 0xE0:
      return second >= 0xA0 && second <= 0xBF;
    case 0xED:
      return second >= 0x80 && second <= 0x9F;
    case 0xF0:
      return second >= 0x90 && second <= 0xBF;
    case 0xF4:
      return second >= 0x80 && second <= 0x8F;
    default:
      return second >= 0x80 && second <= 0xBF;
  }
}

size_t ExpectedLength(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 0;
}

// Number of bytes of a (possibly truncated) valid prefix starting at pos:
// the maximal subpart that is replaced by one U+FFFD. At least 1.
size_t MaximalSubpartLength(absl::string_view text, size_t pos) {
  const auto lead = static_cast<unsigned char>(text[pos]);
  const size_t expected = ExpectedLength(lead);
  if (expected <= 1) return 1;
  size_t length = 1;
  while (length < expected && pos + length < text.size()) {
    const auto byte = static_cast<unsigned char>(text[pos + length]);
    const bool ok = length == 1 ? SecondByteInRange(lead, byte)
                                : (byte >= 0x80 && byte <= 0xBF);
    if (!ok) break;
    ++length;
  }
  return length;
}

}  // namespace

size_t ValidUtf8SequenceLength(absl::string_view text, size_t pos) {
  if (pos >= text.size()) return 0;
  const auto lead = static_cast<unsigned char>(text[pos]);
  const size_t expected = ExpectedLength(lead);
  if (expected == 0 || pos + expected > text.size()) return 0;
  if (expected == 1) return 1;
  return MaximalSubpartLength(text, pos) == expected ? expected : 0;
}

bool IsValidUtf8(absl::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t length = ValidUtf8SequenceLength(text, pos);
    if (length == 0) return false;
    pos += length;
  }
  return true;
}

std::string ReplaceInvalidUtf8(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t length = ValidUtf8SequenceLength(text, pos);
    if (length > 0) {
      out.append(text.data() + pos, length);
      pos += length;
    } else {
      out.append(kReplacementCharacter.data(), kReplacementCharacter.size());
      pos += MaximalSubpartLength(text, pos);
    }
  }
  return out;
}

char32_t DecodeUtf8At(absl::string_view text, size_t* pos) {
  const auto lead = static_cast<unsigned char>(text[*pos]);
  const size_t length = ExpectedLength(lead);
  if (length <= 1) {
    ++*pos;
    return lead;
  }
  char32_t code_point = lead & (0xFF >> (length + 1));
  for (size_t i = 1; i < length; ++i) {
    code_point =
        (code_point << 6) | (static_cast<unsigned char>(text[*pos + i]) & 0x3F);
  }
  *pos += length;
  return code_point;
}

void AppendUtf8(char32_t code_point, std::string* out) {
  if (code_point < 0x80) {
    out->push_back(static_cast<char>(code_point));
  } else if (code_point < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (code_point >> 6)));
    out->push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  } else if (code_point < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (code_point >> 12)));
    out->push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (code_point >> 18)));
    out->push_back(static_cast<char>(0x80 | ((code_point >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  }
}

bool IsUnicodeWhitespace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
         c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

}  // namespace quant

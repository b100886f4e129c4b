// GPT-2 bytes_to_unicode table and its inverse.
#include "core/text/byte_level.h"

#include <array>

#include "core/base/utf8.h"

namespace quant {
namespace {

struct ByteLevelTables {
  std::array<std::string, 256> byte_to_utf8;
  // Mapped code points are all below 0x144; -1 marks "not mapped".
  std::array<int, 0x144> code_point_to_byte;
};

// Printable Latin-1 bytes map to themselves; the others (controls, space,
// 0x7F-0xA0, 0xAD) map to U+0100 upwards in byte order, as in GPT-2's
// bytes_to_unicode().
ByteLevelTables BuildTables() {
  ByteLevelTables tables;
  tables.code_point_to_byte.fill(-1);
  int next_extra = 0;
  for (int byte = 0; byte < 256; ++byte) {
    const bool printable = (byte >= '!' && byte <= '~') ||
                           (byte >= 0xA1 && byte <= 0xAC) ||
                           (byte >= 0xAE && byte <= 0xFF);
    const int code_point = printable ? byte : 256 + next_extra++;
    AppendUtf8(static_cast<char32_t>(code_point), &tables.byte_to_utf8[byte]);
    tables.code_point_to_byte[code_point] = byte;
  }
  return tables;
}

const ByteLevelTables& Tables() {
  static const ByteLevelTables* const tables =
      new ByteLevelTables(BuildTables());
  return *tables;
}

}  // namespace

std::string BytesToByteLevel(absl::string_view bytes) {
  const ByteLevelTables& tables = Tables();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes)
    out += tables.byte_to_utf8[static_cast<unsigned char>(c)];
  return out;
}

bool ByteLevelToBytes(absl::string_view token, std::string* out) {
  const ByteLevelTables& tables = Tables();
  std::string bytes;
  bytes.reserve(token.size());
  size_t pos = 0;
  while (pos < token.size()) {
    const char32_t code_point = DecodeUtf8At(token, &pos);
    if (code_point >= tables.code_point_to_byte.size() ||
        tables.code_point_to_byte[code_point] < 0) {
      return false;
    }
    bytes.push_back(static_cast<char>(tables.code_point_to_byte[code_point]));
  }
  out->append(bytes);
  return true;
}

}  // namespace quant

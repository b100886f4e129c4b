// Bit packers: a reference loop placing one code at a time (any width,
// either layout), and a word-at-a-time path for widths dividing 32.
#include "core/pack/bit_packing.h"

#include <algorithm>
#include <climits>

namespace quant {
namespace {

constexpr int kWordBits = 32;
static_assert(sizeof(uint32_t) * CHAR_BIT == kWordBits,
              "packed words are 32 bits");
// The layouts coincide for widths dividing 32; 3-bit bitstream lines repeat
// every 32 codes = 3 whole words.
static_assert(kWordBits % 2 == 0 && kWordBits % 4 == 0 && kWordBits % 8 == 0,
              "2/4/8-bit codes never straddle a word");
static_assert((32 * 3) % kWordBits == 0, "32 3-bit codes fill 3 words");
static_assert(kWordBits / 3 == 10, "kWholeCodes holds 10 3-bit codes a word");

// Where code j starts: word index and bit shift within it.
struct BitPosition {
  int64_t word;
  int shift;
};

BitPosition PositionOf(int64_t j, int bits, PackLayout layout) {
  if (layout == PackLayout::kBitstream) {
    const int64_t bit = j * bits;
    return {bit / kWordBits, static_cast<int>(bit % kWordBits)};
  }
  const int64_t per_word = kWordBits / bits;
  return {j / per_word, static_cast<int>((j % per_word) * bits)};
}

}  // namespace

bool IsPackableBits(int bits) {
  return bits == 2 || bits == 3 || bits == 4 || bits == 8;
}

int64_t PackedWordCount(int64_t count, int bits, PackLayout layout) {
  if (layout == PackLayout::kBitstream) {
    return (count * bits + kWordBits - 1) / kWordBits;
  }
  const int64_t per_word = kWordBits / bits;
  return (count + per_word - 1) / per_word;
}

void PackLine(const uint8_t* codes, int64_t count, int64_t code_stride,
              int bits, PackLayout layout, uint32_t* words,
              int64_t word_stride) {
  const int64_t num_words = PackedWordCount(count, bits, layout);
  const uint64_t mask = (uint64_t{1} << bits) - 1;
  if (kWordBits % bits == 0) {
    // Fast path: whole codes per word (both layouts agree), one word at a
    // time without per-code division.
    const int per_word = kWordBits / bits;
    for (int64_t w = 0; w < num_words; ++w) {
      const int64_t first = w * per_word;
      const int64_t last = std::min<int64_t>(first + per_word, count);
      uint32_t word = 0;
      for (int64_t j = last - 1; j >= first; --j) {
        word = (word << bits) |
               static_cast<uint32_t>(codes[j * code_stride] & mask);
      }
      words[w * word_stride] = word;
    }
    return;
  }
  for (int64_t w = 0; w < num_words; ++w) words[w * word_stride] = 0;
  for (int64_t j = 0; j < count; ++j) {
    const BitPosition pos = PositionOf(j, bits, layout);
    // Shifting in 64 bits keeps the part that spills into the next word.
    const uint64_t shifted = (codes[j * code_stride] & mask) << pos.shift;
    words[pos.word * word_stride] |= static_cast<uint32_t>(shifted);
    if (pos.shift + bits > kWordBits) {
      words[(pos.word + 1) * word_stride] |=
          static_cast<uint32_t>(shifted >> kWordBits);
    }
  }
}

void UnpackLine(const uint32_t* words, int64_t word_stride, int64_t count,
                int bits, PackLayout layout, uint8_t* codes,
                int64_t code_stride) {
  const uint64_t mask = (uint64_t{1} << bits) - 1;
  for (int64_t j = 0; j < count; ++j) {
    const BitPosition pos = PositionOf(j, bits, layout);
    uint64_t pair = words[pos.word * word_stride];
    if (pos.shift + bits > kWordBits) {
      pair |= static_cast<uint64_t>(words[(pos.word + 1) * word_stride])
              << kWordBits;
    }
    codes[j * code_stride] = static_cast<uint8_t>((pair >> pos.shift) & mask);
  }
}

std::vector<uint32_t> PackRows(const uint8_t* codes, int64_t rows, int64_t cols,
                               int bits, PackLayout layout) {
  const int64_t words_per_row = PackedWordCount(cols, bits, layout);
  std::vector<uint32_t> packed(static_cast<size_t>(rows * words_per_row));
  for (int64_t r = 0; r < rows; ++r) {
    PackLine(codes + r * cols, cols, 1, bits, layout,
             packed.data() + r * words_per_row, 1);
  }
  return packed;
}

std::vector<uint32_t> PackColumns(const uint8_t* codes, int64_t rows,
                                  int64_t cols, int bits, PackLayout layout) {
  const int64_t word_rows = PackedWordCount(rows, bits, layout);
  std::vector<uint32_t> packed(static_cast<size_t>(word_rows * cols));
  for (int64_t c = 0; c < cols; ++c) {
    PackLine(codes + c, rows, cols, bits, layout, packed.data() + c, cols);
  }
  return packed;
}

std::string WordsToLittleEndianBytes(const std::vector<uint32_t>& words) {
  std::string bytes(words.size() * 4, '\0');
  for (size_t i = 0; i < words.size(); ++i) {
    for (int b = 0; b < 4; ++b) {
      bytes[4 * i + b] = static_cast<char>((words[i] >> (8 * b)) & 0xFF);
    }
  }
  return bytes;
}

}  // namespace quant

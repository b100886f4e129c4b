// Bit packers: a reference loop placing one code at a time (any width,
// either layout), a word-at-a-time path for widths dividing 32, whole words
// from 8-byte loads for contiguous 2/4/8-bit codes, and a row sweep for
// packing along columns.
#include "core/pack/bit_packing.h"

#include <algorithm>
#include <climits>
#include <cstring>

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

namespace {

// The SWAR paths read 8 codes as one little-endian uint64: code j is byte j.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the 8-byte packing loads assume a little-endian host");

uint64_t Load8(const uint8_t* p) {
  uint64_t x;
  std::memcpy(&x, p, sizeof(x));
  return x;
}

// Eight 4-bit codes (bytes of x) -> one word, code j at bits [4j, 4j+4).
uint32_t PackNibbles(uint64_t x) {
  x &= 0x0F0F0F0F0F0F0F0Full;
  x = (x | (x >> 4)) & 0x00FF00FF00FF00FFull;
  x = (x | (x >> 8)) & 0x0000FFFF0000FFFFull;
  return static_cast<uint32_t>(x | (x >> 16));
}

// Eight 2-bit codes (bytes of x) -> 16 bits, code j at bits [2j, 2j+2).
uint32_t PackCrumbs(uint64_t x) {
  x &= 0x0303030303030303ull;
  x = (x | (x >> 6)) & 0x000F000F000F000Full;
  x = (x | (x >> 12)) & 0x000000FF000000FFull;
  return static_cast<uint32_t>((x | (x >> 24)) & 0xFFFFu);
}

// Packs the whole words of a contiguous line of 2-, 4- or 8-bit codes;
// returns how many words it wrote (the tail is left to the caller).
int64_t PackWholeWordsSwar(const uint8_t* codes, int64_t count, int bits,
                           uint32_t* words, int64_t word_stride) {
  const int per_word = kWordBits / bits;
  const int64_t whole = count / per_word;
  for (int64_t w = 0; w < whole; ++w) {
    const uint8_t* p = codes + w * per_word;
    uint32_t word = 0;
    if (bits == 4) {
      word = PackNibbles(Load8(p));
    } else if (bits == 2) {
      word = PackCrumbs(Load8(p)) | (PackCrumbs(Load8(p + 8)) << 16);
    } else {  // 8
      std::memcpy(&word, p, sizeof(word));
    }
    words[w * word_stride] = word;
  }
  return whole;
}

}  // namespace

void PackLineReference(const uint8_t* codes, int64_t count, int64_t code_stride,
                       int bits, PackLayout layout, uint32_t* words,
                       int64_t word_stride) {
  const int64_t num_words = PackedWordCount(count, bits, layout);
  const uint64_t mask = (uint64_t{1} << bits) - 1;
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

void PackLine(const uint8_t* codes, int64_t count, int64_t code_stride,
              int bits, PackLayout layout, uint32_t* words,
              int64_t word_stride) {
  const int64_t num_words = PackedWordCount(count, bits, layout);
  const uint64_t mask = (uint64_t{1} << bits) - 1;
  if (kWordBits % bits == 0) {
    int64_t w = 0;
    if (code_stride == 1 && (bits == 2 || bits == 4 || bits == 8)) {
      w = PackWholeWordsSwar(codes, count, bits, words, word_stride);
    }
    // Fast path: whole codes per word (both layouts agree), one word at a
    // time without per-code division.
    const int per_word = kWordBits / bits;
    for (; w < num_words; ++w) {
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
  PackLineReference(codes, count, code_stride, bits, layout, words,
                    word_stride);
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
  std::vector<uint32_t> packed(static_cast<size_t>(word_rows * cols), 0);
  const uint32_t mask = (uint32_t{1} << bits) - 1;
  for (int64_t j = 0; j < rows; ++j) {
    const BitPosition pos = PositionOf(j, bits, layout);
    const uint8_t* in = codes + j * cols;
    uint32_t* out = packed.data() + pos.word * cols;
    for (int64_t c = 0; c < cols; ++c) out[c] |= (in[c] & mask) << pos.shift;
    if (pos.shift + bits > kWordBits) {  // 3-bit codes straddling a word.
      uint32_t* next = out + cols;
      const int spill = kWordBits - pos.shift;
      for (int64_t c = 0; c < cols; ++c) next[c] |= (in[c] & mask) >> spill;
    }
  }
  return packed;
}

std::vector<uint32_t> PackRowsTransposed(const uint8_t* codes, int64_t rows,
                                         int64_t cols, int bits,
                                         PackLayout layout) {
  const int64_t word_rows = PackedWordCount(cols, bits, layout);
  std::vector<uint32_t> packed(static_cast<size_t>(word_rows * rows));
  // A tile of rows packed contiguously, then written out column-wise.
  constexpr int64_t kTileRows = 64;
  std::vector<uint32_t> tile(static_cast<size_t>(kTileRows * word_rows));
  for (int64_t r0 = 0; r0 < rows; r0 += kTileRows) {
    const int64_t count = std::min(kTileRows, rows - r0);
    for (int64_t r = 0; r < count; ++r) {
      PackLine(codes + (r0 + r) * cols, cols, 1, bits, layout,
               tile.data() + r * word_rows, 1);
    }
    for (int64_t w = 0; w < word_rows; ++w) {
      uint32_t* out = packed.data() + w * rows + r0;
      for (int64_t r = 0; r < count; ++r) out[r] = tile[r * word_rows + w];
    }
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

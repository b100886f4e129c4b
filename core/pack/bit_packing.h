// Packers for unsigned integer codes in 32-bit words, the storage of every
// packed checkpoint format here, with the plain per-code reference the fast
// paths are tested against.
//
// A "line" is the sequence of codes packed together (a column of a GPTQ
// qweight, a row of a compressed-tensors weight_packed, ...). Two layouts:
//
//   kBitstream      code j occupies bits [j*b, j*b+b) of the line's
//                   little-endian bit stream, where word w holds stream bits
//                   [32w, 32w+32), least significant bit first. For b = 2, 4,
//                   8 no code straddles a word; for b = 3 every 32 codes fill
//                   exactly 3 words and codes 10 and 21 straddle (GPTQ's
//                   3-bit layout, as AutoGPTQ packs and vLLM unpacks it).
//   kWholeCodes     floor(32/b) codes per word, code j in word j/(32/b) at
//                   bit (j%(32/b))*b; leftover high bits are zero (the
//                   compressed-tensors layout; equals kBitstream for 2, 4, 8).
//
// Example, b = 4, codes 0,1,...,7: one word 0x76543210 in both layouts.
// Unused bits of the last word are zero. Words are uint32_t values; callers
// store them as little-endian int32 (same bit pattern).
#ifndef QUANT_CORE_PACK_BIT_PACKING_H_
#define QUANT_CORE_PACK_BIT_PACKING_H_

#include <cstdint>
#include <string>
#include <vector>

namespace quant {

enum class PackLayout { kBitstream, kWholeCodes };

// True for the code widths the packers accept: 2, 3, 4, 8.
bool IsPackableBits(int bits);

// Words needed for `count` codes of `bits` bits in `layout`.
int64_t PackedWordCount(int64_t count, int bits, PackLayout layout);

// Packs `count` codes read at codes[i * code_stride] into
// PackedWordCount(count, bits, layout) words written at
// words[w * word_stride] (overwritten, not or-ed). Codes must be < 2^bits;
// higher bits are masked off (callers validate ranges first). Contiguous
// 2-, 4- and 8-bit codes are packed a whole word from one 8-byte load
// (SWAR); everything else a word or a code at a time.
void PackLine(const uint8_t* codes, int64_t count, int64_t code_stride,
              int bits, PackLayout layout, uint32_t* words,
              int64_t word_stride);

// The plain reference PackLine's fast paths are tested against: one code
// at a time, placed at its bit position.
void PackLineReference(const uint8_t* codes, int64_t count, int64_t code_stride,
                       int bits, PackLayout layout, uint32_t* words,
                       int64_t word_stride);

// The inverse of PackLine.
void UnpackLine(const uint32_t* words, int64_t word_stride, int64_t count,
                int bits, PackLayout layout, uint8_t* codes,
                int64_t code_stride);

// Row-major [rows, cols] codes packed along dimension 1 (each row is a line):
// result is row-major [rows, PackedWordCount(cols)].
std::vector<uint32_t> PackRows(const uint8_t* codes, int64_t rows, int64_t cols,
                               int bits, PackLayout layout);

// Row-major [rows, cols] codes packed along dimension 0 (each column is a
// line): result is row-major [PackedWordCount(rows), cols]. Every column's
// code j lands at the same bit position, so this sweeps the codes row by
// row, or-ing a whole row into a row of words (contiguous, vectorised by
// the compiler) instead of walking each column with a stride.
std::vector<uint32_t> PackColumns(const uint8_t* codes, int64_t rows,
                                  int64_t cols, int bits, PackLayout layout);

// Row-major [rows, cols] codes, each row a line, stored transposed:
// row-major [PackedWordCount(cols), rows], i.e. word w of row r at
// [w, r] (GPTQ's qweight: column n holds output row n packed along K).
// Packed in tiles of rows so the transposing writes stay in cache.
std::vector<uint32_t> PackRowsTransposed(const uint8_t* codes, int64_t rows,
                                         int64_t cols, int bits,
                                         PackLayout layout);

// Words as little-endian bytes (the stored form of an int32 tensor).
std::string WordsToLittleEndianBytes(const std::vector<uint32_t>& words);

}  // namespace quant

#endif  // QUANT_CORE_PACK_BIT_PACKING_H_

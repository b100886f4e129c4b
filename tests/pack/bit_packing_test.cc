// Tests for the reference bit packers: hand-derived words for small cases,
// then round trips for every width, layout and awkward length.
#include "core/pack/bit_packing.h"

#include <random>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace quant {
namespace {

using ::testing::ElementsAre;

TEST(BitPackingTest, FourBitCodesFillOneWordLowNibbleFirst) {
  const std::vector<uint8_t> codes = {0, 1, 2, 3, 4, 5, 6, 7};
  for (PackLayout layout : {PackLayout::kBitstream, PackLayout::kWholeCodes}) {
    uint32_t word = 0xDEADBEEF;  // Overwritten, not or-ed.
    PackLine(codes.data(), 8, 1, 4, layout, &word, 1);
    EXPECT_EQ(word, 0x76543210u);
  }
}

TEST(BitPackingTest, TwoAndEightBitExamples) {
  const std::vector<uint8_t> bytes = {0x11, 0x22, 0x33, 0x44};
  uint32_t word = 0;
  PackLine(bytes.data(), 4, 1, 8, PackLayout::kBitstream, &word, 1);
  EXPECT_EQ(word, 0x44332211u);
  // 16 two-bit codes 1,2,3,0 repeated: each nibble is 0b00111001 >> ... i.e.
  // byte 0b00'11'10'01 = 0x39.
  std::vector<uint8_t> twos;
  for (int i = 0; i < 4; ++i) twos.insert(twos.end(), {1, 2, 3, 0});
  PackLine(twos.data(), 16, 1, 2, PackLayout::kBitstream, &word, 1);
  EXPECT_EQ(word, 0x39393939u);
}

TEST(BitPackingTest, ThreeBitBitstreamStraddlesWordsLikeGptq) {
  // Code 10 starts at stream bit 30: its low two bits end word 0, its high
  // bit starts word 1. Code 21 starts at bit 63: one bit in word 1, two in
  // word 2.
  std::vector<uint8_t> codes(32, 0);
  codes[10] = 0b101;
  codes[21] = 0b110;
  std::vector<uint32_t> words(3);
  PackLine(codes.data(), 32, 1, 3, PackLayout::kBitstream, words.data(), 1);
  EXPECT_THAT(words, ElementsAre(0x40000000u, 0x00000001u, 0x00000003u));
  EXPECT_EQ(PackedWordCount(32, 3, PackLayout::kBitstream), 3);

  std::vector<uint8_t> all_ones(32, 7);
  PackLine(all_ones.data(), 32, 1, 3, PackLayout::kBitstream, words.data(), 1);
  EXPECT_THAT(words, ElementsAre(0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu));
}

TEST(BitPackingTest, ThreeBitWholeCodesKeepsTenPerWord) {
  std::vector<uint8_t> codes(11, 7);
  std::vector<uint32_t> words(2);
  PackLine(codes.data(), 11, 1, 3, PackLayout::kWholeCodes, words.data(), 1);
  EXPECT_THAT(words, ElementsAre(0x3FFFFFFFu, 0x00000007u));
  EXPECT_EQ(PackedWordCount(11, 3, PackLayout::kWholeCodes), 2);
  EXPECT_EQ(PackedWordCount(30, 3, PackLayout::kWholeCodes), 3);
  EXPECT_EQ(PackedWordCount(32, 3, PackLayout::kWholeCodes), 4);
}

TEST(BitPackingTest, PartialLastWordIsZeroPadded) {
  // K = 172 at 4 bits: 21 full words and 4 codes in the 22nd.
  std::vector<uint8_t> codes(172, 0xF);
  std::vector<uint32_t> words(22);
  PackLine(codes.data(), 172, 1, 4, PackLayout::kWholeCodes, words.data(), 1);
  EXPECT_EQ(words[20], 0xFFFFFFFFu);
  EXPECT_EQ(words[21], 0x0000FFFFu);
}

TEST(BitPackingTest, RoundTripsEveryWidthLayoutAndLength) {
  std::mt19937 rng(7);
  for (int bits : {2, 3, 4, 8}) {
    for (PackLayout layout :
         {PackLayout::kBitstream, PackLayout::kWholeCodes}) {
      for (int64_t count : {1, 5, 10, 11, 31, 32, 33, 96, 172}) {
        std::uniform_int_distribution<int> dist(0, (1 << bits) - 1);
        std::vector<uint8_t> codes(count);
        for (auto& c : codes) c = static_cast<uint8_t>(dist(rng));
        std::vector<uint32_t> words(PackedWordCount(count, bits, layout));
        PackLine(codes.data(), count, 1, bits, layout, words.data(), 1);
        std::vector<uint8_t> back(count);
        UnpackLine(words.data(), 1, count, bits, layout, back.data(), 1);
        EXPECT_EQ(back, codes) << "bits " << bits << " count " << count;
      }
    }
  }
}

// The fast paths (8-byte loads, word at a time, the row sweep, the tiled
// transpose) against the one-code-at-a-time reference, word for word.
TEST(BitPackingTest, FastPathsEqualTheReference) {
  std::mt19937 rng(11);
  for (int bits : {2, 3, 4, 8}) {
    for (PackLayout layout :
         {PackLayout::kBitstream, PackLayout::kWholeCodes}) {
      std::uniform_int_distribution<int> dist(0, 255);  // High bits masked.
      for (int64_t count : {1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 100, 515}) {
        for (int64_t stride : {1, 3}) {
          std::vector<uint8_t> codes(count * stride);
          for (auto& c : codes) c = static_cast<uint8_t>(dist(rng));
          const int64_t words = PackedWordCount(count, bits, layout);
          std::vector<uint32_t> fast(words * 2, 0xDEADBEEFu);
          std::vector<uint32_t> slow(words * 2, 0xDEADBEEFu);
          PackLine(codes.data(), count, stride, bits, layout, fast.data(), 2);
          PackLineReference(codes.data(), count, stride, bits, layout,
                            slow.data(), 2);
          EXPECT_EQ(fast, slow)
              << "bits " << bits << " count " << count << " stride " << stride;
        }
      }
      for (const auto& [rows, cols] : std::vector<std::pair<int64_t, int64_t>>{
               {1, 1}, {33, 5}, {64, 130}, {97, 64}, {130, 7}}) {
        std::vector<uint8_t> codes(rows * cols);
        for (auto& c : codes) c = static_cast<uint8_t>(dist(rng));
        // Along columns: each column a line.
        const int64_t word_rows = PackedWordCount(rows, bits, layout);
        std::vector<uint32_t> expected(word_rows * cols);
        for (int64_t c = 0; c < cols; ++c) {
          PackLineReference(codes.data() + c, rows, cols, bits, layout,
                            expected.data() + c, cols);
        }
        EXPECT_EQ(PackColumns(codes.data(), rows, cols, bits, layout), expected)
            << "bits " << bits << " [" << rows << ", " << cols << "]";
        // Rows as lines, stored transposed.
        const int64_t word_cols = PackedWordCount(cols, bits, layout);
        std::vector<uint32_t> transposed(word_cols * rows);
        for (int64_t r = 0; r < rows; ++r) {
          PackLineReference(codes.data() + r * cols, cols, 1, bits, layout,
                            transposed.data() + r, rows);
        }
        EXPECT_EQ(PackRowsTransposed(codes.data(), rows, cols, bits, layout),
                  transposed)
            << "bits " << bits << " [" << rows << ", " << cols << "]";
      }
    }
  }
}

TEST(BitPackingTest, PackRowsAndColumnsUseTheirDimension) {
  // [2, 8] codes: rows pack to [2, 1]; columns (2 codes each) to [1, 8].
  std::vector<uint8_t> codes = {1, 2,  3,  4,  5,  6,  7,  8,  //
                                9, 10, 11, 12, 13, 14, 15, 0};
  EXPECT_THAT(PackRows(codes.data(), 2, 8, 4, PackLayout::kBitstream),
              ElementsAre(0x87654321u, 0x0FEDCBA9u));
  std::vector<uint32_t> columns =
      PackColumns(codes.data(), 2, 8, 4, PackLayout::kBitstream);
  ASSERT_EQ(columns.size(), 8u);
  EXPECT_EQ(columns[0], 0x91u);
  EXPECT_EQ(columns[7], 0x08u);
}

TEST(BitPackingTest, BytesAreLittleEndian) {
  EXPECT_EQ(WordsToLittleEndianBytes({0x04030201u}), std::string("\1\2\3\4"));
}

}  // namespace
}  // namespace quant

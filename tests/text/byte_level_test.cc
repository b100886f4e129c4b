// Tests of GPT-2's byte <-> character mapping.
#include "core/text/byte_level.h"

#include <string>

#include "gtest/gtest.h"

namespace quant {
namespace {

TEST(ByteLevelTest, MapsSpaceAndNewlineToGpt2Characters) {
  // GPT-2 vocabularies spell " the" as "Ġthe" and "\n" as "Ċ".
  EXPECT_EQ(BytesToByteLevel(" the"), "\xC4\xA0the");
  EXPECT_EQ(BytesToByteLevel("\n"), "\xC4\x8A");
  EXPECT_EQ(BytesToByteLevel("abc~!"), "abc~!");
}

TEST(ByteLevelTest, EveryByteRoundTrips) {
  std::string all_bytes;
  for (int byte = 0; byte < 256; ++byte)
    all_bytes.push_back(static_cast<char>(byte));
  const std::string mapped = BytesToByteLevel(all_bytes);
  std::string back;
  ASSERT_TRUE(ByteLevelToBytes(mapped, &back));
  EXPECT_EQ(back, all_bytes);
}

TEST(ByteLevelTest, RejectsCharactersOutsideTheMapping) {
  std::string out = "kept";
  EXPECT_FALSE(ByteLevelToBytes("a\xE4\xBD\xA0", &out));  // "a你"
  EXPECT_EQ(out, "kept");
}

}  // namespace
}  // namespace quant

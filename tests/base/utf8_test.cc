// Tests of the UTF-8 helpers, above all the U+FFFD repair of invalid input.
#include "core/base/utf8.h"

#include <string>

#include "gtest/gtest.h"

namespace quant {
namespace {

TEST(Utf8Test, ValidTextIsUnchanged) {
  const std::string text =
      "a\xC3\xA9\xE4\xBD\xA0\xF0\x9F\xA6\x80";  // aé你🦀
  EXPECT_TRUE(IsValidUtf8(text));
  EXPECT_EQ(ReplaceInvalidUtf8(text), text);
}

// The example of the Unicode Standard, Table 3-8 ("U+FFFD for each maximal
// subpart"): 61 F1 80 80 E1 80 C2 62 80 63 80 BF 64.
TEST(Utf8Test, ReplacesEachMaximalSubpart) {
  const std::string input =
      "\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64";
  const std::string r(kReplacementCharacter);
  EXPECT_FALSE(IsValidUtf8(input));
  EXPECT_EQ(ReplaceInvalidUtf8(input),
            "a" + r + r + r + "b" + r + "c" + r + r + "d");
}

TEST(Utf8Test, RejectsSurrogatesOverlongAndTruncated) {
  const std::string r(kReplacementCharacter);
  // A surrogate (ED A0 80): ED cannot start it, then two lone continuations.
  EXPECT_EQ(ReplaceInvalidUtf8("\xED\xA0\x80"), r + r + r);
  // Overlong "/" (C0 AF).
  EXPECT_EQ(ReplaceInvalidUtf8("\xC0\xAF"), r + r);
  // Truncated 4-byte sequence at the end.
  EXPECT_EQ(ReplaceInvalidUtf8("x\xF0\x9F\x98"), "x" + r);
  // Above U+10FFFF.
  EXPECT_EQ(ReplaceInvalidUtf8("\xF4\x90\x80\x80"), r + r + r + r);
}

TEST(Utf8Test, DecodesAndEncodesCodePoints) {
  for (char32_t code_point :
       {char32_t{0}, char32_t{0x41}, char32_t{0xE9}, char32_t{0x4F60},
        char32_t{0x1F980}, char32_t{0x10FFFF}}) {
    std::string encoded;
    AppendUtf8(code_point, &encoded);
    ASSERT_TRUE(IsValidUtf8(encoded)) << static_cast<uint32_t>(code_point);
    size_t pos = 0;
    EXPECT_EQ(DecodeUtf8At(encoded, &pos), code_point);
    EXPECT_EQ(pos, encoded.size());
  }
}

}  // namespace
}  // namespace quant

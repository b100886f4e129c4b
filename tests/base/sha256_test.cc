// Tests for SHA-256 against published test vectors.
#include "core/base/sha256.h"

#include "core/base/file_util.h"
#include "gtest/gtest.h"
#include "tests/support/test_env.h"

namespace quant {
namespace {

TEST(Sha256Test, KnownVectors) {
  EXPECT_EQ(Sha256Hex(""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Sha256Test, FileMatchesBytes) {
  const std::string path = JoinPath(testing::MakeTempDir(), "f");
  std::string data(3 << 20, 'q');  // Spans several read chunks.
  data[12345] = 'z';
  ASSERT_TRUE(WriteFileAtomically(path, data).ok());
  auto digest = Sha256File(path);
  ASSERT_TRUE(digest.ok());
  EXPECT_EQ(*digest, Sha256Hex(data));
  EXPECT_EQ(Sha256File(path + ".missing").status().code(),
            absl::StatusCode::kNotFound);
}

// What every sha256 field (calibration sets, task outputs, the store's
// rows) is checked against: exactly what Sha256Hex writes.
TEST(Sha256Test, IsSha256HexAcceptsOnlyWhatSha256HexWrites) {
  EXPECT_TRUE(IsSha256Hex(Sha256Hex("abc")));
  EXPECT_FALSE(IsSha256Hex(""));
  EXPECT_FALSE(IsSha256Hex(Sha256Hex("abc").substr(1)));
  EXPECT_FALSE(IsSha256Hex(Sha256Hex("abc") + "0"));
  std::string upper = Sha256Hex("abc");
  upper[0] = 'B';
  EXPECT_FALSE(IsSha256Hex(upper));
  std::string not_hex = Sha256Hex("abc");
  not_hex[63] = 'g';
  EXPECT_FALSE(IsSha256Hex(not_hex));
}

}  // namespace
}  // namespace quant

// Tests for whole-file reads and atomic writes.
#include "core/base/file_util.h"

#include <filesystem>

#include "gtest/gtest.h"
#include "tests/support/test_env.h"

namespace quant {
namespace {

TEST(FileUtilTest, AtomicWriteThenRead) {
  const std::string dir = testing::MakeTempDir();
  const std::string path = JoinPath(dir, "a.bin");
  ASSERT_TRUE(WriteFileAtomically(path, std::string("hello\0world", 11)).ok());
  auto contents = ReadFileToString(path);
  ASSERT_TRUE(contents.ok());
  EXPECT_EQ(*contents, std::string("hello\0world", 11));
  // Overwrite leaves no temporary files behind.
  ASSERT_TRUE(WriteFileAtomically(path, "second").ok());
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    (void)entry;
    ++files;
  }
  EXPECT_EQ(files, 1);
  EXPECT_EQ(*ReadFileToString(path), "second");
}

TEST(FileUtilTest, WriteIntoMissingFolderFailsCleanly) {
  const std::string dir = testing::MakeTempDir();
  const absl::Status status =
      WriteFileAtomically(JoinPath(dir, "missing/a.bin"), "x");
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
}

TEST(FileUtilTest, ReadMissingFileIsNotFound) {
  auto contents = ReadFileToString("/nonexistent/quant/file");
  EXPECT_EQ(contents.status().code(), absl::StatusCode::kNotFound);
}

TEST(FileUtilTest, ReadRespectsSizeLimit) {
  const std::string path = JoinPath(testing::MakeTempDir(), "big");
  ASSERT_TRUE(WriteFileAtomically(path, std::string(100, 'x')).ok());
  auto contents = ReadFileToString(path, 99);
  EXPECT_EQ(contents.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(ReadFileToString(path, 100).ok());
}

TEST(FileUtilTest, JoinPath) {
  EXPECT_EQ(JoinPath("a/", "/b"), "a/b");
  EXPECT_EQ(JoinPath("a", "b"), "a/b");
  EXPECT_EQ(JoinPath("", "b"), "b");
}

}  // namespace
}  // namespace quant

// Tests for FileDigests: a remembered digest is used only while the file
// keeps its identity, and never for a file changed within the racy window.
#include "core/base/file_digests.h"

#include <cstdio>

#include "core/base/file_util.h"
#include "core/base/sha256.h"
#include "gtest/gtest.h"
#include "tests/support/fault_injecting_file_system.h"
#include "tests/support/test_env.h"

namespace quant {
namespace {

FileDigests::Options NotRacy() {
  FileDigests::Options options;
  options.racy_ns = 0;
  return options;
}

std::string Digest(FileDigests& digests, const std::string& path,
                   FileSystem* fs = FileSystem::Default()) {
  absl::StatusOr<std::string> digest = digests.Sha256File(path, fs);
  EXPECT_TRUE(digest.ok()) << digest.status();
  return digest.ok() ? *digest : "";
}

TEST(FileDigestsTest, ReadsAFileOnceWhileItKeepsItsIdentity) {
  const std::string path = JoinPath(testing::MakeTempDir(), "f");
  ASSERT_TRUE(WriteFileAtomically(path, "first").ok());
  FileDigests digests(NotRacy());
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(Digest(digests, path), Sha256Hex("first"));
  EXPECT_EQ(digests.files_read(), 1);
  // Replaced by a rename (as round files are published), the same size.
  ASSERT_TRUE(WriteFileAtomically(path, "other").ok());
  EXPECT_EQ(Digest(digests, path), Sha256Hex("other"));
  EXPECT_EQ(digests.files_read(), 2);
  EXPECT_EQ(
      digests.Sha256File(path + ".gone", FileSystem::Default()).status().code(),
      absl::StatusCode::kNotFound);
}

// Within one tick of the file system's clock an in-place rewrite of the
// same size keeps the file's identity: such a file is read every time.
TEST(FileDigestsTest, ReadsARecentlyChangedFileEveryTime) {
  const std::string path = JoinPath(testing::MakeTempDir(), "f");
  ASSERT_TRUE(WriteFileAtomically(path, "first").ok());
  FileDigests digests;
  EXPECT_EQ(Digest(digests, path), Sha256Hex("first"));
  FILE* f = std::fopen(path.c_str(), "r+");
  ASSERT_NE(f, nullptr);
  ASSERT_GE(std::fputs("third", f), 0);
  ASSERT_EQ(std::fclose(f), 0);
  EXPECT_EQ(Digest(digests, path), Sha256Hex("third"));
  EXPECT_EQ(digests.files_read(), 2);
}

TEST(FileDigestsTest, AFileSystemThatCannotIdentifyIsAlwaysRead) {
  const std::string path = JoinPath(testing::MakeTempDir(), "f");
  ASSERT_TRUE(WriteFileAtomically(path, "first").ok());
  testing::FaultInjectingFileSystem fs;
  FileDigests digests(NotRacy());
  EXPECT_EQ(Digest(digests, path, &fs), Sha256Hex("first"));
  EXPECT_EQ(Digest(digests, path, &fs), Sha256Hex("first"));
  EXPECT_EQ(digests.files_read(), 2);
  EXPECT_TRUE(Sha256FileWith(nullptr, path, &fs).ok());
}

}  // namespace
}  // namespace quant

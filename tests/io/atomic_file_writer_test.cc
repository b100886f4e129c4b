// Tests for AtomicFileWriter and WriteFileAtomically under storage faults,
// and for the fault-injecting file system the pipeline's fault tests rely
// on: a full disk, an unwritable folder or a failed rename leaves the old
// file untouched and no temporary file behind, with an error that names the
// file and the cause.
#include "core/io/atomic_file_writer.h"

#include <cerrno>
#include <string>

#include "core/base/directory_util.h"
#include "core/base/file_util.h"
#include "core/io/safetensors.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/fault_injecting_file_system.h"
#include "tests/support/test_env.h"

namespace quant {
namespace {

using ::quant::testing::DirectoryEntries;
using ::quant::testing::FaultInjectingFileSystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ErrnoToStatusTest, FullDiskQuotaAndFileSizeAreResourceExhausted) {
  for (int err : {ENOSPC, EFBIG, EDQUOT}) {
    const absl::Status s = ErrnoToStatus("cannot write", "/d/f", err);
    EXPECT_TRUE(absl::IsResourceExhausted(s)) << err << ": " << s;
    EXPECT_THAT(s.message(), HasSubstr("/d/f"));
  }
  for (int err : {EACCES, EPERM, EROFS}) {
    EXPECT_TRUE(absl::IsPermissionDenied(ErrnoToStatus("x", "/d/f", err)))
        << err;
  }
  EXPECT_TRUE(absl::IsNotFound(ErrnoToStatus("x", "/d/f", ENOENT)));
  EXPECT_TRUE(absl::IsInternal(ErrnoToStatus("x", "/d/f", EIO)));
}

TEST(FaultInjectingFileSystemTest, DiskFillsOnTheAppendThatCrossesTheLimit) {
  const std::string dir = testing::MakeTempDir();
  FaultInjectingFileSystem fs;
  fs.SetDiskFullAfter(10);
  auto file = fs.NewWritableFile(dir + "/a");
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_TRUE((*file)->Append("123456").ok());
  const absl::Status full = (*file)->Append("abcdefgh");
  EXPECT_TRUE(absl::IsResourceExhausted(full)) << full;
  EXPECT_THAT(full.message(), HasSubstr(dir + "/a"));
  EXPECT_THAT(full.message(), HasSubstr("No space left on device"));
  // Later appends fail too; what fitted reached the disk.
  EXPECT_TRUE(absl::IsResourceExhausted((*file)->Append("x")));
  ASSERT_TRUE((*file)->Close().ok());
  EXPECT_EQ(*ReadFileToString(dir + "/a"), "123456abcd");
  EXPECT_EQ(fs.bytes_written(), 10);
  EXPECT_EQ(fs.faults_injected(), 2);

  // The limit counts from when it is set; cleared, writes go through.
  fs.ClearFaults();
  auto other = fs.NewWritableFile(dir + "/b");
  ASSERT_TRUE(other.ok());
  EXPECT_TRUE((*other)->Append(std::string(100, 'y')).ok());
  EXPECT_EQ(fs.bytes_written(), 110);
}

TEST(FaultInjectingFileSystemTest, CreatesUnderAPrefixFail) {
  const std::string dir = testing::MakeTempDir();
  FaultInjectingFileSystem fs;
  fs.FailCreatesUnder(dir + "/ro", EROFS);
  const absl::Status made = fs.MakeDirectory(dir + "/ro");
  EXPECT_TRUE(absl::IsPermissionDenied(made)) << made;
  EXPECT_THAT(made.message(), HasSubstr(dir + "/ro"));
  EXPECT_THAT(made.message(), HasSubstr("Read-only file system"));
  auto file = fs.NewWritableFile(dir + "/ro/x");
  EXPECT_TRUE(absl::IsPermissionDenied(file.status())) << file.status();
  // A sibling that merely shares the prefix string is not under it.
  EXPECT_TRUE(fs.MakeDirectory(dir + "/ro.partial").ok());
  EXPECT_TRUE(fs.NewWritableFile(dir + "/ro.partial/x").ok());
  EXPECT_THAT(DirectoryEntries(dir), ElementsAre("ro.partial"));
  EXPECT_EQ(fs.faults_injected(), 2);

  fs.FailCreatesUnder(dir, EACCES);
  const absl::Status denied = fs.MakeDirectory(dir + "/other");
  EXPECT_TRUE(absl::IsPermissionDenied(denied)) << denied;
  EXPECT_THAT(denied.message(), HasSubstr("Permission denied"));
}

TEST(FaultInjectingFileSystemTest, RenamesToAPathFail) {
  const std::string dir = testing::MakeTempDir();
  FaultInjectingFileSystem fs;
  ASSERT_TRUE(WriteFileAtomically(dir + "/from", "data").ok());
  fs.FailRenamesTo(dir + "/to", EXDEV);
  const absl::Status s = fs.RenameFile(dir + "/from", dir + "/to");
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr(dir + "/to"));
  EXPECT_THAT(DirectoryEntries(dir), ElementsAre("from"));
  EXPECT_TRUE(fs.RenameFile(dir + "/from", dir + "/elsewhere").ok());
  EXPECT_THAT(DirectoryEntries(dir), ElementsAre("elsewhere"));
}

// A writer over an existing file: a failure anywhere leaves it as it was
// and no temporary file beside it.
class AtomicFileWriterFaultTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTempDir();
    path_ = dir_ + "/model.safetensors";
    ASSERT_TRUE(WriteFileAtomically(path_, "old contents").ok());
  }
  void ExpectOldFileOnly() {
    EXPECT_THAT(DirectoryEntries(dir_), ElementsAre("model.safetensors"));
    EXPECT_EQ(*ReadFileToString(path_), "old contents");
  }

  std::string dir_;
  std::string path_;
  FaultInjectingFileSystem fs_;
};

TEST_F(AtomicFileWriterFaultTest, DiskFullLeavesOldFileAndNoTemporary) {
  fs_.SetDiskFullAfter(64);
  {
    AtomicFileWriter writer(path_, &fs_);
    ASSERT_TRUE(writer.status().ok()) << writer.status();
    writer.Append(std::string(50, 'a'));
    EXPECT_TRUE(writer.status().ok());
    writer.Append(std::string(50, 'b'));
    EXPECT_TRUE(absl::IsResourceExhausted(writer.status())) << writer.status();
    writer.Append("ignored after the error");
    const absl::Status committed = writer.Commit();
    EXPECT_TRUE(absl::IsResourceExhausted(committed)) << committed;
    EXPECT_THAT(committed.message(), HasSubstr(path_ + ".tmp-"));
    EXPECT_THAT(committed.message(), HasSubstr("No space left on device"));
  }
  ExpectOldFileOnly();
  EXPECT_EQ(fs_.bytes_written(), 64);
}

TEST_F(AtomicFileWriterFaultTest, UnwritableFolderFailsAtCreation) {
  fs_.FailCreatesUnder(dir_, EACCES);
  {
    AtomicFileWriter writer(path_, &fs_);
    EXPECT_TRUE(absl::IsPermissionDenied(writer.status())) << writer.status();
    EXPECT_THAT(writer.status().message(), HasSubstr(path_));
    writer.Append("x");
    EXPECT_TRUE(absl::IsPermissionDenied(writer.Commit()));
  }
  ExpectOldFileOnly();
}

TEST_F(AtomicFileWriterFaultTest, FailedRenameRemovesTheTemporary) {
  fs_.FailRenamesTo(path_, EIO);
  {
    AtomicFileWriter writer(path_, &fs_);
    writer.Append("new contents");
    const absl::Status committed = writer.Commit();
    EXPECT_TRUE(absl::IsInternal(committed)) << committed;
    EXPECT_THAT(committed.message(), HasSubstr(path_));
  }
  ExpectOldFileOnly();
}

TEST_F(AtomicFileWriterFaultTest, WriteFileAtomicallyUnderFaults) {
  fs_.SetDiskFullAfter(3);
  const absl::Status full = WriteFileAtomically(path_, "new contents", &fs_);
  EXPECT_TRUE(absl::IsResourceExhausted(full)) << full;
  ExpectOldFileOnly();
  fs_.ClearFaults();
  fs_.FailRenamesTo(path_, ENOSPC);
  EXPECT_TRUE(absl::IsResourceExhausted(
      WriteFileAtomically(path_, "new contents", &fs_)));
  ExpectOldFileOnly();
  fs_.ClearFaults();
  ASSERT_TRUE(WriteFileAtomically(path_, "new contents", &fs_).ok());
  EXPECT_EQ(*ReadFileToString(path_), "new contents");
}

TEST_F(AtomicFileWriterFaultTest, SafetensorsWriteUnderDiskFull) {
  const std::string data(4096, '\0');
  fs_.SetDiskFullAfter(1000);
  const absl::Status s = WriteSafetensors(
      path_, {{"w", DType::kF32, {1024}, data}}, {{"format", "pt"}}, &fs_);
  EXPECT_TRUE(absl::IsResourceExhausted(s)) << s;
  ExpectOldFileOnly();
}

TEST(AtomicFileWriterTest, CommitsOnceThroughTheDefaultFileSystem) {
  const std::string path = testing::MakeTempDir() + "/out.bin";
  AtomicFileWriter writer(path);
  writer.Append("abc");
  writer.Append("");
  writer.Append("def");
  ASSERT_TRUE(writer.Commit().ok());
  EXPECT_EQ(*ReadFileToString(path), "abcdef");
  EXPECT_TRUE(absl::IsFailedPrecondition(writer.Commit()));
  EXPECT_EQ(*ReadFileToString(path), "abcdef");
}

}  // namespace
}  // namespace quant

// Tests for read confinement and non-regular files: every reader in
// core/base (ReadFileToString, MappedFile, Sha256File) refuses FIFOs and
// directories without blocking, and on a confined thread refuses any file
// whose real path leaves the roots, however it got there (a symlinked file,
// a symlinked or swapped directory), on the pool's helper threads too.
#include "core/base/read_roots.h"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <string>

#include "absl/strings/match.h"
#include "core/base/file_system.h"
#include "core/base/file_util.h"
#include "core/base/mapped_file.h"
#include "core/base/sha256.h"
#include "core/base/thread_pool.h"
#include "gtest/gtest.h"
#include "tests/support/test_env.h"

namespace quant {
namespace {

// Every reader's status for `path`, the FileSystem's included.
std::vector<absl::Status> ReadAll(const std::string& path) {
  FileSystem* fs = FileSystem::Default();
  return {
      ReadFileToString(path).status(), MappedFile::Open(path).status(),
      Sha256File(path).status(),       fs->ReadFile(path, 1 << 20).status(),
      fs->MapFile(path).status(),      fs->NewSequentialFile(path).status()};
}

TEST(ReadRootsTest, FifoIsRefusedWithoutBlocking) {
  const std::string dir = testing::MakeTempDir();
  const std::string fifo = JoinPath(dir, "model.safetensors");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // Before the fix each of these blocked forever waiting for a writer.
  for (const absl::Status& status : ReadAll(fifo)) {
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_TRUE(absl::StrContains(status.message(), "is a FIFO")) << status;
  }
}

TEST(ReadRootsTest, DirectoryIsRefusedAsNotARegularFile) {
  const std::string dir = testing::MakeTempDir();
  for (const absl::Status& status : ReadAll(dir)) {
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_TRUE(absl::StrContains(status.message(), "is a directory"))
        << status;
  }
}

TEST(ReadRootsTest, DeviceIsRefused) {
  for (const absl::Status& status : ReadAll("/dev/zero")) {
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  }
}

struct Layout {
  std::string root;     // The allowed root.
  std::string outside;  // A directory outside it.
  std::string secret;   // outside/secret.txt
};

Layout MakeLayout() {
  Layout layout;
  layout.root = testing::MakeTempDir();
  layout.outside = testing::MakeTempDir();
  layout.secret = JoinPath(layout.outside, "secret.txt");
  EXPECT_TRUE(WriteFileAtomically(layout.secret, "secret").ok());
  return layout;
}

TEST(ReadRootsTest, SymlinkedFileLeadingOutIsRefusedWhenConfined) {
  const Layout layout = MakeLayout();
  const std::string model = JoinPath(layout.root, "model");
  std::filesystem::create_directory(model);
  const std::string link = JoinPath(model, "generation_config.json");
  std::filesystem::create_symlink(layout.secret, link);
  // Unconfined (quantctl --local): the user's own symlink is followed.
  EXPECT_EQ(*ReadFileToString(link), "secret");
  const ScopedReadRoots confined({layout.root});
  for (const absl::Status& status : ReadAll(link)) {
    EXPECT_EQ(status.code(), absl::StatusCode::kPermissionDenied) << status;
    EXPECT_TRUE(absl::StrContains(status.message(), "outside the allowed"))
        << status;
  }
}

TEST(ReadRootsTest, SymlinksInsideTheRootsAreFollowed) {
  // A Hugging Face cache: snapshots/<rev>/model.safetensors links to
  // ../../blobs/<sha>, all under one root.
  const Layout layout = MakeLayout();
  const std::string blobs = JoinPath(layout.root, "blobs");
  const std::string snapshot = JoinPath(layout.root, "snapshots/abc");
  std::filesystem::create_directories(blobs);
  std::filesystem::create_directories(snapshot);
  ASSERT_TRUE(WriteFileAtomically(JoinPath(blobs, "f00d"), "weights").ok());
  std::filesystem::create_symlink("../../blobs/f00d",
                                  JoinPath(snapshot, "model.safetensors"));
  const ScopedReadRoots confined({layout.root});
  for (const absl::Status& status :
       ReadAll(JoinPath(snapshot, "model.safetensors"))) {
    EXPECT_TRUE(status.ok()) << status;
  }
}

TEST(ReadRootsTest, DirectorySwappedForASymlinkIsRefused) {
  const Layout layout = MakeLayout();
  const std::string model = JoinPath(layout.root, "model");
  std::filesystem::create_directory(model);
  ASSERT_TRUE(WriteFileAtomically(JoinPath(model, "secret.txt"), "ok").ok());
  const ScopedReadRoots confined({layout.root});
  EXPECT_EQ(*ReadFileToString(JoinPath(model, "secret.txt")), "ok");
  // After submit: the directory becomes a symlink to one outside.
  std::filesystem::remove_all(model);
  std::filesystem::create_directory_symlink(layout.outside, model);
  EXPECT_EQ(ReadFileToString(JoinPath(model, "secret.txt")).status().code(),
            absl::StatusCode::kPermissionDenied);
}

TEST(ReadRootsTest, ScopeEndsAndNests) {
  const Layout layout = MakeLayout();
  {
    const ScopedReadRoots outer({layout.root});
    {
      const ScopedReadRoots inner({layout.outside});
      EXPECT_TRUE(ReadFileToString(layout.secret).ok());
    }
    EXPECT_FALSE(ReadFileToString(layout.secret).ok());
  }
  EXPECT_TRUE(ReadFileToString(layout.secret).ok());
  EXPECT_EQ(ThreadReadRoots(), nullptr);
}

TEST(ReadRootsTest, MissingRootConfinesToNothing) {
  const Layout layout = MakeLayout();
  const ScopedReadRoots confined({"/nonexistent/quant/root"});
  EXPECT_EQ(ReadFileToString(layout.secret).status().code(),
            absl::StatusCode::kPermissionDenied);
}

TEST(ReadRootsTest, PoolThreadsReadUnderTheCallersRoots) {
  const Layout layout = MakeLayout();
  ThreadPool pool(3);
  std::atomic<int> refused{0};
  {
    const ScopedReadRoots confined({layout.root});
    pool.ParallelFor(64, [&](int64_t) {
      if (absl::IsPermissionDenied(ReadFileToString(layout.secret).status())) {
        refused.fetch_add(1);
      }
    });
  }
  EXPECT_EQ(refused.load(), 64);
  // And the helpers drop them after the loop.
  std::atomic<int> read{0};
  pool.ParallelFor(64, [&](int64_t) {
    if (ReadFileToString(layout.secret).ok()) read.fetch_add(1);
  });
  EXPECT_EQ(read.load(), 64);
}

TEST(ReadRootsTest, PathUnderRootsMatchesWholeComponents) {
  EXPECT_TRUE(PathUnderRoots("/a/b", {"/a"}));
  EXPECT_TRUE(PathUnderRoots("/a", {"/a"}));
  EXPECT_FALSE(PathUnderRoots("/ab", {"/a"}));
  EXPECT_TRUE(PathUnderRoots("/x", {"/"}));
  EXPECT_FALSE(PathUnderRoots("/x", {}));
}

}  // namespace
}  // namespace quant

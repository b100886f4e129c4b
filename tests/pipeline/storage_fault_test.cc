// The service's finalize and block tasks (job_tasks.h) on stories260K under
// injected storage faults: a disk that fills while the checkpoint or a
// block's output is written, an unwritable artifact location, a rename into
// place that fails. Each fails with an error naming the path and the cause,
// leaves nothing visible (no checkpoint, no partial directory, no published
// block), and a rerun on a healthy disk succeeds with the same bytes as an
// undisturbed run.
#include <cerrno>
#include <string>
#include <vector>

#include "core/base/directory_util.h"
#include "core/base/file_util.h"
#include "core/pipeline/job_tasks.h"
#include "core/pipeline/task_io.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/pipeline/pipeline_fixture.h"
#include "tests/support/fault_injecting_file_system.h"
#include "tests/support/test_env.h"

namespace quant {
namespace {

using ::quant::testing::DirectoryEntries;
using ::quant::testing::FaultInjectingFileSystem;
using ::quant::testing::ReadOrEmpty;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// Block 0's published tensors and leaving states in `work_dir` (its layer
// results record timings, which differ from run to run).
std::vector<std::string> PublishedBlock0(const std::string& work_dir) {
  std::vector<std::string> files;
  for (const char* suffix :
       {".safetensors", ".cal.safetensors", ".heldout.safetensors"}) {
    files.push_back(ReadOrEmpty(BlockOutputPrefix(work_dir, 0) + suffix));
  }
  return files;
}

bool Block0Published(const std::string& work_dir) {
  return FileExists(BlockOutputPrefix(work_dir, 0) + ".layers.json");
}

class StorageFaultTest : public testing::SharedModelTest {
 protected:
  void SetUp() override {
    SharedModelTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    recipe_ = testing::SmallRecipe(QuantMethod::kGptq, 0,
                                   OutputFormat::kCompressedTensors,
                                   Propagation::kSequential);
    artifacts_ = temp_ + "/artifacts";
    ASSERT_TRUE(MakeDirectory(artifacts_).ok());
  }

  JobTaskContext Context(const std::string& work_name, FileSystem* fs) {
    JobTaskContext context;
    context.checkpoint_dir = testing::Stories260KDir();
    context.calibration_path = testing::TinyStoriesPath();
    context.recipe = recipe_;
    context.work_dir = temp_ + "/" + work_name;
    context.file_system = fs;
    if (!IsDirectory(context.work_dir)) {
      EXPECT_TRUE(MakeDirectory(context.work_dir).ok());
    }
    return context;
  }

  // Every block published into "work" on a healthy disk.
  void PublishAllBlocks() {
    const JobTaskContext context = Context("work", FileSystem::Default());
    for (int block = 0; block < 5; ++block) {
      const absl::Status s = RunBlockJobTask(
          context, block, temp_ + "/attempt-" + std::to_string(block), {});
      ASSERT_TRUE(s.ok()) << "block " << block << ": " << s;
    }
  }

  absl::StatusOr<FinalizeJobResult> Finalize(const std::string& out,
                                             FileSystem* fs) {
    return RunFinalizeJobTask(Context("work", fs), out, kDefaultMaxShardBytes,
                              TaskControl());
  }

  // An undisturbed finalize's model.safetensors.
  std::string ReferenceWeights() {
    const std::string out = temp_ + "/reference";
    auto done = Finalize(out, FileSystem::Default());
    EXPECT_TRUE(done.ok()) << done.status();
    return ReadOrEmpty(out + "/model.safetensors");
  }

  // A finalize after a fault: succeeds on the healthy disk, publishes the
  // same weights, and is a whole checkpoint.
  void ExpectRerunMatches(const std::string& out, const std::string& weights) {
    auto rerun = Finalize(out, FileSystem::Default());
    ASSERT_TRUE(rerun.ok()) << rerun.status();
    EXPECT_FALSE(rerun->already_done);
    EXPECT_TRUE(FileExists(out + "/manifest.json"));
    EXPECT_TRUE(ReadOrEmpty(out + "/model.safetensors") == weights)
        << "the rerun's model.safetensors differs from an undisturbed run's";
  }

  // Block 0 run and published on a healthy disk into "reference-work".
  std::vector<std::string> ReferenceBlock0() {
    const JobTaskContext healthy =
        Context("reference-work", FileSystem::Default());
    const absl::Status s =
        RunBlockJobTask(healthy, 0, temp_ + "/reference-attempt", {});
    EXPECT_TRUE(s.ok()) << s;
    return PublishedBlock0(healthy.work_dir);
  }

  // After a fault: block 0 reruns into "work" on the healthy disk and
  // publishes the undisturbed run's bytes.
  void ExpectBlock0RerunMatches(const std::vector<std::string>& reference) {
    const JobTaskContext rerun = Context("work", FileSystem::Default());
    ASSERT_TRUE(RunBlockJobTask(rerun, 0, temp_ + "/attempt-rerun", {}).ok());
    EXPECT_TRUE(Block0Published(rerun.work_dir));
    EXPECT_TRUE(PublishedBlock0(rerun.work_dir) == reference)
        << "the rerun published different bytes";
  }

  Recipe recipe_;
  std::string artifacts_;  // Where faulted finalizes publish; starts empty.
};

TEST_F(StorageFaultTest, DiskFullWhileWritingWeightsLeavesNothingThenRerunOk) {
  ASSERT_NO_FATAL_FAILURE(PublishAllBlocks());
  const std::string weights = ReferenceWeights();
  ASSERT_GT(weights.size(), 1000u);

  // model.safetensors is the first file finalize writes; fill the disk
  // half-way through it.
  const std::string out = artifacts_ + "/checkpoint";
  FaultInjectingFileSystem fs;
  fs.SetDiskFullAfter(static_cast<int64_t>(weights.size() / 2));
  auto failed = Finalize(out, &fs);
  ASSERT_FALSE(failed.ok());
  EXPECT_TRUE(absl::IsResourceExhausted(failed.status())) << failed.status();
  EXPECT_THAT(failed.status().message(), HasSubstr(out));
  EXPECT_THAT(failed.status().message(), HasSubstr("model.safetensors"));
  EXPECT_THAT(failed.status().message(), HasSubstr("No space left on device"));
  EXPECT_EQ(fs.faults_injected(), 1);
  EXPECT_EQ(fs.bytes_written(), static_cast<int64_t>(weights.size() / 2));
  // No checkpoint, no partial directory, no temporary file beside it.
  EXPECT_FALSE(FileExists(out));
  EXPECT_THAT(DirectoryEntries(artifacts_), IsEmpty());

  ExpectRerunMatches(out, weights);
}

TEST_F(StorageFaultTest, UnwritableArtifactLocationIsPermissionDenied) {
  ASSERT_NO_FATAL_FAILURE(PublishAllBlocks());
  const std::string out = artifacts_ + "/checkpoint";
  FaultInjectingFileSystem fs;
  fs.FailCreatesUnder(artifacts_, EACCES);
  auto failed = Finalize(out, &fs);
  ASSERT_FALSE(failed.ok());
  EXPECT_TRUE(absl::IsPermissionDenied(failed.status())) << failed.status();
  EXPECT_THAT(failed.status().message(), HasSubstr(out));
  EXPECT_THAT(failed.status().message(), HasSubstr("Permission denied"));
  EXPECT_EQ(fs.faults_injected(), 1);
  EXPECT_EQ(fs.bytes_written(), 0);
  EXPECT_THAT(DirectoryEntries(artifacts_), IsEmpty());

  // A read-only file system reads the same to the caller.
  FaultInjectingFileSystem read_only;
  read_only.FailCreatesUnder(artifacts_, EROFS);
  auto refused = Finalize(out, &read_only);
  EXPECT_TRUE(absl::IsPermissionDenied(refused.status())) << refused.status();
  EXPECT_THAT(refused.status().message(), HasSubstr("Read-only file system"));
  EXPECT_THAT(DirectoryEntries(artifacts_), IsEmpty());

  ExpectRerunMatches(out, ReferenceWeights());
}

TEST_F(StorageFaultTest, FailedRenameIntoPlaceRemovesTheTemporaryDirectory) {
  ASSERT_NO_FATAL_FAILURE(PublishAllBlocks());
  const std::string out = artifacts_ + "/checkpoint";
  FaultInjectingFileSystem fs;
  // Only the last step, after every file was written, synced and the gates
  // evaluated: renaming the finished checkpoint to its name.
  fs.FailRenamesTo(out, EIO);
  auto failed = Finalize(out, &fs);
  ASSERT_FALSE(failed.ok());
  EXPECT_TRUE(absl::IsInternal(failed.status())) << failed.status();
  EXPECT_THAT(failed.status().message(), HasSubstr("cannot rename"));
  EXPECT_THAT(failed.status().message(), HasSubstr(out + ": "));
  EXPECT_EQ(fs.faults_injected(), 1);
  EXPECT_GT(fs.bytes_written(), 1000);  // The whole checkpoint was written.
  EXPECT_FALSE(FileExists(out));
  EXPECT_THAT(DirectoryEntries(artifacts_), IsEmpty());

  ExpectRerunMatches(out, ReferenceWeights());
}

TEST_F(StorageFaultTest, DiskFullWritingBlockOutputPublishesNothing) {
  const std::vector<std::string> reference = ReferenceBlock0();

  FaultInjectingFileSystem fs;
  fs.SetDiskFullAfter(1000);  // Inside the block's tensors.
  const JobTaskContext context = Context("work", &fs);
  const std::string attempt = temp_ + "/attempt-full";
  const absl::Status s = RunBlockJobTask(context, 0, attempt, {});
  EXPECT_TRUE(absl::IsResourceExhausted(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr(BlockOutputPrefix(attempt, 0)));
  EXPECT_THAT(s.message(), HasSubstr("No space left on device"));
  EXPECT_FALSE(Block0Published(context.work_dir));
  EXPECT_THAT(DirectoryEntries(context.work_dir), IsEmpty());
  EXPECT_THAT(DirectoryEntries(attempt), IsEmpty());  // No temporary file left.

  ExpectBlock0RerunMatches(reference);
}

TEST_F(StorageFaultTest, DiskFullDuringBlockPublishLeavesItUnpublished) {
  const std::vector<std::string> reference = ReferenceBlock0();

  // The third of the four renames into the work directory finds no room
  // for the new directory entry.
  FaultInjectingFileSystem fs;
  const JobTaskContext context = Context("work", &fs);
  const std::string heldout =
      BlockOutputPrefix(context.work_dir, 0) + ".heldout.safetensors";
  fs.FailRenamesTo(heldout, ENOSPC);
  const absl::Status s =
      RunBlockJobTask(context, 0, temp_ + "/attempt-publish", {});
  EXPECT_TRUE(absl::IsResourceExhausted(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("publishing block 0"));
  EXPECT_THAT(s.message(), HasSubstr(heldout));
  EXPECT_EQ(fs.faults_injected(), 1);
  // The layer results, whose presence means "published", were not moved.
  EXPECT_FALSE(Block0Published(context.work_dir));
  // The next block refuses to start from it.
  const absl::Status next = RunBlockJobTask(
      Context("work", FileSystem::Default()), 1, temp_ + "/attempt-1", {});
  EXPECT_TRUE(absl::IsFailedPrecondition(next)) << next;

  ExpectBlock0RerunMatches(reference);
}

}  // namespace
}  // namespace quant

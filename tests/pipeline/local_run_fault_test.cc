// `quantize --local` (local_pipeline.h) under injected storage faults: the
// in-process executor runs the service's block and finalize tasks, so a
// fault in any of them surfaces the same way as on a worker. A run fails
// with an error naming the path and the cause, leaves no checkpoint and no
// temporary work directory, and a rerun with the same work directory
// resumes from the failed block with the bytes of an undisturbed run.
#include <cerrno>
#include <string>
#include <vector>

#include "core/base/directory_util.h"
#include "core/base/file_util.h"
#include "core/pipeline/local_pipeline.h"
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
using ::testing::ElementsAre;
using ::testing::HasSubstr;

using ::quant::testing::CountingObserver;
using ::quant::testing::ReadOrEmpty;

class LocalRunFaultTest : public testing::SharedModelTest {
 protected:
  void SetUp() override {
    SharedModelTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    out_parent_ = temp_ + "/out";
    ASSERT_TRUE(MakeDirectory(out_parent_).ok());
  }

  LocalQuantizeOptions Options(const std::string& name, FileSystem* fs) {
    LocalQuantizeOptions options;
    options.checkpoint_dir = testing::Stories260KDir();
    options.calibration_path = testing::TinyStoriesPath();
    options.out_dir = out_parent_ + "/" + name;
    options.recipe = testing::SmallRecipe(QuantMethod::kGptq, 0,
                                          OutputFormat::kCompressedTensors,
                                          Propagation::kSequential);
    options.file_system = fs;
    return options;
  }

  // An undisturbed run's model.safetensors (its output then removed, so
  // that out_parent_ holds only what the faulted runs leave).
  std::string ReferenceWeights() {
    const LocalQuantizeOptions options =
        Options("reference", FileSystem::Default());
    auto done = RunLocalQuantization(options);
    EXPECT_TRUE(done.ok()) << done.status();
    const std::string weights =
        ReadOrEmpty(options.out_dir + "/model.safetensors");
    EXPECT_TRUE(RemoveTree(options.out_dir).ok());
    return weights;
  }

  std::string out_parent_;
};

TEST_F(LocalRunFaultTest, FailedBlockPublishStopsTheRunAndARerunResumes) {
  const std::string weights = ReferenceWeights();
  ASSERT_GT(weights.size(), 1000u);

  // Block 2's layer results (the last file its publish moves) find no room.
  const std::string work = temp_ + "/work";
  FaultInjectingFileSystem fs;
  fs.FailRenamesTo(BlockOutputPrefix(work, 2) + ".layers.json", ENOSPC);
  LocalQuantizeOptions options = Options("checkpoint", &fs);
  options.work_dir = work;
  CountingObserver first;
  auto failed = RunLocalQuantization(options, &first);
  ASSERT_FALSE(failed.ok());
  EXPECT_TRUE(absl::IsResourceExhausted(failed.status())) << failed.status();
  EXPECT_THAT(failed.status().message(), HasSubstr("publishing block 2"));
  EXPECT_EQ(fs.faults_injected(), 1);
  EXPECT_EQ(first.computed, 3);
  EXPECT_FALSE(FileExists(options.out_dir));
  EXPECT_TRUE(DirectoryEntries(out_parent_).empty())
      << ::testing::PrintToString(DirectoryEntries(out_parent_));
  EXPECT_FALSE(FileExists(BlockOutputPrefix(work, 2) + ".layers.json"));

  // On a healthy disk the same work directory resumes at block 2.
  options.file_system = FileSystem::Default();
  CountingObserver second;
  auto resumed = RunLocalQuantization(options, &second);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_EQ(second.resumed, 2);
  EXPECT_EQ(second.computed, 3);
  EXPECT_TRUE(ReadOrEmpty(options.out_dir + "/model.safetensors") == weights)
      << "the resumed run's model.safetensors differs from an undisturbed "
         "run's";
}

TEST_F(LocalRunFaultTest, DiskFullInABlockTaskLeavesNoTemporaryWorkDirectory) {
  const std::string weights = ReferenceWeights();

  // Fills during the first block's output, inside the temporary work
  // directory beside the output.
  FaultInjectingFileSystem fs;
  fs.SetDiskFullAfter(1000);
  const LocalQuantizeOptions options = Options("checkpoint", &fs);
  auto failed = RunLocalQuantization(options);
  ASSERT_FALSE(failed.ok());
  EXPECT_TRUE(absl::IsResourceExhausted(failed.status())) << failed.status();
  EXPECT_THAT(failed.status().message(),
              HasSubstr(options.out_dir + ".activations-"));
  EXPECT_THAT(failed.status().message(), HasSubstr("No space left on device"));
  EXPECT_EQ(fs.faults_injected(), 1);
  EXPECT_TRUE(DirectoryEntries(out_parent_).empty())
      << ::testing::PrintToString(DirectoryEntries(out_parent_));

  auto rerun =
      RunLocalQuantization(Options("checkpoint", FileSystem::Default()));
  ASSERT_TRUE(rerun.ok()) << rerun.status();
  EXPECT_TRUE(ReadOrEmpty(options.out_dir + "/model.safetensors") == weights);
}

TEST_F(LocalRunFaultTest, UncreatableTemporaryWorkDirectoryFailsBeforeAnyWork) {
  FaultInjectingFileSystem fs;
  const LocalQuantizeOptions options = Options("checkpoint", &fs);
  fs.FailCreatesUnder(options.out_dir + ".activations-", EACCES);
  CountingObserver observer;
  auto failed = RunLocalQuantization(options, &observer);
  ASSERT_FALSE(failed.ok());
  EXPECT_TRUE(absl::IsPermissionDenied(failed.status())) << failed.status();
  EXPECT_THAT(
      failed.status().message(),
      HasSubstr("cannot create a folder for the blocks' hidden states"));
  EXPECT_THAT(failed.status().message(),
              HasSubstr(options.out_dir + ".activations-"));
  EXPECT_EQ(fs.faults_injected(), 1);
  EXPECT_EQ(observer.computed, 0);
  EXPECT_TRUE(DirectoryEntries(out_parent_).empty())
      << ::testing::PrintToString(DirectoryEntries(out_parent_));
}

// A run's inputs are read through its FileSystem: the checkpoint's
// config.json and tensors (mapped), its tokenizer and the calibration set.
// An I/O error in any of them fails the run before any block is computed,
// naming the file, and leaves nothing beside the output.
TEST_F(LocalRunFaultTest, UnreadableInputsFailTheRunByName) {
  const LocalQuantizeOptions probe = Options("checkpoint", nullptr);
  for (const std::string& input :
       {JoinPath(probe.checkpoint_dir, "config.json"),
        JoinPath(probe.checkpoint_dir, "model.safetensors"),
        JoinPath(probe.checkpoint_dir, "tokenizer.json"),
        probe.calibration_path}) {
    SCOPED_TRACE(input);
    FaultInjectingFileSystem fs;
    const LocalQuantizeOptions options = Options("checkpoint", &fs);
    fs.FailReadsOf(input, EIO);
    CountingObserver observer;
    auto failed = RunLocalQuantization(options, &observer);
    ASSERT_FALSE(failed.ok());
    EXPECT_TRUE(absl::IsInternal(failed.status())) << failed.status();
    EXPECT_THAT(failed.status().message(), HasSubstr(input));
    EXPECT_THAT(failed.status().message(), HasSubstr("Input/output error"));
    EXPECT_GE(fs.faults_injected(), 1);
    EXPECT_EQ(observer.computed, 0);
    EXPECT_TRUE(DirectoryEntries(out_parent_).empty())
        << ::testing::PrintToString(DirectoryEntries(out_parent_));
  }
}

TEST_F(LocalRunFaultTest, FailedRenameOfTheCheckpointLeavesNothing) {
  const std::string weights = ReferenceWeights();

  // The finalize's last step: every block done, the checkpoint written and
  // evaluated, its rename to the output's name fails.
  FaultInjectingFileSystem fs;
  const LocalQuantizeOptions options = Options("checkpoint", &fs);
  fs.FailRenamesTo(options.out_dir, EIO);
  auto failed = RunLocalQuantization(options);
  ASSERT_FALSE(failed.ok());
  EXPECT_TRUE(absl::IsInternal(failed.status())) << failed.status();
  EXPECT_THAT(failed.status().message(), HasSubstr("cannot rename"));
  EXPECT_EQ(fs.faults_injected(), 1);
  EXPECT_TRUE(DirectoryEntries(out_parent_).empty())
      << ::testing::PrintToString(DirectoryEntries(out_parent_));

  fs.ClearFaults();
  auto rerun = RunLocalQuantization(options);
  ASSERT_TRUE(rerun.ok()) << rerun.status();
  EXPECT_THAT(DirectoryEntries(out_parent_), ElementsAre("checkpoint"));
  EXPECT_TRUE(ReadOrEmpty(options.out_dir + "/model.safetensors") == weights);
}

}  // namespace
}  // namespace quant

// A full disk during finalize, end to end with real processes: quantd (no
// local workers) and a quant-worker under `prlimit --fsize=N`, N chosen so
// every block output fits but the packed model.safetensors does not. The
// job fails at once with the cause (no retries that hide it) and publishes
// nothing; after the operator fixes the disk (a worker without the limit)
// `quantctl retry --wait` finishes it without recomputing a block, and the
// packed checkpoint is byte-identical to an undisturbed run's.
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/base/file_util.h"
#include "core/pipeline/local_pipeline.h"
#include "core/recipe/recipe.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "quant/v1/service.grpc.pb.h"
#include "server/store/job_store.h"
#include "tests/service/child_process.h"
#include "tests/service/service_fixture.h"
#include "tests/support/fault_injecting_file_system.h"
#include "tests/support/quantctl_runner.h"
#include "tests/support/test_env.h"

namespace quant {
namespace {

using testing::ChildProcess;
using testing::DirectoryEntries;
using testing::RealPath;
using testing::ServiceHarness;

constexpr char kPrlimit[] = "/usr/bin/prlimit";

// The largest regular file under `dir`.
int64_t LargestFile(const std::string& dir) {
  int64_t largest = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
    if (entry.is_regular_file()) {
      largest = std::max(largest, static_cast<int64_t>(entry.file_size()));
    }
  }
  return largest;
}

class StorageFaultE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    QUANT_REQUIRE_SHARED(testing::SharedPath("models/stories260K/hf-f32"));
    QUANT_REQUIRE_SHARED(testing::SharedPath("data/tinystories_val.txt"));
    if (!testing::PathExists(kPrlimit)) {
      GTEST_SKIP() << kPrlimit << " (util-linux) is needed to limit file sizes";
    }
    service_ =
        std::make_unique<ServiceHarness>(RealPath(testing::MakeTempDir()));
    // The service tests' small recipe with even fewer tokens (4 windows of
    // 32): the hidden-state files the blocks exchange are a few KiB, far
    // below the packed model.
    auto recipe = LoadRecipe(testing::SmallRecipePath());
    ASSERT_TRUE(recipe.ok()) << recipe.status();
    recipe_ = *recipe;
    recipe_.calibration.samples = 4;
    recipe_.calibration.seq_len = 32;
  }

  void TearDown() override {
    // A clean stop; whether quantd exits 0 is not what this test checks.
    if (service_ != nullptr) service_->StopQuantd().IgnoreError();
  }

  std::unique_ptr<ServiceHarness> service_;
  Recipe recipe_;
};

TEST_F(StorageFaultE2eTest, DiskFullInFinalizeFailsAtOnceThenRetrySucceeds) {
  // The undisturbed run, in process: the sizes to put the limit between,
  // and the bytes the retried job must reproduce.
  LocalQuantizeOptions local;
  local.checkpoint_dir = testing::CheckpointDir();
  local.calibration_path = testing::CalibrationPath();
  local.out_dir = service_->dir() + "/local";
  local.work_dir = service_->dir() + "/local-work";
  local.recipe = recipe_;
  auto result = RunLocalQuantization(local);
  ASSERT_TRUE(result.ok()) << result.status();
  auto local_tensors = ReadFileToString(local.out_dir + "/model.safetensors");
  ASSERT_TRUE(local_tensors.ok()) << local_tensors.status();
  const int64_t block_files = LargestFile(local.work_dir);
  const int64_t model_bytes = static_cast<int64_t>(local_tensors->size());
  // The premise: a limit between them lets every block task write its
  // output and stops finalize at model.safetensors.
  ASSERT_GT(block_files, 0);
  ASSERT_LT(2 * block_files, model_bytes)
      << "block outputs (" << block_files << " bytes) are no longer well "
      << "below the packed model (" << model_bytes << "): pick another recipe";
  const int64_t limit = (block_files + model_bytes) / 2;

  {
    // One task per block: the test counts each block's attempts.
    std::vector<std::string> args = service_->QuantdArgs("127.0.0.1:0");
    args.push_back("--round_tasks=false");
    const absl::Status started = service_->StartQuantd(args);
    ASSERT_TRUE(started.ok()) << started;
  }
  std::unique_ptr<ChildProcess> limited = service_->StartWrappedWorker(
      {kPrlimit, absl::StrCat("--fsize=", limit), "--"}, "limited");
  auto request = service_->RecipeRequest(recipe_);
  ASSERT_TRUE(request.ok()) << request.status();
  auto created = service_->CreateJob(*request);
  ASSERT_TRUE(created.ok()) << created.status();
  const v1::Job& job = *created;
  ASSERT_FALSE(job.id().empty());
  auto ended = service_->WaitFor(job.id(), /*done=*/nullptr, 600);
  ASSERT_TRUE(ended.ok()) << ended.status();
  const v1::Job& failed = *ended;
  ASSERT_EQ(failed.state(), v1::JOB_STATE_FAILED)
      << failed.error() << "\n"
      << service_->Log("limited.log");
  EXPECT_TRUE(absl::StrContains(failed.error(), "model.safetensors"))
      << failed.error();
  EXPECT_TRUE(absl::StrContains(failed.error(), "File too large") ||
              absl::StrContains(failed.error(), "No space"))
      << failed.error();
  EXPECT_EQ(failed.artifact_uri(), "");
  EXPECT_EQ(failed.progress().blocks_done(), 5);
  // The worker survived the limit (SIGXFSZ ignored) and did not try again.
  EXPECT_TRUE(limited->running()) << service_->Log("limited.log");
  // Read while quantd runs: a second connection, as the store allows.
  std::vector<store::Task> tasks =
      testing::ValueOrFailure(service_->ReadStoredTasks(job.id()));
  ASSERT_EQ(tasks.size(), 6u);
  EXPECT_EQ(tasks.back().kind, store::TaskKind::kFinalize);
  EXPECT_EQ(tasks.back().attempts, 1) << "a full disk was retried";

  // Nothing published, nothing half-written beside it.
  const std::string job_dir = service_->dir() + "/artifacts/jobs/" + job.id();
  EXPECT_EQ(DirectoryEntries(job_dir), std::vector<std::string>{"work"});
  {
    auto report = service_->Report(job.id());
    ASSERT_TRUE(report.ok()) << report.status();
    EXPECT_EQ(report->artifact_uri(), "");
    EXPECT_EQ(report->verdict(), v1::VERDICT_UNSPECIFIED);
  }
  const std::string addr = " --addr=" + service_->address();
  const testing::RunResult fetch =
      testing::RunQuantctl("fetch" + addr + " " + job.id() + " " +
                           testing::Quote(service_->dir() + "/fetched"));
  EXPECT_EQ(fetch.exit_code, 1) << fetch.out;
  EXPECT_FALSE(
      testing::PathExists(service_->dir() + "/fetched/model.safetensors"));

  // The disk is fixed: the limited worker goes, a normal one comes.
  limited->Signal(SIGTERM);
  const int stopped = limited->Wait(60'000);
  EXPECT_TRUE(WIFEXITED(stopped) && WEXITSTATUS(stopped) == 0) << stopped;
  std::unique_ptr<ChildProcess> worker = service_->StartWorker("fixed");
  const testing::RunResult retry =
      testing::RunQuantctl("retry --wait --json" + addr + " " + job.id());
  EXPECT_EQ(retry.exit_code, 0)
      << retry.out << retry.err << service_->Log("fixed.log");
  const nlohmann::json retried =
      nlohmann::json::parse(retry.out, nullptr,
                            /*allow_exceptions=*/false);
  ASSERT_TRUE(retried.is_object()) << retry.out << retry.err;
  EXPECT_EQ(retried["state"], "SUCCEEDED") << retry.out;
  EXPECT_EQ(retried["error"], "");
  auto finished = service_->Get(job.id());
  ASSERT_TRUE(finished.ok()) << finished.status();
  ASSERT_EQ(finished->state(), v1::JOB_STATE_SUCCEEDED) << finished->error();
  EXPECT_EQ(finished->artifact_uri(), "file://" + job_dir + "/checkpoint");

  tasks = testing::ValueOrFailure(service_->ReadStoredTasks(job.id()));
  ASSERT_EQ(tasks.size(), 6u);
  for (const store::Task& task : tasks) {
    EXPECT_EQ(task.state, store::TaskState::kDone) << task.index;
    if (task.kind == store::TaskKind::kBlock) {
      EXPECT_EQ(task.attempts, 1) << "block " << task.block << " recomputed";
    }
  }
  EXPECT_EQ(tasks.back().attempts, 2);  // The failed finalize and the retry.
  EXPECT_EQ(DirectoryEntries(job_dir),
            (std::vector<std::string>{"checkpoint", "work"}));
  auto service_tensors = service_->JobTensors(job.id());
  ASSERT_TRUE(service_tensors.ok()) << service_tensors.status();
  EXPECT_TRUE(*service_tensors == *local_tensors)
      << "the retried job's packed tensors differ from an undisturbed run's";
  worker->Signal(SIGTERM);
  worker->Wait(60'000);
}

}  // namespace
}  // namespace quant

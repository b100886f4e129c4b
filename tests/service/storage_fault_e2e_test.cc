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
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/base/file_util.h"
#include "core/base/sha256.h"
#include "core/pipeline/local_pipeline.h"
#include "core/recipe/recipe.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "quant/v1/service.grpc.pb.h"
#include "server/recipe_convert.h"
#include "server/store/clock.h"
#include "server/store/sqlite_job_store.h"
#include "tests/service/child_process.h"
#include "tests/support/quantctl_runner.h"
#include "tests/support/test_env.h"

namespace quant {
namespace {

using testing::ChildProcess;
using testing::RealPath;

constexpr char kPrlimit[] = "/usr/bin/prlimit";

bool Terminal(v1::JobState state) {
  return state == v1::JOB_STATE_SUCCEEDED || state == v1::JOB_STATE_FAILED ||
         state == v1::JOB_STATE_CANCELLED;
}

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

std::vector<std::string> Entries(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

class StorageFaultE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    QUANT_REQUIRE_SHARED(testing::SharedPath("models/stories260K/hf-f32"));
    QUANT_REQUIRE_SHARED(testing::SharedPath("data/tinystories_val.txt"));
    if (!testing::PathExists(kPrlimit)) {
      GTEST_SKIP() << kPrlimit << " (util-linux) is needed to limit file sizes";
    }
    temp_ = RealPath(testing::MakeTempDir());
    checkpoint_dir_ =
        RealPath(testing::SharedPath("models/stories260K/hf-f32"));
    calibration_path_ =
        RealPath(testing::SharedPath("data/tinystories_val.txt"));
    auto sha = Sha256File(calibration_path_);
    ASSERT_TRUE(sha.ok()) << sha.status();
    calibration_sha256_ = *sha;
    // The service tests' small recipe with even fewer tokens (4 windows of
    // 32): the hidden-state files the blocks exchange are a few KiB, far
    // below the packed model.
    auto recipe = LoadRecipe(testing::FixturesDir() +
                             "/service/stories260k-gptq-small.yaml");
    ASSERT_TRUE(recipe.ok()) << recipe.status();
    recipe_ = *recipe;
    recipe_.calibration.samples = 4;
    recipe_.calibration.seq_len = 32;
  }

  void TearDown() override {
    if (quantd_ != nullptr) {
      quantd_->Signal(SIGTERM);
      quantd_->Wait(60'000);
    }
  }

  void StartQuantd() {
    quantd_ = std::make_unique<ChildProcess>(
        std::vector<std::string>{
            testing::BinaryDir() + "/server/quantd", "--listen=127.0.0.1:0",
            "--data-dir=" + temp_ + "/data",
            "--artifact-root=file://" + temp_ + "/artifacts",
            "--allowed-roots=" + RealPath(testing::SharedDir()) + "," + temp_},
        std::vector<std::string>{}, temp_ + "/quantd.log");
    const std::string line = quantd_->ReadLine(60'000);
    const std::string prefix = "quantd: listening on ";
    ASSERT_TRUE(absl::StartsWith(line, prefix))
        << "quantd said \"" << line << "\"; log:\n"
        << Log("quantd.log");
    address_ = line.substr(prefix.size());
    stub_ = v1::QuantService::NewStub(
        grpc::CreateChannel(address_, grpc::InsecureChannelCredentials()));
  }

  // A quant-worker logging to temp/<name>.log; `prefix` runs it (prlimit).
  std::unique_ptr<ChildProcess> StartWorker(const std::string& name,
                                            std::vector<std::string> prefix) {
    prefix.insert(prefix.end(), {testing::BinaryDir() + "/worker/quant-worker",
                                 "--server=" + address_, "--name=" + name,
                                 "--lease_wait_ms=1000"});
    return std::make_unique<ChildProcess>(std::move(prefix),
                                          std::vector<std::string>{},
                                          temp_ + "/" + name + ".log");
  }

  std::string Log(const std::string& name) {
    auto text = ReadFileToString(temp_ + "/" + name);
    return text.ok() ? *text : "";
  }

  v1::Job Create() {
    v1::CreateJobRequest request;
    request.set_checkpoint_uri("file://" + checkpoint_dir_);
    *request.mutable_recipe() = server::RecipeToProto(recipe_);
    request.mutable_calibration()->mutable_uri()->set_uri("file://" +
                                                          calibration_path_);
    request.mutable_calibration()->mutable_uri()->set_sha256(
        calibration_sha256_);
    grpc::ClientContext context;
    v1::Job job;
    const grpc::Status status = stub_->CreateJob(&context, request, &job);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return job;
  }

  v1::Job Get(const std::string& id) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(10));
    v1::GetJobRequest request;
    request.set_id(id);
    v1::Job job;
    const grpc::Status status = stub_->GetJob(&context, request, &job);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return job;
  }

  v1::Job WaitUntilTerminal(const std::string& id) {
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::minutes(10);
    v1::Job job;
    while (std::chrono::steady_clock::now() < deadline) {
      job = Get(id);
      if (Terminal(job.state())) return job;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ADD_FAILURE() << "timed out waiting for " << id << "; log:\n"
                  << Log("quantd.log");
    return job;
  }

  // The job's tasks as the store has them (a second connection to
  // quantd's database, as the store allows).
  std::vector<store::Task> StoredTasks(const std::string& id) {
    auto store = store::SqliteJobStore::Open(temp_ + "/data/quantd.db",
                                             store::SystemClock::Default());
    EXPECT_TRUE(store.ok()) << store.status();
    if (!store.ok()) return {};
    auto tasks = (*store)->ListTasks(id);
    EXPECT_TRUE(tasks.ok()) << tasks.status();
    return tasks.ok() ? *tasks : std::vector<store::Task>{};
  }

  std::string temp_;
  std::string checkpoint_dir_;
  std::string calibration_path_;
  std::string calibration_sha256_;
  Recipe recipe_;
  std::unique_ptr<ChildProcess> quantd_;
  std::string address_;
  std::unique_ptr<v1::QuantService::Stub> stub_;
};

TEST_F(StorageFaultE2eTest, DiskFullInFinalizeFailsAtOnceThenRetrySucceeds) {
  // The undisturbed run, in process: the sizes to put the limit between,
  // and the bytes the retried job must reproduce.
  LocalQuantizeOptions local;
  local.checkpoint_dir = checkpoint_dir_;
  local.calibration_path = calibration_path_;
  local.out_dir = temp_ + "/local";
  local.work_dir = temp_ + "/local-work";
  local.recipe = recipe_;
  auto result = RunLocalQuantization(local);
  ASSERT_TRUE(result.ok()) << result.status();
  auto local_tensors = ReadFileToString(temp_ + "/local/model.safetensors");
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

  ASSERT_NO_FATAL_FAILURE(StartQuantd());
  std::unique_ptr<ChildProcess> limited =
      StartWorker("limited", {kPrlimit, absl::StrCat("--fsize=", limit), "--"});
  const v1::Job job = Create();
  ASSERT_FALSE(job.id().empty());
  const v1::Job failed = WaitUntilTerminal(job.id());
  ASSERT_EQ(failed.state(), v1::JOB_STATE_FAILED) << failed.error() << "\n"
                                                  << Log("limited.log");
  EXPECT_TRUE(absl::StrContains(failed.error(), "model.safetensors"))
      << failed.error();
  EXPECT_TRUE(absl::StrContains(failed.error(), "File too large") ||
              absl::StrContains(failed.error(), "No space"))
      << failed.error();
  EXPECT_EQ(failed.artifact_uri(), "");
  EXPECT_EQ(failed.progress().blocks_done(), 5);
  // The worker survived the limit (SIGXFSZ ignored) and did not try again.
  EXPECT_TRUE(limited->running()) << Log("limited.log");
  std::vector<store::Task> tasks = StoredTasks(job.id());
  ASSERT_EQ(tasks.size(), 6u);
  EXPECT_EQ(tasks.back().kind, store::TaskKind::kFinalize);
  EXPECT_EQ(tasks.back().attempts, 1) << "a full disk was retried";

  // Nothing published, nothing half-written beside it.
  const std::string job_dir = temp_ + "/artifacts/jobs/" + job.id();
  EXPECT_EQ(Entries(job_dir), std::vector<std::string>{"work"});
  {
    grpc::ClientContext context;
    v1::GetJobReportRequest request;
    request.set_id(job.id());
    v1::JobReport report;
    ASSERT_TRUE(stub_->GetJobReport(&context, request, &report).ok());
    EXPECT_EQ(report.artifact_uri(), "");
    EXPECT_EQ(report.verdict(), v1::VERDICT_UNSPECIFIED);
  }
  const std::string addr = " --addr=" + address_;
  const testing::RunResult fetch =
      testing::RunQuantctl("fetch" + addr + " " + job.id() + " " +
                           testing::Quote(temp_ + "/fetched"));
  EXPECT_EQ(fetch.exit_code, 1) << fetch.out;
  EXPECT_FALSE(testing::PathExists(temp_ + "/fetched/model.safetensors"));

  // The disk is fixed: the limited worker goes, a normal one comes.
  limited->Signal(SIGTERM);
  const int stopped = limited->Wait(60'000);
  EXPECT_TRUE(WIFEXITED(stopped) && WEXITSTATUS(stopped) == 0) << stopped;
  std::unique_ptr<ChildProcess> worker = StartWorker("fixed", {});
  const testing::RunResult retry =
      testing::RunQuantctl("retry --wait --json" + addr + " " + job.id());
  EXPECT_EQ(retry.exit_code, 0) << retry.out << retry.err << Log("fixed.log");
  const nlohmann::json retried =
      nlohmann::json::parse(retry.out, nullptr,
                            /*allow_exceptions=*/false);
  ASSERT_TRUE(retried.is_object()) << retry.out << retry.err;
  EXPECT_EQ(retried["state"], "SUCCEEDED") << retry.out;
  EXPECT_EQ(retried["error"], "");
  const v1::Job finished = Get(job.id());
  ASSERT_EQ(finished.state(), v1::JOB_STATE_SUCCEEDED) << finished.error();
  EXPECT_EQ(finished.artifact_uri(), "file://" + job_dir + "/checkpoint");

  tasks = StoredTasks(job.id());
  ASSERT_EQ(tasks.size(), 6u);
  for (const store::Task& task : tasks) {
    EXPECT_EQ(task.state, store::TaskState::kDone) << task.index;
    if (task.kind == store::TaskKind::kBlock) {
      EXPECT_EQ(task.attempts, 1) << "block " << task.block << " recomputed";
    }
  }
  EXPECT_EQ(tasks.back().attempts, 2);  // The failed finalize and the retry.
  EXPECT_EQ(Entries(job_dir), (std::vector<std::string>{"checkpoint", "work"}));
  auto service_tensors = ReadFileToString(job_dir +
                                          "/checkpoint/"
                                          "model.safetensors");
  ASSERT_TRUE(service_tensors.ok()) << service_tensors.status();
  EXPECT_TRUE(*service_tensors == *local_tensors)
      << "the retried job's packed tensors differ from an undisturbed run's";
  worker->Signal(SIGTERM);
  worker->Wait(60'000);
}

}  // namespace
}  // namespace quant

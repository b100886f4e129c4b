// Kernel levels through the real service: a job runs at the level of the
// worker that leased its first task, to its finalize. A worker that cannot
// run that level never gets its tasks; one that could run a higher level
// runs it at the job's. quantd, quant-worker processes forced to a level
// with --isa (as a CPU without AVX-512 would be), gRPC over loopback.
#include <signal.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/file_util.h"
#include "core/kernels/dispatch.h"
#include "core/pipeline/local_pipeline.h"
#include "core/recipe/recipe.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "quant/v1/service.grpc.pb.h"
#include "tests/service/child_process.h"
#include "tests/service/service_fixture.h"
#include "tests/support/test_env.h"

namespace quant {
namespace {

using kernels::IsaLevel;
using testing::ChildProcess;
using testing::RealPath;
using testing::ServiceHarness;

std::string SlowRecipePath() {
  return testing::FixturesDir() + "/service/stories260k-gptq-medium.yaml";
}

// model.safetensors of `recipe_path` run in this process at `level`.
std::string LocalTensorsAt(IsaLevel level, const std::string& recipe_path,
                           const std::string& out_dir) {
  kernels::ScopedIsa scoped(level);
  LocalQuantizeOptions local;
  local.checkpoint_dir = testing::CheckpointDir();
  local.calibration_path = testing::CalibrationPath();
  local.out_dir = out_dir;
  auto recipe = LoadRecipe(recipe_path);
  EXPECT_TRUE(recipe.ok()) << recipe.status();
  if (!recipe.ok()) return "";
  local.recipe = *recipe;
  local.threads = 2;
  auto result = RunLocalQuantization(local);
  EXPECT_TRUE(result.ok()) << result.status();
  if (!result.ok()) return "";
  return testing::ValueOrFailure(
      ReadFileToString(out_dir + "/model.safetensors"));
}

std::string ManifestIsa(const std::string& checkpoint_dir) {
  const std::string text = testing::ValueOrFailure(
      ReadFileToString(checkpoint_dir + "/manifest.json"));
  const nlohmann::json manifest = nlohmann::json::parse(text, nullptr, false);
  if (!manifest.is_object() || !manifest.contains("kernels")) return "";
  return manifest["kernels"].value("isa", "");
}

class KernelLevelE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    QUANT_REQUIRE_SHARED(testing::SharedPath("models/stories260K/hf-f32"));
    QUANT_REQUIRE_SHARED(testing::SharedPath("data/tinystories_val.txt"));
    if (!kernels::CanRun(IsaLevel::kV3) || !kernels::CanRun(IsaLevel::kV4)) {
      GTEST_SKIP() << "needs a CPU that runs both x86-64-v3 and -v4 kernels "
                      "(this one: "
                   << kernels::DescribeIsa(kernels::ProcessIsa()) << ")";
    }
    service_ =
        std::make_unique<ServiceHarness>(RealPath(testing::MakeTempDir()));
    std::vector<std::string> args = service_->QuantdArgs("127.0.0.1:0");
    args.push_back("--lease_seconds=600");
    const absl::Status started = service_->StartQuantd(args);
    ASSERT_TRUE(started.ok()) << started;
  }

  std::unique_ptr<ChildProcess> Worker(const std::string& name,
                                       const std::string& isa) {
    return service_->StartWorker(
        name, {"--isa=" + isa, "--threads=1", "--lease_wait_ms=300"});
  }

  v1::Job Create(const std::string& request_id, const std::string& recipe) {
    return testing::ValueOrFailure(service_->Create(request_id, recipe));
  }

  // Waits for `log` to show the worker running `block` of `job`.
  void WaitUntilRunning(const std::string& log, const std::string& job,
                        int block) {
    const absl::Status seen = service_->WaitForLog(
        log, absl::StrCat("running ", job, " block ", block, " "), 900);
    ASSERT_TRUE(seen.ok()) << seen << "\n" << service_->Log(log);
  }

  // SIGTERM: the worker hands its task back at once.
  static void Stop(std::unique_ptr<ChildProcess>* worker) {
    (*worker)->Signal(SIGTERM);
    (*worker)->Wait(60'000);
    worker->reset();
  }

  std::string Checkpoint(const std::string& job_id) const {
    return service_->dir() + "/artifacts/jobs/" + job_id + "/checkpoint";
  }

  std::unique_ptr<ServiceHarness> service_;
};

// Started at v3, the job is finished by a worker that could run v4, at v3:
// the same bytes as a local run at v3.
TEST_F(KernelLevelE2eTest, AJobStartedAtV3IsFinishedAtV3) {
  std::unique_ptr<ChildProcess> v3 = Worker("v3", "v3");
  const v1::Job job = Create("v3-job", SlowRecipePath());
  ASSERT_NO_FATAL_FAILURE(WaitUntilRunning("v3.log", job.id(), 1));
  EXPECT_EQ(testing::ValueOrFailure(service_->Get(job.id())).isa(), "v3");
  Stop(&v3);

  std::unique_ptr<ChildProcess> v4 = Worker("v4", "v4");
  const v1::Job done =
      testing::ValueOrFailure(service_->WaitForEnd(job.id(), 1200));
  ASSERT_EQ(done.state(), v1::JOB_STATE_SUCCEEDED)
      << done.error() << service_->Log("v4.log");
  EXPECT_EQ(done.isa(), "v3");
  EXPECT_EQ(ManifestIsa(Checkpoint(done.id())), "v3");
  const std::string v4_log = service_->Log("v4.log");
  EXPECT_NE(v4_log.find("kernels v4: x86-64-v4"), std::string::npos) << v4_log;
  EXPECT_NE(v4_log.find(absl::StrCat("running ", job.id(), " block 1")),
            std::string::npos)
      << v4_log;
  EXPECT_EQ(v4_log.find("with v4 kernels"), std::string::npos)
      << "a task of the v3 job ran at v4:\n"
      << v4_log;
  Stop(&v4);

  const std::string service_tensors = testing::ValueOrFailure(
      ReadFileToString(Checkpoint(done.id()) + "/model.safetensors"));
  const std::string local_tensors = LocalTensorsAt(
      IsaLevel::kV3, SlowRecipePath(), service_->dir() + "/local-v3");
  EXPECT_TRUE(service_tensors == local_tensors)
      << "the service's v3 checkpoint differs from a local run at v3";
}

// Started at v4, the job waits while only a v3 worker is up (which keeps
// taking other work), and a v4 worker finishes it, at v4.
TEST_F(KernelLevelE2eTest, AJobStartedAtV4IsNeverGivenToAV3Worker) {
  std::unique_ptr<ChildProcess> v4 = Worker("v4", "v4");
  const v1::Job job = Create("v4-job", SlowRecipePath());
  ASSERT_NO_FATAL_FAILURE(WaitUntilRunning("v4.log", job.id(), 1));
  EXPECT_EQ(testing::ValueOrFailure(service_->Get(job.id())).isa(), "v4");
  Stop(&v4);

  std::unique_ptr<ChildProcess> v3 = Worker("v3", "v3");
  // A job submitted now has no level yet: the v3 worker runs all of it.
  const v1::Job other = Create("other-job", testing::SmallRecipePath());
  const v1::Job other_done =
      testing::ValueOrFailure(service_->WaitForEnd(other.id(), 1200));
  ASSERT_EQ(other_done.state(), v1::JOB_STATE_SUCCEEDED) << other_done.error();
  EXPECT_EQ(other_done.isa(), "v3");
  // Meanwhile the v4 job got nothing done, and the v3 worker none of its
  // tasks (it polled all along: every 300 ms).
  const v1::Job waiting = testing::ValueOrFailure(service_->Get(job.id()));
  EXPECT_EQ(waiting.state(), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(waiting.progress().blocks_done(), 1);
  const std::string v3_log = service_->Log("v3.log");
  EXPECT_EQ(v3_log.find(absl::StrCat("running ", job.id())), std::string::npos)
      << v3_log;

  std::unique_ptr<ChildProcess> v4b = Worker("v4b", "v4");
  const v1::Job done =
      testing::ValueOrFailure(service_->WaitForEnd(job.id(), 1200));
  ASSERT_EQ(done.state(), v1::JOB_STATE_SUCCEEDED) << done.error();
  EXPECT_EQ(done.isa(), "v4");
  EXPECT_EQ(ManifestIsa(Checkpoint(done.id())), "v4");
  EXPECT_EQ(service_->Log("v3.log").find(absl::StrCat("running ", job.id())),
            std::string::npos);
  Stop(&v3);
  Stop(&v4b);

  const std::string service_tensors = testing::ValueOrFailure(
      ReadFileToString(Checkpoint(done.id()) + "/model.safetensors"));
  EXPECT_TRUE(service_tensors == LocalTensorsAt(IsaLevel::kV4, SlowRecipePath(),
                                                service_->dir() + "/local-v4"))
      << "the service's v4 checkpoint differs from a local run at v4";
}

}  // namespace
}  // namespace quant

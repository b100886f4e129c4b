// The service end to end with real processes: the quantd binary with its
// SQLite file, quant-worker processes (started by quantd --local_workers or
// by the test), real gRPC over loopback. stories260K quantized through the
// service gives the same packed checkpoint as the in-process local run;
// WatchJob sees every layer; a coordinator killed mid-job resumes without
// recomputing finished blocks; a cancelled job stops its workers.
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <chrono>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
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
#include "tests/support/test_env.h"

namespace quant {
namespace {

using testing::ChildProcess;
using testing::RealPath;

bool Terminal(v1::JobState state) {
  return state == v1::JOB_STATE_SUCCEEDED || state == v1::JOB_STATE_FAILED ||
         state == v1::JOB_STATE_CANCELLED;
}

class ServiceE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    QUANT_REQUIRE_SHARED(testing::SharedPath("models/stories260K/hf-f32"));
    QUANT_REQUIRE_SHARED(testing::SharedPath("data/tinystories_val.txt"));
    temp_ = RealPath(testing::MakeTempDir());
    checkpoint_dir_ =
        RealPath(testing::SharedPath("models/stories260K/hf-f32"));
    calibration_path_ =
        RealPath(testing::SharedPath("data/tinystories_val.txt"));
    auto sha = Sha256File(calibration_path_);
    ASSERT_TRUE(sha.ok()) << sha.status();
    calibration_sha256_ = *sha;
    // Small calibration: quick even under ASan. The fault tests use more,
    // so that a block task is still running when they kill or cancel it.
    recipe_path_ =
        testing::FixturesDir() + "/service/stories260k-gptq-small.yaml";
    slow_recipe_path_ =
        testing::FixturesDir() + "/service/stories260k-gptq-medium.yaml";
  }

  std::vector<std::string> QuantdArgs(const std::string& listen) {
    return {testing::BinaryDir() + "/server/quantd", "--listen=" + listen,
            "--data-dir=" + temp_ + "/data",
            "--artifact-root=file://" + temp_ + "/artifacts",
            "--allowed-roots=" + RealPath(testing::SharedDir()) + "," + temp_};
  }

  // Starts quantd and connects; its stderr (and its local workers') goes to
  // temp/quantd.log.
  void StartQuantd(std::vector<std::string> args) {
    quantd_ = std::make_unique<ChildProcess>(
        std::move(args), std::vector<std::string>{}, temp_ + "/quantd.log");
    const std::string line = quantd_->ReadLine(60'000);
    const std::string prefix = "quantd: listening on ";
    ASSERT_TRUE(absl::StartsWith(line, prefix))
        << "quantd said \"" << line << "\"; log:\n"
        << Log("quantd.log");
    address_ = line.substr(prefix.size());
    stub_ = v1::QuantService::NewStub(
        grpc::CreateChannel(address_, grpc::InsecureChannelCredentials()));
  }

  // SIGTERM and wait: a clean stop.
  void StopQuantd() {
    if (quantd_ == nullptr) return;
    quantd_->Signal(SIGTERM);
    const int status = quantd_->Wait(60'000);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << status << "\n"
        << Log("quantd.log");
    quantd_.reset();
  }

  // Waits until the worker logging to `log` has started block `block` of
  // `job` (its lease is held from then until it logs the block done).
  void WaitUntilRunning(const std::string& log, const std::string& job,
                        int block) {
    const std::string started =
        absl::StrCat("running ", job, " block ", block, " (attempt 1)");
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::seconds(900);
    while (Log(log).find(started) == std::string::npos) {
      ASSERT_LT(std::chrono::steady_clock::now(), deadline)
          << "never saw \"" << started << "\" in " << log << ":\n"
          << Log(log);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  std::string Log(const std::string& name) {
    auto text = ReadFileToString(temp_ + "/" + name);
    return text.ok() ? *text : "";
  }

  v1::CreateJobRequest Request(const std::string& request_id, bool slow) {
    auto recipe = LoadRecipe(slow ? slow_recipe_path_ : recipe_path_);
    EXPECT_TRUE(recipe.ok()) << recipe.status();
    v1::CreateJobRequest request;
    request.set_checkpoint_uri("file://" + checkpoint_dir_);
    *request.mutable_recipe() = server::RecipeToProto(*recipe);
    request.mutable_calibration()->mutable_uri()->set_uri("file://" +
                                                          calibration_path_);
    request.mutable_calibration()->mutable_uri()->set_sha256(
        calibration_sha256_);
    request.set_request_id(request_id);
    (*request.mutable_labels())["suite"] = "e2e";
    return request;
  }

  // `slow`: the fault tests' recipe (block tasks of a second or more).
  v1::Job Create(const std::string& request_id, bool slow = false) {
    grpc::ClientContext context;
    v1::Job job;
    const grpc::Status status =
        stub_->CreateJob(&context, Request(request_id, slow), &job);
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

  // Polls until `done(job)` or the timeout; returns the last job seen.
  v1::Job WaitFor(const std::string& id,
                  const std::function<bool(const v1::Job&)>& done,
                  int timeout_s = 1200) {
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
    v1::Job job;
    while (std::chrono::steady_clock::now() < deadline) {
      job = Get(id);
      if (done(job) || Terminal(job.state())) return job;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ADD_FAILURE() << "timed out waiting for " << id << "; log:\n"
                  << Log("quantd.log");
    return job;
  }

  std::vector<v1::JobEvent> WatchToEnd(const std::string& id) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::minutes(20));
    v1::WatchJobRequest request;
    request.set_id(id);
    auto reader = stub_->WatchJob(&context, request);
    std::vector<v1::JobEvent> events;
    v1::JobEvent event;
    while (reader->Read(&event)) events.push_back(event);
    const grpc::Status status = reader->Finish();
    EXPECT_TRUE(status.ok()) << status.error_message();
    return events;
  }

  // The job's tasks as the store recorded them (quantd stopped).
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
  std::string recipe_path_;
  std::string slow_recipe_path_;
  std::unique_ptr<ChildProcess> quantd_;
  std::string address_;
  std::unique_ptr<v1::QuantService::Stub> stub_;
};

TEST_F(ServiceE2eTest, SameCheckpointAsLocalRunAndWatchSeesEveryLayer) {
  std::vector<std::string> args = QuantdArgs("127.0.0.1:0");
  args.push_back("--local-workers=2");
  ASSERT_NO_FATAL_FAILURE(StartQuantd(args));
  const v1::Job job = Create("e2e-1");
  ASSERT_FALSE(job.id().empty());
  // Idempotent: the replay is the same job.
  EXPECT_EQ(Create("e2e-1").id(), job.id());

  const std::vector<v1::JobEvent> events = WatchToEnd(job.id());
  ASSERT_FALSE(events.empty());
  ASSERT_TRUE(events.front().has_job());
  EXPECT_EQ(events.front().job().id(), job.id());
  std::set<std::string> layers;
  int last_blocks_done = 0;
  for (const v1::JobEvent& e : events) {
    if (e.has_layer()) {
      EXPECT_TRUE(layers.insert(e.layer().name()).second)
          << "layer reported twice: " << e.layer().name();
    }
    if (e.has_progress()) {
      EXPECT_GE(e.progress().blocks_done(), last_blocks_done);
      last_blocks_done = e.progress().blocks_done();
    }
  }
  EXPECT_EQ(layers.size(), 35u);  // 5 blocks x 7 linear layers.
  EXPECT_EQ(last_blocks_done, 5);
  ASSERT_TRUE(events.back().has_job());
  const v1::Job& final_job = events.back().job();
  ASSERT_EQ(final_job.state(), v1::JOB_STATE_SUCCEEDED)
      << final_job.error() << "\n"
      << Log("quantd.log");
  EXPECT_NE(final_job.verdict(), v1::VERDICT_UNSPECIFIED);
  const std::string artifact =
      temp_ + "/artifacts/jobs/" + job.id() + "/checkpoint";
  EXPECT_EQ(final_job.artifact_uri(), "file://" + artifact);

  grpc::ClientContext context;
  v1::GetJobReportRequest report_request;
  report_request.set_id(job.id());
  v1::JobReport report;
  ASSERT_TRUE(stub_->GetJobReport(&context, report_request, &report).ok());
  ASSERT_EQ(report.layers_size(), 35);
  EXPECT_EQ(report.verdict(), final_job.verdict());
  EXPECT_EQ(report.gates().verdict(),
            final_job.verdict() == v1::VERDICT_PASS ? "PASS" : "FAIL");
  StopQuantd();

  // The same job in one process.
  LocalQuantizeOptions local;
  local.checkpoint_dir = checkpoint_dir_;
  local.calibration_path = calibration_path_;
  local.out_dir = temp_ + "/local";
  auto recipe = LoadRecipe(recipe_path_);
  ASSERT_TRUE(recipe.ok());
  local.recipe = *recipe;
  auto result = RunLocalQuantization(local);
  ASSERT_TRUE(result.ok()) << result.status();
  auto service_tensors = ReadFileToString(artifact + "/model.safetensors");
  auto local_tensors = ReadFileToString(temp_ + "/local/model.safetensors");
  ASSERT_TRUE(service_tensors.ok()) << service_tensors.status();
  ASSERT_TRUE(local_tensors.ok()) << local_tensors.status();
  EXPECT_TRUE(*service_tensors == *local_tensors)
      << "the service's packed tensors differ from the local run's";
  EXPECT_EQ(result->passed, final_job.verdict() == v1::VERDICT_PASS);
  // The report carries the local audit's numbers.
  const nlohmann::json& local_layers = result->audit.at("layers");
  ASSERT_EQ(local_layers.size(), 35u);
  for (int i = 0; i < report.layers_size(); ++i) {
    EXPECT_EQ(report.layers(i).name(), local_layers[i].at("name"));
    EXPECT_EQ(report.layers(i).rel_output_error_heldout(),
              local_layers[i].at("rel_output_error_heldout").get<double>());
  }
  // Every task ran once.
  for (const store::Task& task : StoredTasks(job.id())) {
    EXPECT_EQ(task.attempts, 1) << "task " << task.index;
    EXPECT_EQ(task.state, store::TaskState::kDone);
  }
}

TEST_F(ServiceE2eTest, RestartedCoordinatorResumesWithoutRecomputing) {
  const int port = testing::FreeLoopbackPort();
  ASSERT_GT(port, 0);
  std::vector<std::string> args = QuantdArgs(absl::StrCat("127.0.0.1:", port));
  args.push_back("--lease_seconds=3");
  ASSERT_NO_FATAL_FAILURE(StartQuantd(args));
  // A worker of its own, which outlives the coordinator.
  ChildProcess worker(
      {testing::BinaryDir() + "/worker/quant-worker", "--server=" + address_,
       "--name=survivor", "--lease_wait_ms=1000"},
      {}, temp_ + "/worker.log");
  const v1::Job job = Create("restart-1", /*slow=*/true);
  // A client watching through the restart.
  ChildProcess watcher({testing::BinaryDir() + "/client/quantctl", "watch",
                        job.id(), "--addr=" + address_},
                       {}, temp_ + "/watch.log");
  const v1::Job partway = WaitFor(job.id(), [](const v1::Job& j) {
    return j.progress().blocks_done() >= 2;
  });
  ASSERT_EQ(partway.state(), v1::JOB_STATE_RUNNING) << Log("worker.log");
  const int done_before = partway.progress().blocks_done();
  quantd_->Signal(SIGKILL);
  quantd_->Wait(10'000);
  quantd_.reset();

  ASSERT_NO_FATAL_FAILURE(StartQuantd(args));
  const v1::Job finished =
      WaitFor(job.id(), [](const v1::Job&) { return false; });
  EXPECT_EQ(finished.state(), v1::JOB_STATE_SUCCEEDED)
      << finished.error() << "\nworker:\n"
      << Log("worker.log") << "\nquantd:\n"
      << Log("quantd.log");
  EXPECT_EQ(finished.progress().blocks_done(), 5);
  // The watcher reconnected and saw the end, every layer once.
  std::string watched;
  for (std::string line = watcher.ReadLine(60'000);
       !line.empty() || watcher.running(); line = watcher.ReadLine(60'000)) {
    watched += line + "\n";
    if (line.empty() && !watcher.running()) break;
  }
  const int watch_status = watcher.Wait(60'000);
  EXPECT_TRUE(WIFEXITED(watch_status) && (WEXITSTATUS(watch_status) == 0 ||
                                          WEXITSTATUS(watch_status) == 3))
      << watch_status << "\n"
      << watched << Log("watch.log");
  EXPECT_NE(Log("watch.log").find("reconnecting"), std::string::npos)
      << Log("watch.log");
  for (int b = 0; b < 5; ++b) {
    const std::string layer =
        absl::StrCat("model.layers.", b, ".mlp.down_proj ");
    const size_t first = watched.find(layer);
    EXPECT_NE(first, std::string::npos) << layer << "\n" << watched;
    EXPECT_EQ(watched.find(layer, first + 1), std::string::npos)
        << layer << " shown twice\n"
        << watched;
  }
  StopQuantd();
  worker.Signal(SIGTERM);
  EXPECT_GE(worker.Wait(30'000), 0) << "the worker did not stop on SIGTERM";

  const std::vector<store::Task> tasks = StoredTasks(job.id());
  ASSERT_EQ(tasks.size(), 6u);
  for (const store::Task& task : tasks) {
    EXPECT_EQ(task.state, store::TaskState::kDone) << task.index;
    // Blocks finished before the kill were not run again.
    if (task.index < done_before) {
      EXPECT_EQ(task.attempts, 1) << task.index;
    }
  }
  EXPECT_TRUE(testing::PathExists(temp_ + "/artifacts/jobs/" + job.id() +
                                  "/checkpoint/model.safetensors"));
  // The worker noticed the new coordinator and registered again.
  const std::string worker_log = Log("worker.log");
  int registrations = 0;
  for (size_t at = worker_log.find("registered as"); at != std::string::npos;
       at = worker_log.find("registered as", at + 1)) {
    ++registrations;
  }
  EXPECT_GE(registrations, 2) << worker_log;
}

TEST_F(ServiceE2eTest, CancelMidJobStopsTheWorkAndPublishesNothing) {
  std::vector<std::string> args = QuantdArgs("127.0.0.1:0");
  args.push_back("--local_workers=1");
  args.push_back("--lease_seconds=3");
  ASSERT_NO_FATAL_FAILURE(StartQuantd(args));
  const v1::Job job = Create("cancel-1", /*slow=*/true);
  const v1::Job partway = WaitFor(job.id(), [](const v1::Job& j) {
    return j.progress().blocks_done() >= 1;
  });
  ASSERT_EQ(partway.state(), v1::JOB_STATE_RUNNING);
  {
    grpc::ClientContext context;
    v1::CancelJobRequest request;
    request.set_id(job.id());
    v1::Job cancelled;
    ASSERT_TRUE(stub_->CancelJob(&context, request, &cancelled).ok());
    EXPECT_EQ(cancelled.state(), v1::JOB_STATE_CANCELLED);
  }
  const std::vector<v1::JobEvent> events = WatchToEnd(job.id());
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().job().state(), v1::JOB_STATE_CANCELLED);
  // Give the worker a heartbeat to learn of it, then stop everything.
  std::this_thread::sleep_for(std::chrono::seconds(3));
  EXPECT_EQ(Get(job.id()).state(), v1::JOB_STATE_CANCELLED);
  StopQuantd();
  const std::vector<store::Task> tasks = StoredTasks(job.id());
  ASSERT_EQ(tasks.size(), 6u);
  EXPECT_NE(tasks.back().state, store::TaskState::kDone);  // No finalize.
  for (const store::Task& task : tasks) {
    EXPECT_NE(task.state, store::TaskState::kLeased)
        << "task " << task.index << " still leased after the cancel";
  }
  EXPECT_FALSE(testing::PathExists(temp_ + "/artifacts/jobs/" + job.id() +
                                   "/checkpoint"));
}

TEST_F(ServiceE2eTest, KilledWorkersTaskIsTakenOverAfterItsLeaseExpires) {
  std::vector<std::string> args = QuantdArgs("127.0.0.1:0");
  args.push_back("--lease_seconds=2");
  ASSERT_NO_FATAL_FAILURE(StartQuantd(args));
  auto doomed = std::make_unique<ChildProcess>(
      std::vector<std::string>{testing::BinaryDir() + "/worker/quant-worker",
                               "--server=" + address_, "--name=doomed",
                               "--lease_wait_ms=1000"},
      std::vector<std::string>{}, temp_ + "/doomed.log");
  const v1::Job job = Create("kill-worker-1", /*slow=*/true);
  // Mid-task: block 1 is leased to the doomed worker.
  ASSERT_NO_FATAL_FAILURE(WaitUntilRunning("doomed.log", job.id(), 1));
  doomed->Signal(SIGKILL);
  doomed->Wait(10'000);
  doomed.reset();
  ChildProcess rescuer(
      {testing::BinaryDir() + "/worker/quant-worker", "--server=" + address_,
       "--name=rescuer", "--lease_wait_ms=1000"},
      {}, temp_ + "/rescuer.log");
  const v1::Job finished =
      WaitFor(job.id(), [](const v1::Job&) { return false; });
  EXPECT_EQ(finished.state(), v1::JOB_STATE_SUCCEEDED)
      << finished.error() << "\n"
      << Log("rescuer.log") << Log("quantd.log");
  StopQuantd();
  rescuer.Signal(SIGTERM);
  rescuer.Wait(30'000);
  std::string attempts;
  for (const store::Task& task : StoredTasks(job.id())) {
    EXPECT_EQ(task.state, store::TaskState::kDone) << task.index;
    absl::StrAppend(&attempts, task.attempts, " ");
  }
  // Block 1, which the killed worker held, ran again after its lease
  // expired; nothing else did.
  EXPECT_EQ(attempts, "1 2 1 1 1 1 ") << Log("doomed.log");
}

TEST_F(ServiceE2eTest, SigtermReleasesTheRunningTaskAtOnce) {
  std::vector<std::string> args = QuantdArgs("127.0.0.1:0");
  // Long leases: a task only comes back this soon if it was released.
  args.push_back("--lease_seconds=600");
  ASSERT_NO_FATAL_FAILURE(StartQuantd(args));
  ChildProcess leaving(
      {testing::BinaryDir() + "/worker/quant-worker", "--server=" + address_,
       "--name=leaving", "--lease_wait_ms=1000"},
      {}, temp_ + "/leaving.log");
  const v1::Job job = Create("sigterm-1", /*slow=*/true);
  ASSERT_NO_FATAL_FAILURE(WaitUntilRunning("leaving.log", job.id(), 1));
  leaving.Signal(SIGTERM);
  const int status = leaving.Wait(60'000);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << status << "\n"
      << Log("leaving.log");
  ChildProcess staying(
      {testing::BinaryDir() + "/worker/quant-worker", "--server=" + address_,
       "--name=staying", "--lease_wait_ms=1000"},
      {}, temp_ + "/staying.log");
  const v1::Job finished = WaitFor(
      job.id(), [](const v1::Job&) { return false; }, 1200);
  EXPECT_EQ(finished.state(), v1::JOB_STATE_SUCCEEDED)
      << finished.error() << "\n"
      << Log("leaving.log") << Log("staying.log");
  StopQuantd();
  staying.Signal(SIGTERM);
  staying.Wait(30'000);
  EXPECT_NE(Log("leaving.log").find("released"), std::string::npos)
      << Log("leaving.log");
}

}  // namespace
}  // namespace quant

// The service end to end with real processes: the quantd binary with its
// SQLite file, quant-worker processes (started by quantd --local_workers or
// by the test), real gRPC over loopback. stories260K quantized through the
// service gives the same packed checkpoint as the in-process local run;
// WatchJob sees every layer; a coordinator killed mid-job resumes without
// recomputing finished blocks; a cancelled job stops its workers; a
// mixture-of-experts model's job writes the same bytes as the local run.
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
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
#include "tests/support/small_moe_model.h"
#include "tests/support/test_env.h"

namespace quant {
namespace {

using testing::ChildProcess;
using testing::RealPath;
using testing::ServiceHarness;

// The fault tests' recipe: block tasks of a second or more, so that one is
// still running when they kill or cancel it.
std::string SlowRecipePath() {
  return testing::FixturesDir() + "/service/stories260k-gptq-medium.yaml";
}

class ServiceE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    QUANT_REQUIRE_SHARED(testing::SharedPath("models/stories260K/hf-f32"));
    QUANT_REQUIRE_SHARED(testing::SharedPath("data/tinystories_val.txt"));
    service_ =
        std::make_unique<ServiceHarness>(RealPath(testing::MakeTempDir()));
  }

  void StartQuantd(std::vector<std::string> args) {
    const absl::Status started = service_->StartQuantd(std::move(args));
    ASSERT_TRUE(started.ok()) << started;
  }

  // SIGTERM and wait: a clean stop.
  void StopQuantd() {
    const absl::Status stopped = service_->StopQuantd();
    EXPECT_TRUE(stopped.ok()) << stopped;
  }

  // Waits until the worker logging to `log` has started block `block` of
  // `job` (its lease is held from then until it logs the block done).
  void WaitUntilRunning(const std::string& log, const std::string& job,
                        int block) {
    const absl::Status seen = service_->WaitForLog(
        log, absl::StrCat("running ", job, " block ", block, " (attempt 1)"),
        900);
    ASSERT_TRUE(seen.ok()) << seen;
  }

  // `slow`: the fault tests' recipe (block tasks of a second or more).
  v1::Job Create(const std::string& request_id, bool slow = false) {
    auto request = service_->Request(
        request_id, slow ? SlowRecipePath() : testing::SmallRecipePath());
    EXPECT_TRUE(request.ok()) << request.status();
    if (!request.ok()) return v1::Job();
    (*request->mutable_labels())["suite"] = "e2e";
    return testing::ValueOrFailure(service_->CreateJob(*request));
  }

  // Polls until `done(job)` (when given) or the job ends.
  v1::Job WaitFor(const std::string& id,
                  const std::function<bool(const v1::Job&)>& done) {
    return testing::ValueOrFailure(service_->WaitFor(id, done, 1200));
  }

  std::unique_ptr<ServiceHarness> service_;
};

TEST_F(ServiceE2eTest, SameCheckpointAsLocalRunAndWatchSeesEveryLayer) {
  std::vector<std::string> args = service_->QuantdArgs("127.0.0.1:0");
  args.push_back("--local-workers=2");
  // The blocks as rounds of small tasks the two workers share.
  args.push_back("--round_tasks");
  // Tasks on 3 threads; the local run below uses one: same bytes.
  args.push_back("--worker_args=--threads=3");
  ASSERT_NO_FATAL_FAILURE(StartQuantd(args));
  const v1::Job job = Create("e2e-1");
  ASSERT_FALSE(job.id().empty());
  // Idempotent: the replay is the same job.
  EXPECT_EQ(Create("e2e-1").id(), job.id());

  const std::vector<v1::JobEvent> events =
      testing::ValueOrFailure(service_->WatchToEnd(job.id()));
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
      << service_->Log("quantd.log");
  EXPECT_NE(final_job.verdict(), v1::VERDICT_UNSPECIFIED);
  const std::string artifact =
      service_->dir() + "/artifacts/jobs/" + job.id() + "/checkpoint";
  EXPECT_EQ(final_job.artifact_uri(), "file://" + artifact);
  // A watch begun after the end (a watcher back from a reconnect) replays
  // the same layers and progress, and ends on the final state again.
  {
    const std::vector<v1::JobEvent> late =
        testing::ValueOrFailure(service_->WatchToEnd(job.id()));
    ASSERT_GE(late.size(), 2u);
    ASSERT_TRUE(late.front().has_job());
    EXPECT_EQ(late.front().job().state(), v1::JOB_STATE_SUCCEEDED);
    std::set<std::string> replayed;
    int replayed_blocks = 0;
    for (const v1::JobEvent& e : late) {
      if (e.has_layer()) replayed.insert(e.layer().name());
      if (e.has_progress()) replayed_blocks = e.progress().blocks_done();
    }
    EXPECT_EQ(replayed, layers);
    EXPECT_EQ(replayed_blocks, 5);
    ASSERT_TRUE(late.back().has_job());
    EXPECT_EQ(late.back().job().state(), v1::JOB_STATE_SUCCEEDED);
  }

  auto got_report = service_->Report(job.id());
  ASSERT_TRUE(got_report.ok()) << got_report.status();
  const v1::JobReport& report = *got_report;
  ASSERT_EQ(report.layers_size(), 35);
  EXPECT_EQ(report.verdict(), final_job.verdict());
  EXPECT_EQ(report.gates().verdict(),
            final_job.verdict() == v1::VERDICT_PASS ? "PASS" : "FAIL");
  // The report page: the one the checkpoint carries.
  auto html = service_->ReportHtml(job.id());
  ASSERT_TRUE(html.ok()) << html.status();
  auto published = ReadFileToString(artifact + "/report.html");
  ASSERT_TRUE(published.ok()) << published.status();
  EXPECT_TRUE(*html == *published)
      << "GetJobReport's html differs from the artifact's report.html";
  EXPECT_NE(html->find("data-verdict=\"" + report.gates().verdict() + "\""),
            std::string::npos);
  StopQuantd();
  // The --threads given in --worker_args won over quantd's default share.
  EXPECT_NE(service_->Log("quantd.log").find("slot(s) of 3 thread(s)"),
            std::string::npos)
      << service_->Log("quantd.log");

  // The same job in one process.
  LocalQuantizeOptions local;
  local.checkpoint_dir = testing::CheckpointDir();
  local.calibration_path = testing::CalibrationPath();
  local.out_dir = service_->dir() + "/local";
  auto recipe = LoadRecipe(testing::SmallRecipePath());
  ASSERT_TRUE(recipe.ok());
  local.recipe = *recipe;
  local.threads = 1;
  auto result = RunLocalQuantization(local);
  ASSERT_TRUE(result.ok()) << result.status();
  auto service_tensors = ReadFileToString(artifact + "/model.safetensors");
  auto local_tensors = ReadFileToString(local.out_dir + "/model.safetensors");
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
  for (const store::Task& task :
       testing::ValueOrFailure(service_->StoredTasks(job.id()))) {
    EXPECT_EQ(task.attempts, 1) << "task " << task.index;
    EXPECT_EQ(task.state, store::TaskState::kDone);
  }
}

TEST_F(ServiceE2eTest, MixtureOfExpertsJobMatchesTheLocalRunByteForByte) {
  // A small synthetic Qwen3-MoE (4 experts, top-2) with stories260K's
  // tokenizer, under the service's allowed roots.
  const synth::SynthOptions model = testing::SmallMoeModel(
      service_->dir() + "/moe-model", testing::CheckpointDir(), "qwen3_moe");
  ASSERT_TRUE(synth::WriteSynthCheckpoint(model).ok());
  auto recipe = ParseRecipe(
      "method: gptq\ngroup_size: 32\n"
      "calibration: {samples: 8, seq_len: 64, heldout_count: 20}\n"
      "moe: {min_tokens_per_expert: 200, on_starved_expert: damp}\n",
      "moe.yaml");
  ASSERT_TRUE(recipe.ok()) << recipe.status();

  std::vector<std::string> args = service_->QuantdArgs("127.0.0.1:0");
  args.push_back("--local-workers=2");
  args.push_back("--worker_args=--threads=2");
  ASSERT_NO_FATAL_FAILURE(StartQuantd(args));
  auto request = service_->RecipeRequest(*recipe);
  ASSERT_TRUE(request.ok()) << request.status();
  request->set_checkpoint_uri("file://" + model.out_dir);
  request->set_request_id("moe-1");
  const v1::Job job = testing::ValueOrFailure(service_->CreateJob(*request));
  ASSERT_FALSE(job.id().empty());
  const v1::Job done = WaitFor(job.id(), nullptr);
  ASSERT_EQ(done.state(), v1::JOB_STATE_SUCCEEDED)
      << done.error() << "\n"
      << service_->Log("quantd.log");
  StopQuantd();

  LocalQuantizeOptions local;
  local.checkpoint_dir = model.out_dir;
  local.calibration_path = testing::CalibrationPath();
  local.out_dir = service_->dir() + "/moe-local";
  local.recipe = *recipe;
  auto result = RunLocalQuantization(local);
  ASSERT_TRUE(result.ok()) << result.status();
  const std::string artifact =
      service_->dir() + "/artifacts/jobs/" + job.id() + "/checkpoint";
  auto service_tensors = ReadFileToString(artifact + "/model.safetensors");
  auto local_tensors = ReadFileToString(local.out_dir + "/model.safetensors");
  ASSERT_TRUE(service_tensors.ok()) << service_tensors.status();
  ASSERT_TRUE(local_tensors.ok()) << local_tensors.status();
  EXPECT_TRUE(*service_tensors == *local_tensors)
      << "the service's packed experts differ from the local run's";
  // The service's audit has the same per-expert rows and summary.
  auto audit_text = ReadFileToString(artifact + "/audit.json");
  ASSERT_TRUE(audit_text.ok()) << audit_text.status();
  const nlohmann::json audit = nlohmann::json::parse(*audit_text);
  EXPECT_EQ(audit["summary"]["moe_blocks"],
            result->audit["summary"]["moe_blocks"]);
  int experts = 0;
  for (const nlohmann::json& layer : audit["layers"]) {
    experts += layer.contains("expert");
  }
  EXPECT_EQ(experts, testing::kSmallMoeBlocks * testing::kSmallMoeExperts * 3);
}

TEST_F(ServiceE2eTest, RestartedCoordinatorResumesWithoutRecomputing) {
  const int port = testing::FreeLoopbackPort();
  ASSERT_GT(port, 0);
  std::vector<std::string> args =
      service_->QuantdArgs(absl::StrCat("127.0.0.1:", port));
  // One task per block: the test waits for a block's task by name.
  args.push_back("--round_tasks=false");
  args.push_back("--lease_seconds=3");
  ASSERT_NO_FATAL_FAILURE(StartQuantd(args));
  // A worker of its own, which outlives the coordinator.
  std::unique_ptr<ChildProcess> worker = service_->StartWorker("survivor");
  const v1::Job job = Create("restart-1", /*slow=*/true);
  // A client watching through the restart.
  ChildProcess watcher({testing::BinaryDir() + "/client/quantctl", "watch",
                        job.id(), "--addr=" + service_->address()},
                       {}, service_->dir() + "/watch.log");
  const v1::Job partway = WaitFor(job.id(), [](const v1::Job& j) {
    return j.progress().blocks_done() >= 2;
  });
  ASSERT_EQ(partway.state(), v1::JOB_STATE_RUNNING)
      << service_->Log("survivor.log");
  const int done_before = partway.progress().blocks_done();
  service_->KillQuantd();

  ASSERT_NO_FATAL_FAILURE(StartQuantd(args));
  const v1::Job finished = WaitFor(job.id(), nullptr);
  EXPECT_EQ(finished.state(), v1::JOB_STATE_SUCCEEDED)
      << finished.error() << "\nworker:\n"
      << service_->Log("survivor.log") << "\nquantd:\n"
      << service_->Log("quantd.log");
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
      << watched << service_->Log("watch.log");
  EXPECT_NE(service_->Log("watch.log").find("reconnecting"), std::string::npos)
      << service_->Log("watch.log");
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
  worker->Signal(SIGTERM);
  EXPECT_GE(worker->Wait(30'000), 0) << "the worker did not stop on SIGTERM";

  const std::vector<store::Task> tasks =
      testing::ValueOrFailure(service_->StoredTasks(job.id()));
  ASSERT_EQ(tasks.size(), 6u);
  for (const store::Task& task : tasks) {
    EXPECT_EQ(task.state, store::TaskState::kDone) << task.index;
    // Blocks finished before the kill were not run again.
    if (task.index < done_before) {
      EXPECT_EQ(task.attempts, 1) << task.index;
    }
  }
  EXPECT_TRUE(testing::PathExists(service_->dir() + "/artifacts/jobs/" +
                                  job.id() + "/checkpoint/model.safetensors"));
  // The worker noticed the new coordinator and registered again.
  const std::string worker_log = service_->Log("survivor.log");
  int registrations = 0;
  for (size_t at = worker_log.find("registered as"); at != std::string::npos;
       at = worker_log.find("registered as", at + 1)) {
    ++registrations;
  }
  EXPECT_GE(registrations, 2) << worker_log;
}

TEST_F(ServiceE2eTest, CancelMidJobStopsTheWorkAndPublishesNothing) {
  std::vector<std::string> args = service_->QuantdArgs("127.0.0.1:0");
  // One task per block: the test waits for a block's task by name.
  args.push_back("--round_tasks=false");
  args.push_back("--local_workers=1");
  args.push_back("--lease_seconds=3");
  ASSERT_NO_FATAL_FAILURE(StartQuantd(args));
  const v1::Job job = Create("cancel-1", /*slow=*/true);
  const v1::Job partway = WaitFor(job.id(), [](const v1::Job& j) {
    return j.progress().blocks_done() >= 1;
  });
  ASSERT_EQ(partway.state(), v1::JOB_STATE_RUNNING);
  {
    auto cancelled = service_->Cancel(job.id());
    ASSERT_TRUE(cancelled.ok()) << cancelled.status();
    EXPECT_EQ(cancelled->state(), v1::JOB_STATE_CANCELLED);
  }
  const std::vector<v1::JobEvent> events =
      testing::ValueOrFailure(service_->WatchToEnd(job.id()));
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().job().state(), v1::JOB_STATE_CANCELLED);
  // Give the worker a heartbeat to learn of it, then stop everything.
  std::this_thread::sleep_for(std::chrono::seconds(3));
  EXPECT_EQ(testing::ValueOrFailure(service_->Get(job.id())).state(),
            v1::JOB_STATE_CANCELLED);
  StopQuantd();
  const std::vector<store::Task> tasks =
      testing::ValueOrFailure(service_->StoredTasks(job.id()));
  ASSERT_EQ(tasks.size(), 6u);
  EXPECT_NE(tasks.back().state, store::TaskState::kDone);  // No finalize.
  for (const store::Task& task : tasks) {
    EXPECT_NE(task.state, store::TaskState::kLeased)
        << "task " << task.index << " still leased after the cancel"
        << service_->Log("quantd.log");
  }
  EXPECT_FALSE(testing::PathExists(service_->dir() + "/artifacts/jobs/" +
                                   job.id() + "/checkpoint"));
}

TEST_F(ServiceE2eTest, KilledWorkersTaskIsTakenOverAfterItsLeaseExpires) {
  std::vector<std::string> args = service_->QuantdArgs("127.0.0.1:0");
  // One task per block: the test waits for a block's task by name.
  args.push_back("--round_tasks=false");
  args.push_back("--lease_seconds=2");
  ASSERT_NO_FATAL_FAILURE(StartQuantd(args));
  std::unique_ptr<ChildProcess> doomed = service_->StartWorker("doomed");
  const v1::Job job = Create("kill-worker-1", /*slow=*/true);
  // Mid-task: block 1 is leased to the doomed worker.
  ASSERT_NO_FATAL_FAILURE(WaitUntilRunning("doomed.log", job.id(), 1));
  doomed->Signal(SIGKILL);
  doomed->Wait(10'000);
  doomed.reset();
  std::unique_ptr<ChildProcess> rescuer = service_->StartWorker("rescuer");
  const v1::Job finished = WaitFor(job.id(), nullptr);
  EXPECT_EQ(finished.state(), v1::JOB_STATE_SUCCEEDED)
      << finished.error() << "\n"
      << service_->Log("rescuer.log") << service_->Log("quantd.log");
  StopQuantd();
  rescuer->Signal(SIGTERM);
  rescuer->Wait(30'000);
  std::string attempts;
  const std::vector<store::Task> tasks =
      testing::ValueOrFailure(service_->StoredTasks(job.id()));
  ASSERT_EQ(tasks.size(), 6u);
  for (const store::Task& task : tasks) {
    EXPECT_EQ(task.state, store::TaskState::kDone) << task.index;
    absl::StrAppend(&attempts, task.attempts, " ");
  }
  // Block 1, which the killed worker held, ran again after its lease
  // expired; nothing else did. Block 1 may take a third attempt: one CI run
  // under ASan showed "1 3 1 1 1 1" (not reproduced in four parallel ASan
  // runs); block 1 is the rescuer's first task, and a freshly started ASan
  // worker on a loaded machine can miss its 2 s lease once.
  EXPECT_GE(tasks[1].attempts, 2) << attempts;
  for (size_t i = 0; i < tasks.size(); ++i) {
    if (i == 1) continue;
    EXPECT_EQ(tasks[i].attempts, 1)
        << "task " << i << " ran again; attempts " << attempts
        << service_->Log("doomed.log") << service_->Log("rescuer.log")
        << service_->Log("quantd.log");
  }
}

TEST_F(ServiceE2eTest, SigtermReleasesTheRunningTaskAtOnce) {
  std::vector<std::string> args = service_->QuantdArgs("127.0.0.1:0");
  // One task per block: the test waits for a block's task by name.
  args.push_back("--round_tasks=false");
  // Long leases: a task only comes back this soon if it was released.
  args.push_back("--lease_seconds=600");
  ASSERT_NO_FATAL_FAILURE(StartQuantd(args));
  std::unique_ptr<ChildProcess> leaving = service_->StartWorker("leaving");
  const v1::Job job = Create("sigterm-1", /*slow=*/true);
  ASSERT_NO_FATAL_FAILURE(WaitUntilRunning("leaving.log", job.id(), 1));
  leaving->Signal(SIGTERM);
  const int status = leaving->Wait(60'000);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << status << "\n"
      << service_->Log("leaving.log");
  std::unique_ptr<ChildProcess> staying = service_->StartWorker("staying");
  const v1::Job finished = WaitFor(job.id(), nullptr);
  EXPECT_EQ(finished.state(), v1::JOB_STATE_SUCCEEDED)
      << finished.error() << "\n"
      << service_->Log("leaving.log") << service_->Log("staying.log");
  StopQuantd();
  staying->Signal(SIGTERM);
  staying->Wait(30'000);
  EXPECT_NE(service_->Log("leaving.log").find("released"), std::string::npos)
      << service_->Log("leaving.log");
}

}  // namespace
}  // namespace quant

// The worker protocol and authentication over real loopback gRPC against an
// in-process quantd (real SQLite file, real artifact directory): what a
// lease hands out, heartbeats turning into job events, cancellation,
// refused late completions, failures, re-registration after a restart, the
// two bearer tokens (plus TLS) on both services, and an in-process Worker
// whose task hangs or runs past its time bound, or whose coordinator is
// slow to answer heartbeats.
#include <limits.h>
#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/clock.h"
#include "core/base/file_util.h"
#include "core/base/mutex.h"
#include "core/base/sha256.h"
#include "core/base/status_macros.h"
#include "core/pipeline/task_io.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"
#include "quant/v1/service.grpc.pb.h"
#include "quant/v1/worker.grpc.pb.h"
#include "server/quantd_server.h"
#include "tests/support/test_env.h"
#include "worker/worker.h"

namespace quant {
namespace {

using server::QuantdOptions;
using server::QuantdServer;
using testing::RealPath;

constexpr char kClientToken[] = "client-token-0123456789";
constexpr char kWorkerToken[] = "worker-token-9876543210";

// Publishes what a block task would for `block` under `work`: its tensors
// file and a layers.json recording that file's sha256. Returns the sha256
// of layers.json, what a worker reports at completion.
std::string PublishFakeBlock(const std::string& work, int block,
                             const std::string& tensors = "tensors") {
  std::filesystem::create_directories(work);
  const std::string prefix = BlockOutputPrefix(work, block);
  EXPECT_TRUE(WriteFileAtomically(prefix + ".safetensors", tensors).ok());
  const std::string layers = absl::StrCat(
      R"({"block": )", block, R"(, "layers": [], "sha256": {".safetensors": ")",
      Sha256Hex(tensors), R"("}})");
  EXPECT_TRUE(WriteFileAtomically(prefix + ".layers.json", layers).ok());
  return Sha256Hex(layers);
}

class WorkerProtocolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    QUANT_REQUIRE_SHARED(testing::SharedPath("models/stories260K/hf-f32"));
    QUANT_REQUIRE_SHARED(testing::SharedPath("data/tinystories_val.txt"));
    temp_ = RealPath(testing::MakeTempDir());
    shared_ = RealPath(testing::SharedDir());
  }

  QuantdOptions Options() {
    QuantdOptions options;
    options.listen = "127.0.0.1:0";
    options.data_dir = temp_ + "/data";
    options.artifact_root = absl::StrCat("file://", temp_, "/artifacts");
    options.allowed_roots = {shared_, temp_};
    options.workers.lease_ms = 1000;
    options.workers.heartbeat_ms = 100;
    options.workers.max_wait_ms = 4000;
    options.upkeep_interval = std::chrono::milliseconds(50);
    return options;
  }

  void Start(const QuantdOptions& options) {
    auto server = QuantdServer::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    auto channel = grpc::CreateChannel(server_->address(),
                                       grpc::InsecureChannelCredentials());
    client_ = v1::QuantService::NewStub(channel);
    worker_ = v1::WorkerService::NewStub(channel);
  }

  static std::unique_ptr<grpc::ClientContext> Context(
      const std::string& token = "") {
    auto context = std::make_unique<grpc::ClientContext>();
    context->set_deadline(std::chrono::system_clock::now() +
                          std::chrono::seconds(30));
    if (!token.empty()) {
      context->AddMetadata("authorization", "Bearer " + token);
    }
    return context;
  }

  // The job once it is in `state`, or as it stands after `seconds`.
  v1::Job WaitForState(const std::string& id, v1::JobState state, int seconds) {
    v1::Job now;
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    while (std::chrono::steady_clock::now() < deadline) {
      v1::GetJobRequest get;
      get.set_id(id);
      EXPECT_TRUE(client_->GetJob(Context().get(), get, &now).ok());
      if (now.state() == state) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return now;
  }

  v1::Job CreateJob(const std::string& token = "") {
    const std::string calibration =
        RealPath(testing::SharedPath("data/tinystories_val.txt"));
    v1::CreateJobRequest request;
    request.set_checkpoint_uri(
        "file://" + RealPath(testing::SharedPath("models/stories260K/hf-f32")));
    v1::Recipe* recipe = request.mutable_recipe();
    recipe->set_method(v1::METHOD_RTN);
    recipe->set_bits(8);
    recipe->set_group_size(0);
    recipe->mutable_calibration()->set_samples(4);
    recipe->mutable_calibration()->set_seq_len(32);
    recipe->mutable_calibration()->set_heldout_fraction(0.25);
    request.mutable_calibration()->mutable_uri()->set_uri("file://" +
                                                          calibration);
    request.mutable_calibration()->mutable_uri()->set_sha256(
        *Sha256File(calibration));
    v1::Job job;
    const grpc::Status status =
        client_->CreateJob(Context(token).get(), request, &job);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return job;
  }

  std::string Register(const std::string& token = "") {
    v1::RegisterWorkerRequest request;
    request.set_name("test-worker");
    request.set_slots(1);
    v1::RegisterWorkerResponse response;
    const grpc::Status status =
        worker_->RegisterWorker(Context(token).get(), request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(response.lease_duration_ms(), 1000);
    EXPECT_EQ(response.heartbeat_interval_ms(), 100);
    return response.worker_id();
  }

  grpc::Status Lease(const std::string& worker_id, int64_t wait_ms,
                     v1::LeaseTaskResponse* response) {
    v1::LeaseTaskRequest request;
    request.set_worker_id(worker_id);
    request.set_wait_ms(wait_ms);
    return worker_->LeaseTask(Context().get(), request, response);
  }

  std::string temp_;
  std::string shared_;
  std::unique_ptr<QuantdServer> server_;
  std::unique_ptr<v1::QuantService::Stub> client_;
  std::unique_ptr<v1::WorkerService::Stub> worker_;
};

TEST_F(WorkerProtocolTest, LeaseHandsOutTheTaskWithEverythingItNeeds) {
  ASSERT_NO_FATAL_FAILURE(Start(Options()));
  const std::string worker_id = Register();
  ASSERT_FALSE(worker_id.empty());

  // Nothing to do: the long poll waits, then answers without a task.
  v1::LeaseTaskResponse empty;
  const auto started = std::chrono::steady_clock::now();
  ASSERT_TRUE(Lease(worker_id, 300, &empty).ok());
  EXPECT_FALSE(empty.has_task());
  EXPECT_GE(std::chrono::steady_clock::now() - started,
            std::chrono::milliseconds(250));

  // A job submitted while a worker waits wakes it.
  v1::LeaseTaskResponse leased;
  std::thread poll([&] { ASSERT_TRUE(Lease(worker_id, 2000, &leased).ok()); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const v1::Job job = CreateJob();
  poll.join();
  ASSERT_TRUE(leased.has_task());
  const v1::Task& task = leased.task();
  EXPECT_EQ(task.job_id(), job.id());
  EXPECT_EQ(task.kind(), v1::TASK_KIND_BLOCK);
  EXPECT_EQ(task.block(), 0);
  EXPECT_EQ(task.attempt(), 1);
  EXPECT_EQ(
      task.checkpoint_uri(),
      "file://" + RealPath(testing::SharedPath("models/stories260K/hf-f32")));
  EXPECT_EQ(task.recipe().method(), v1::METHOD_RTN);
  EXPECT_EQ(task.calibration_sha256(), job.calibration_sha256());
  const std::string jobs = absl::StrCat("file://", temp_, "/artifacts/jobs/");
  EXPECT_EQ(task.work_uri(), jobs + job.id() + "/work");
  EXPECT_EQ(task.attempt_uri(), jobs + job.id() + "/work/attempts/0-1");
  EXPECT_EQ(task.artifact_uri(), jobs + job.id() + "/checkpoint");
  EXPECT_FALSE(leased.lease_id().empty());

  // Leasing started the job; a heartbeat with a finished layer becomes a
  // layer event and a progress event.
  v1::HeartbeatRequest beat;
  beat.set_lease_id(leased.lease_id());
  beat.set_worker_id(worker_id);
  beat.mutable_progress()->set_layers_done(1);
  beat.mutable_progress()->set_layers_total(7);
  beat.mutable_progress()->set_current_layer("model.layers.0.self_attn.q_proj");
  v1::LayerAudit* layer = beat.mutable_progress()->add_finished_layers();
  layer->set_name("model.layers.0.self_attn.q_proj");
  layer->set_type("q_proj");
  layer->set_rel_output_error_heldout(0.125);
  v1::HeartbeatResponse beat_response;
  ASSERT_TRUE(worker_->Heartbeat(Context().get(), beat, &beat_response).ok());
  EXPECT_FALSE(beat_response.cancelled());
  auto events = server_->store().ListEvents(job.id(), 0, 0);
  ASSERT_TRUE(events.ok());
  std::vector<std::string> types;
  for (const auto& e : *events) types.push_back(e.type);
  EXPECT_EQ(types,
            (std::vector<std::string>{"job", "job", "layer", "progress"}));
  EXPECT_NE((*events)[1].payload_json.find("RUNNING"), std::string::npos);
  EXPECT_NE((*events)[2].payload_json.find("0.125"), std::string::npos);
  // The job's progress counts that layer: 1 of 5 blocks x 7.
  v1::GetJobRequest get;
  get.set_id(job.id());
  v1::Job running;
  ASSERT_TRUE(client_->GetJob(Context().get(), get, &running).ok());
  EXPECT_EQ(running.progress().blocks_done(), 0);
  EXPECT_EQ(running.progress().layers_done(), 1);
  EXPECT_EQ(running.progress().layers_total(), 35);

  // Bad progress is refused, naming the field.
  beat.mutable_progress()->set_layers_done(8);
  const grpc::Status bad =
      worker_->Heartbeat(Context().get(), beat, &beat_response);
  EXPECT_EQ(bad.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(bad.error_message().find("progress"), std::string::npos);

  // Cancelling the job: the next heartbeat says so.
  v1::CancelJobRequest cancel;
  cancel.set_id(job.id());
  v1::Job cancelled;
  ASSERT_TRUE(client_->CancelJob(Context().get(), cancel, &cancelled).ok());
  beat.mutable_progress()->set_layers_done(2);
  beat.mutable_progress()->clear_finished_layers();
  ASSERT_TRUE(worker_->Heartbeat(Context().get(), beat, &beat_response).ok());
  EXPECT_TRUE(beat_response.cancelled());
  // ... and its completion is refused.
  v1::CompleteTaskRequest complete;
  complete.set_lease_id(leased.lease_id());
  complete.set_worker_id(worker_id);
  complete.set_output_uri(task.work_uri() + "/block-00000");
  v1::CompleteTaskResponse complete_response;
  EXPECT_EQ(worker_->CompleteTask(Context().get(), complete, &complete_response)
                .error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
}

TEST_F(WorkerProtocolTest, RoundTasksCarryTheirShardAndTheFilesTheyRead) {
  QuantdOptions options = Options();
  options.round_tasks = true;
  ASSERT_NO_FATAL_FAILURE(Start(options));
  const std::string worker_id = Register();
  const v1::Job job = CreateJob();  // 4 sequences: one shard per split.
  auto lease = [&](v1::TaskKind kind) {
    v1::LeaseTaskResponse leased;
    EXPECT_TRUE(Lease(worker_id, 2000, &leased).ok());
    EXPECT_TRUE(leased.has_task());
    EXPECT_EQ(leased.task().kind(), kind) << leased.task().ShortDebugString();
    return leased;
  };
  auto complete = [&](const v1::LeaseTaskResponse& leased,
                      const std::string& uri, const std::string& sha256,
                      bool empty_shard) {
    v1::CompleteTaskRequest request;
    request.set_lease_id(leased.lease_id());
    request.set_worker_id(worker_id);
    request.set_output_uri(uri);
    request.set_output_sha256(sha256);
    request.set_empty_shard(empty_shard);
    v1::CompleteTaskResponse response;
    return worker_->CompleteTask(Context().get(), request, &response);
  };
  const v1::LeaseTaskResponse calibration = lease(v1::TASK_KIND_SHARD_STATS);
  const v1::Task& task = calibration.task();
  EXPECT_EQ(task.block(), 0);
  EXPECT_EQ(task.group(), 0);
  EXPECT_EQ(task.split(), v1::TASK_SPLIT_CALIBRATION);
  EXPECT_EQ(task.shard(), 0);
  EXPECT_TRUE(task.round_file_sha256().empty());
  // Its file, where the task publishes it.
  const std::string work = task.work_uri().substr(std::strlen("file://"));
  const std::string name = ShardStatisticsFile(0, 0, true, 0);
  std::filesystem::create_directories(work + "/block-00000.rounds");
  ASSERT_TRUE(WriteFileAtomically(JoinPath(work, name), "sums").ok());
  // Not where it publishes: refused; an empty shard is a shard's claim only
  // and hashes nothing.
  EXPECT_EQ(complete(calibration, task.work_uri() + "/elsewhere", "", false)
                .error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(complete(calibration, "file://" + JoinPath(work, name),
                     Sha256Hex("sums"), true)
                .error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  ASSERT_TRUE(complete(calibration, "file://" + JoinPath(work, name),
                       Sha256Hex("sums"), false)
                  .ok());
  // The held-out shard: past the end of its split, say.
  const v1::LeaseTaskResponse heldout = lease(v1::TASK_KIND_SHARD_STATS);
  EXPECT_EQ(heldout.task().split(), v1::TASK_SPLIT_HELDOUT);
  ASSERT_TRUE(
      complete(heldout,
               "file://" + JoinPath(work, ShardStatisticsFile(0, 0, false, 0)),
               "", true)
          .ok());

  // The reduce reads what the coordinator recorded of its shards.
  const v1::LeaseTaskResponse reduce = lease(v1::TASK_KIND_REDUCE);
  EXPECT_EQ(reduce.task().group(), 0);
  EXPECT_EQ(reduce.task().split(), v1::TASK_SPLIT_UNSPECIFIED);
  ASSERT_EQ(reduce.task().round_file_sha256().size(), 1u);
  EXPECT_EQ(reduce.task().round_file_sha256().at(name), Sha256Hex("sums"));
  // It reports the layers of its group only.
  v1::HeartbeatRequest beat;
  beat.set_lease_id(reduce.lease_id());
  beat.set_worker_id(worker_id);
  beat.mutable_progress()->set_layers_done(1);
  beat.mutable_progress()->set_layers_total(3);
  v1::LayerAudit* layer = beat.mutable_progress()->add_finished_layers();
  layer->set_name("model.layers.0.self_attn.o_proj");
  layer->set_type("o_proj");
  v1::HeartbeatResponse beat_response;
  const grpc::Status other_group =
      worker_->Heartbeat(Context().get(), beat, &beat_response);
  EXPECT_EQ(other_group.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(other_group.error_message().find("layer group 0"),
            std::string::npos)
      << other_group.error_message();
  // A GPTQ job reduces q, k and v a layer at a time: this reduce is q's,
  // and reports q_proj only.
  EXPECT_EQ(reduce.task().layer(), "q_proj");
  EXPECT_TRUE(reduce.task().round_layer_reduces());
  // It needed the calibration shard only; the block's last reduce audits
  // the held-out split.
  EXPECT_TRUE(reduce.task().round_heldout_later());
  layer->set_name("model.layers.0.self_attn.k_proj");
  layer->set_type("k_proj");
  const grpc::Status other_layer =
      worker_->Heartbeat(Context().get(), beat, &beat_response);
  EXPECT_EQ(other_layer.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(other_layer.error_message().find("the one layer"),
            std::string::npos)
      << other_layer.error_message();
  layer->set_name("model.layers.0.self_attn.q_proj");
  layer->set_type("q_proj");
  EXPECT_TRUE(worker_->Heartbeat(Context().get(), beat, &beat_response).ok());
  // A reduce has no empty shard.
  EXPECT_EQ(complete(reduce,
                     "file://" + JoinPath(work, RoundDeltaFile(
                                                    0, 0, LayerType::kQProj)),
                     "", true)
                .error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  // It found its shard's file changed: that shard's task runs again, then
  // the reduce. A name no task publishes is refused.
  v1::FailTaskRequest fail;
  fail.set_lease_id(reduce.lease_id());
  fail.set_worker_id(worker_id);
  fail.set_error("changed");
  fail.set_retryable(true);
  fail.add_rerun_round_files("block-00000.rounds/nothing");
  v1::FailTaskResponse fail_response;
  EXPECT_EQ(
      worker_->FailTask(Context().get(), fail, &fail_response).error_code(),
      grpc::StatusCode::INVALID_ARGUMENT);
  fail.clear_rerun_round_files();
  fail.add_rerun_round_files(name);
  ASSERT_TRUE(worker_->FailTask(Context().get(), fail, &fail_response).ok());
  const v1::LeaseTaskResponse again = lease(v1::TASK_KIND_SHARD_STATS);
  EXPECT_EQ(again.task().split(), v1::TASK_SPLIT_CALIBRATION);
  EXPECT_EQ(again.task().attempt(), 2);
}

TEST_F(WorkerProtocolTest, ExpiredLeaseIsRequeuedAndTheLateCompletionRefused) {
  ASSERT_NO_FATAL_FAILURE(Start(Options()));
  const std::string worker_id = Register();
  const v1::Job job = CreateJob();
  v1::LeaseTaskResponse first;
  ASSERT_TRUE(Lease(worker_id, 1000, &first).ok());
  ASSERT_TRUE(first.has_task());
  // No heartbeat: the 1 s lease expires and the upkeep loop requeues it.
  v1::LeaseTaskResponse second;
  ASSERT_TRUE(Lease(worker_id, 4000, &second).ok());
  ASSERT_TRUE(second.has_task());
  EXPECT_EQ(second.task().index(), first.task().index());
  EXPECT_EQ(second.task().attempt(), 2);
  EXPECT_NE(second.task().attempt_uri(), first.task().attempt_uri());
  EXPECT_NE(second.lease_id(), first.lease_id());

  v1::CompleteTaskRequest late;
  late.set_lease_id(first.lease_id());
  late.set_worker_id(worker_id);
  late.set_output_uri("file:///x");
  v1::CompleteTaskResponse ignored;
  const grpc::Status refused =
      worker_->CompleteTask(Context().get(), late, &ignored);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::FAILED_PRECONDITION);

  // A failure that is not worth retrying fails the job with its message.
  v1::FailTaskRequest fail;
  fail.set_lease_id(second.lease_id());
  fail.set_worker_id(worker_id);
  fail.set_error("checkpoint_uri: model.safetensors is truncated");
  fail.set_retryable(false);
  v1::FailTaskResponse fail_response;
  ASSERT_TRUE(worker_->FailTask(Context().get(), fail, &fail_response).ok());
  v1::GetJobRequest get;
  get.set_id(job.id());
  v1::Job failed;
  ASSERT_TRUE(client_->GetJob(Context().get(), get, &failed).ok());
  EXPECT_EQ(failed.state(), v1::JOB_STATE_FAILED);
  EXPECT_NE(failed.error().find("truncated"), std::string::npos);
}

// A worker is not trusted beyond its own lease: another worker cannot beat,
// complete or fail it; rows for layers that do not exist, NaN numbers and a
// completion whose outputs were never published are refused; a resent row
// is recorded once.
TEST_F(WorkerProtocolTest, LeasesAnswerOnlyToTheirWorkerAndRowsAreChecked) {
  ASSERT_NO_FATAL_FAILURE(Start(Options()));
  const std::string owner = Register();
  const std::string other = Register();
  ASSERT_NE(owner, other);
  const v1::Job job = CreateJob();
  v1::LeaseTaskResponse leased;
  ASSERT_TRUE(Lease(owner, 2000, &leased).ok());
  ASSERT_TRUE(leased.has_task());

  v1::HeartbeatRequest beat;
  beat.set_lease_id(leased.lease_id());
  beat.mutable_progress()->set_layers_total(7);
  v1::HeartbeatResponse beat_response;
  beat.set_worker_id(other);
  EXPECT_EQ(
      worker_->Heartbeat(Context().get(), beat, &beat_response).error_code(),
      grpc::StatusCode::PERMISSION_DENIED);
  beat.clear_worker_id();
  EXPECT_EQ(
      worker_->Heartbeat(Context().get(), beat, &beat_response).error_code(),
      grpc::StatusCode::INVALID_ARGUMENT);
  v1::CompleteTaskRequest complete;
  complete.set_lease_id(leased.lease_id());
  complete.set_worker_id(other);
  complete.set_output_uri(leased.task().work_uri() + "/block-00000");
  v1::CompleteTaskResponse complete_response;
  EXPECT_EQ(worker_->CompleteTask(Context().get(), complete, &complete_response)
                .error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  v1::FailTaskRequest fail;
  fail.set_lease_id(leased.lease_id());
  fail.set_worker_id(other);
  fail.set_error("not mine");
  v1::FailTaskResponse fail_response;
  EXPECT_EQ(
      worker_->FailTask(Context().get(), fail, &fail_response).error_code(),
      grpc::StatusCode::PERMISSION_DENIED);

  beat.set_worker_id(owner);
  const auto refused_row = [&](const v1::LayerAudit& row) {
    beat.mutable_progress()->clear_finished_layers();
    *beat.mutable_progress()->add_finished_layers() = row;
    return worker_->Heartbeat(Context().get(), beat, &beat_response);
  };
  v1::LayerAudit row;
  row.set_name("model.layers.0.mlp.up_proj");
  row.set_type("up_proj");
  row.set_rel_output_error_heldout(0.25);
  v1::LayerAudit fake = row;
  fake.set_name("model.layers.0.mlp.fake_proj");
  fake.set_type("fake_proj");
  const grpc::Status fake_status = refused_row(fake);
  EXPECT_EQ(fake_status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(fake_status.error_message().find("not a linear layer of block 0"),
            std::string::npos);
  v1::LayerAudit other_block = row;
  other_block.set_name("model.layers.3.mlp.up_proj");
  EXPECT_EQ(refused_row(other_block).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  v1::LayerAudit nan = row;
  nan.set_rel_output_error_heldout(std::nan(""));
  const grpc::Status nan_status = refused_row(nan);
  EXPECT_EQ(nan_status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(nan_status.error_message().find("rel_output_error_heldout"),
            std::string::npos);

  // The real row twice (a resent beat): one layer event.
  ASSERT_TRUE(refused_row(row).ok());
  ASSERT_TRUE(refused_row(row).ok());
  auto events = server_->store().ListEvents(job.id(), 0, 0);
  ASSERT_TRUE(events.ok());
  int layer_events = 0;
  for (const auto& e : *events) layer_events += e.type == "layer";
  EXPECT_EQ(layer_events, 1);

  // Mixture-of-experts expert rows of this block pass; a malformed expert
  // index, a part that does not play the reported type, or another
  // block's expert are refused.
  for (const auto& [name, type, ok] :
       std::vector<std::tuple<std::string, std::string, bool>>{
           {"model.layers.0.mlp.experts.17.down_proj", "down_proj", true},
           {"model.layers.0.block_sparse_moe.experts.3.w1", "gate_proj", true},
           {"model.layers.0.block_sparse_moe.experts.3.w3", "up_proj", true},
           {"model.layers.0.block_sparse_moe.experts.3.w3", "down_proj", false},
           {"model.layers.0.mlp.experts.x.up_proj", "up_proj", false},
           {"model.layers.0.mlp.experts..up_proj", "up_proj", false},
           {"model.layers.0.mlp.experts.1.w1", "gate_proj", false},
           {"model.layers.1.mlp.experts.1.up_proj", "up_proj", false},
       }) {
    SCOPED_TRACE(name + " " + type);
    v1::LayerAudit expert = row;
    expert.set_name(name);
    expert.set_type(type);
    EXPECT_EQ(refused_row(expert).ok(), ok);
  }

  // Completion somewhere else, or before anything was published.
  complete.set_worker_id(owner);
  complete.set_output_uri("file:///tmp/elsewhere");
  EXPECT_EQ(worker_->CompleteTask(Context().get(), complete, &complete_response)
                .error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  complete.set_output_uri(leased.task().work_uri() + "/block-00000");
  const grpc::Status unpublished =
      worker_->CompleteTask(Context().get(), complete, &complete_response);
  EXPECT_EQ(unpublished.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(unpublished.error_message().find("nothing was published"),
            std::string::npos);
}

// With the state lost but the artifact root kept, new jobs would reuse old
// ids and be answered with old checkpoints: quantd refuses to start, and a
// second quantd on a data directory in use refuses too.
TEST_F(WorkerProtocolTest, ResetDataDirectoryAndSecondCoordinatorAreRefused) {
  ASSERT_NO_FATAL_FAILURE(Start(Options()));
  const v1::Job job = CreateJob();
  // What a finished job leaves in the artifact root.
  ASSERT_TRUE(std::filesystem::create_directories(
      absl::StrCat(temp_, "/artifacts/jobs/", job.id(), "/checkpoint")));
  auto second = QuantdServer::Start(Options());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(second.status().message().find("is in use by another quantd"),
            std::string::npos)
      << second.status();
  server_->Shutdown(0);
  server_.reset();

  std::filesystem::remove_all(temp_ + "/data");
  auto reset = QuantdServer::Start(Options());
  ASSERT_FALSE(reset.ok());
  EXPECT_EQ(reset.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(reset.status().message().find(
                absl::StrCat("holds job ", job.id(), ", which the state")),
            std::string::npos)
      << reset.status();
}

// Server state is bounded: the worker registry forgets idle workers and
// refuses beyond --max_workers; WatchJob streams beyond
// --max_watch_streams are refused rather than each holding a thread.
TEST_F(WorkerProtocolTest, RegistryAndWatchStreamsAreBounded) {
  QuantdOptions options = Options();
  options.workers.max_workers = 2;
  options.workers.forget_worker_after_ms = 300;
  options.max_watch_streams = 1;
  ASSERT_NO_FATAL_FAILURE(Start(options));
  v1::RegisterWorkerRequest request;
  request.set_name("w");
  request.set_slots(1);
  v1::RegisterWorkerResponse registered;
  ASSERT_TRUE(
      worker_->RegisterWorker(Context().get(), request, &registered).ok());
  ASSERT_TRUE(
      worker_->RegisterWorker(Context().get(), request, &registered).ok());
  const grpc::Status full =
      worker_->RegisterWorker(Context().get(), request, &registered);
  EXPECT_EQ(full.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(full.error_message().find("--max_workers 2"), std::string::npos);
  // Unheard of for longer than the bound and holding no lease: forgotten.
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  EXPECT_TRUE(
      worker_->RegisterWorker(Context().get(), request, &registered).ok());
  request.set_version(std::string(129, 'v'));
  EXPECT_EQ(worker_->RegisterWorker(Context().get(), request, &registered)
                .error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);

  const v1::Job job = CreateJob();
  v1::WatchJobRequest watch;
  watch.set_id(job.id());
  auto first_context = Context();
  auto first = client_->WatchJob(first_context.get(), watch);
  v1::JobEvent event;
  ASSERT_TRUE(first->Read(&event));  // The first stream is open.
  auto second_context = Context();
  auto second = client_->WatchJob(second_context.get(), watch);
  while (second->Read(&event)) {
  }
  const grpc::Status refused = second->Finish();
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(refused.error_message().find("--max_watch_streams"),
            std::string::npos);
  first_context->TryCancel();
  while (first->Read(&event)) {
  }
  first->Finish();
}

TEST_F(WorkerProtocolTest, UnknownWorkerRegistersAgainAndFieldsAreChecked) {
  ASSERT_NO_FATAL_FAILURE(Start(Options()));
  v1::LeaseTaskResponse response;
  const grpc::Status unknown =
      Lease("worker-from-before-a-restart", 0, &response);
  EXPECT_EQ(unknown.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(unknown.error_message().find("register again"), std::string::npos);
  EXPECT_EQ(Lease("", 0, &response).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);

  v1::RegisterWorkerRequest bad;
  bad.set_name("w");
  bad.set_slots(0);
  v1::RegisterWorkerResponse registered;
  const grpc::Status no_slots =
      worker_->RegisterWorker(Context().get(), bad, &registered);
  EXPECT_EQ(no_slots.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(no_slots.error_message().find("slots"), std::string::npos);

  v1::HeartbeatRequest beat;
  v1::HeartbeatResponse beat_response;
  const grpc::Status no_lease =
      worker_->Heartbeat(Context().get(), beat, &beat_response);
  EXPECT_EQ(no_lease.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(no_lease.error_message().find("lease_id"), std::string::npos);
  beat.set_lease_id("lease-that-never-was");
  const grpc::Status no_such_lease =
      worker_->Heartbeat(Context().get(), beat, &beat_response);
  EXPECT_EQ(no_such_lease.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(no_such_lease.error_message().find("lease-that-never-was"),
            std::string::npos);
}

TEST_F(WorkerProtocolTest, TokensSeparateClientsFromWorkers) {
  QuantdOptions options = Options();
  options.tokens.client = kClientToken;
  options.tokens.worker = kWorkerToken;
  ASSERT_NO_FATAL_FAILURE(Start(options));
  v1::ListJobsRequest list;
  v1::ListJobsResponse jobs;
  // Client service.
  grpc::Status status = client_->ListJobs(Context().get(), list, &jobs);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_NE(status.error_message().find("authorization"), std::string::npos);
  EXPECT_EQ(
      client_->ListJobs(Context("not-the-token-at-all").get(), list, &jobs)
          .error_code(),
      grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(
      client_->ListJobs(Context(kWorkerToken).get(), list, &jobs).error_code(),
      grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_TRUE(client_->ListJobs(Context(kClientToken).get(), list, &jobs).ok());
  const v1::Job job = CreateJob(kClientToken);
  EXPECT_FALSE(job.id().empty());
  // Nothing was created by the refused calls.
  ASSERT_TRUE(client_->ListJobs(Context(kClientToken).get(), list, &jobs).ok());
  EXPECT_EQ(jobs.jobs_size(), 1);

  // Worker service.
  v1::RegisterWorkerRequest request;
  request.set_name("w");
  request.set_slots(1);
  v1::RegisterWorkerResponse registered;
  EXPECT_EQ(worker_->RegisterWorker(Context().get(), request, &registered)
                .error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  status = worker_->RegisterWorker(Context(kClientToken).get(), request,
                                   &registered);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_NE(status.error_message().find("client token"), std::string::npos);
  EXPECT_FALSE(Register(kWorkerToken).empty());
}

TEST_F(WorkerProtocolTest, ListenBeyondLoopbackOnlyWithBothTokens) {
  QuantdOptions options = Options();
  options.listen = "0.0.0.0:0";
  auto refused = QuantdServer::Start(options);
  EXPECT_TRUE(absl::IsInvalidArgument(refused.status())) << refused.status();
  options.tokens.client = kClientToken;
  auto still_refused = QuantdServer::Start(options);
  EXPECT_TRUE(absl::IsInvalidArgument(still_refused.status()));
  options.tokens.worker = kClientToken;  // The same token for both.
  auto same = QuantdServer::Start(options);
  EXPECT_TRUE(absl::IsInvalidArgument(same.status()));
  EXPECT_NE(same.status().message().find("differ"), std::string::npos);
  options.tokens.worker = kWorkerToken;
  auto served = QuantdServer::Start(options);
  ASSERT_TRUE(served.ok()) << served.status();
  (*served)->Shutdown(0);
}

TEST_F(WorkerProtocolTest, TlsWhenACertificateIsGiven) {
  const std::string cert = temp_ + "/cert.pem";
  const std::string key = temp_ + "/key.pem";
  const std::string command = absl::StrCat(
      "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost "
      "-addext subjectAltName=DNS:localhost -keyout ",
      key, " -out ", cert, " >/dev/null 2>&1");
  if (std::system(command.c_str()) != 0) {
    GTEST_SKIP() << "openssl could not make a test certificate";
  }
  QuantdOptions options = Options();
  options.listen = "localhost:0";
  options.tls_cert_file = cert;
  options.tls_key_file = key;
  ASSERT_NO_FATAL_FAILURE(Start(options));
  const std::string address = absl::StrCat("localhost:", server_->port());
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = *ReadFileToString(cert);
  auto secure = v1::QuantService::NewStub(
      grpc::CreateChannel(address, grpc::SslCredentials(ssl)));
  v1::ListJobsRequest list;
  v1::ListJobsResponse jobs;
  const grpc::Status ok = secure->ListJobs(Context().get(), list, &jobs);
  EXPECT_TRUE(ok.ok()) << ok.error_message();
  auto plain = v1::QuantService::NewStub(
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  auto context = Context();
  context->set_deadline(std::chrono::system_clock::now() +
                        std::chrono::seconds(3));
  EXPECT_FALSE(plain->ListJobs(context.get(), list, &jobs).ok());

  options.tls_key_file.clear();
  EXPECT_TRUE(absl::IsInvalidArgument(QuantdServer::Start(options).status()));
}

// A block task that finds its predecessor's published output changed on
// disk fails naming that block: quantd runs the predecessor's task again,
// then the failing one (its dependency). Nothing else may be named.
TEST_F(WorkerProtocolTest, ChangedBlockOutputRunsItsProducerAgain) {
  ASSERT_NO_FATAL_FAILURE(Start(Options()));
  const std::string worker_id = Register();
  const v1::Job job = CreateJob();
  // Block 0 completes (its marker published where the worker would).
  v1::LeaseTaskResponse block0;
  ASSERT_TRUE(Lease(worker_id, 2000, &block0).ok());
  ASSERT_TRUE(block0.has_task());
  ASSERT_EQ(block0.task().block(), 0);
  const std::string work = block0.task().work_uri().substr(7);
  const std::string layers_sha256 = PublishFakeBlock(work, 0);
  v1::CompleteTaskRequest complete;
  complete.set_lease_id(block0.lease_id());
  complete.set_worker_id(worker_id);
  complete.set_output_uri(block0.task().work_uri() + "/block-00000");
  complete.set_output_sha256(layers_sha256);
  v1::CompleteTaskResponse completed;
  ASSERT_TRUE(
      worker_->CompleteTask(Context().get(), complete, &completed).ok());
  // The store keeps what was verified; the next task carries it.
  auto tasks = server_->store().ListTasks(job.id());
  ASSERT_TRUE(tasks.ok());
  EXPECT_EQ((*tasks)[0].output_sha256, layers_sha256);

  v1::LeaseTaskResponse block1;
  ASSERT_TRUE(Lease(worker_id, 2000, &block1).ok());
  ASSERT_TRUE(block1.has_task());
  ASSERT_EQ(block1.task().block(), 1);
  ASSERT_EQ(block1.task().block_output_sha256().size(), 1u);
  EXPECT_EQ(block1.task().block_output_sha256().at(0), layers_sha256);
  v1::FailTaskRequest fail;
  fail.set_lease_id(block1.lease_id());
  fail.set_worker_id(worker_id);
  fail.set_error("block-00000.cal.safetensors: sha256 is ...");
  fail.set_retryable(true);
  v1::FailTaskResponse failed;
  // Not a block of the job, or the same block twice: refused, no change.
  fail.add_rerun_blocks(7);
  grpc::Status status = worker_->FailTask(Context().get(), fail, &failed);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("rerun_blocks: 7"), std::string::npos)
      << status.error_message();
  fail.clear_rerun_blocks();
  fail.add_rerun_blocks(0);
  fail.add_rerun_blocks(0);
  EXPECT_EQ(worker_->FailTask(Context().get(), fail, &failed).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  // Block 1 itself is not finished: not something it can ask to rerun.
  fail.clear_rerun_blocks();
  fail.add_rerun_blocks(1);
  EXPECT_EQ(worker_->FailTask(Context().get(), fail, &failed).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);

  fail.clear_rerun_blocks();
  fail.add_rerun_blocks(0);
  ASSERT_TRUE(worker_->FailTask(Context().get(), fail, &failed).ok());
  // Block 0 comes back first (block 1 depends on it), then block 1.
  v1::LeaseTaskResponse again;
  ASSERT_TRUE(Lease(worker_id, 2000, &again).ok());
  ASSERT_TRUE(again.has_task());
  EXPECT_EQ(again.task().block(), 0);
  EXPECT_EQ(again.task().attempt(), 2);
  // Reopened: what it published before is no longer vouched for.
  tasks = server_->store().ListTasks(job.id());
  ASSERT_TRUE(tasks.ok());
  EXPECT_EQ((*tasks)[0].output_sha256, "");
  auto events = server_->store().ListEvents(job.id(), 0, 0);
  ASSERT_TRUE(events.ok());
  bool rerun_shown = false;
  for (const auto& e : *events) {
    rerun_shown =
        rerun_shown || e.payload_json.find(
                           "task 0 runs again: task 1 found its "
                           "output changed on disk") != std::string::npos;
  }
  EXPECT_TRUE(rerun_shown);
  complete.set_lease_id(again.lease_id());
  ASSERT_TRUE(
      worker_->CompleteTask(Context().get(), complete, &completed).ok());
  v1::LeaseTaskResponse block1_again;
  ASSERT_TRUE(Lease(worker_id, 2000, &block1_again).ok());
  ASSERT_TRUE(block1_again.has_task());
  EXPECT_EQ(block1_again.task().block(), 1);
  EXPECT_EQ(block1_again.task().attempt(), 2);
}

// A completion is recorded only for outputs that verify: layers.json lists
// the tensors' hash, every listed file matches it, and the worker's
// reported hash is that of layers.json on disk. Each refusal names the
// file; the task stays leased (the lease runs out and it is retried).
TEST_F(WorkerProtocolTest, CompletionIsRefusedForOutputsThatDoNotVerify) {
  ASSERT_NO_FATAL_FAILURE(Start(Options()));
  const std::string worker_id = Register();
  const v1::Job job = CreateJob();
  v1::LeaseTaskResponse block0;
  ASSERT_TRUE(Lease(worker_id, 2000, &block0).ok());
  ASSERT_TRUE(block0.has_task());
  ASSERT_EQ(block0.task().block(), 0);
  const std::string work = block0.task().work_uri().substr(7);
  const std::string prefix = BlockOutputPrefix(work, 0);
  v1::CompleteTaskRequest complete;
  complete.set_lease_id(block0.lease_id());
  complete.set_worker_id(worker_id);
  complete.set_output_uri(block0.task().work_uri() + "/block-00000");
  v1::CompleteTaskResponse completed;
  auto refused = [&](grpc::StatusCode code, const std::string& needle) {
    const grpc::Status status =
        worker_->CompleteTask(Context().get(), complete, &completed);
    EXPECT_EQ(status.error_code(), code) << status.error_message();
    EXPECT_NE(status.error_message().find(needle), std::string::npos)
        << status.error_message();
    if (code == grpc::StatusCode::DATA_LOSS) {
      EXPECT_NE(status.error_message().find("completion refused"),
                std::string::npos)
          << status.error_message();
    }
  };

  // A layers.json from before outputs were hashed.
  std::filesystem::create_directories(work);
  ASSERT_TRUE(WriteFileAtomically(prefix + ".layers.json",
                                  R"({"block": 0, "layers": []})")
                  .ok());
  refused(grpc::StatusCode::DATA_LOSS, "records no sha256");

  // The tensors changed after layers.json recorded them.
  const std::string layers_sha256 = PublishFakeBlock(work, 0);
  ASSERT_TRUE(WriteFileAtomically(prefix + ".safetensors", "other").ok());
  complete.set_output_sha256(layers_sha256);
  refused(grpc::StatusCode::DATA_LOSS, prefix + ".safetensors: sha256 is");

  // layers.json is not the one the worker wrote.
  const std::string rewritten = PublishFakeBlock(work, 0, "other");
  ASSERT_NE(rewritten, layers_sha256);
  refused(grpc::StatusCode::DATA_LOSS, "the worker reports writing");

  // A reported hash that is not one.
  complete.set_output_sha256("not-hex");
  refused(grpc::StatusCode::INVALID_ARGUMENT, "output_sha256");

  // Nothing was recorded by the refusals; the right report is accepted.
  auto tasks = server_->store().ListTasks(job.id());
  ASSERT_TRUE(tasks.ok());
  EXPECT_EQ((*tasks)[0].state, store::TaskState::kLeased);
  EXPECT_EQ((*tasks)[0].output_sha256, "");
  complete.set_output_sha256(rewritten);
  const grpc::Status accepted =
      worker_->CompleteTask(Context().get(), complete, &completed);
  ASSERT_TRUE(accepted.ok()) << accepted.error_message();
  tasks = server_->store().ListTasks(job.id());
  ASSERT_TRUE(tasks.ok());
  EXPECT_EQ((*tasks)[0].state, store::TaskState::kDone);
  EXPECT_EQ((*tasks)[0].output_sha256, rewritten);
}

// The worker turns a task's "this input changed on disk" error into that
// request: block 0 runs again before block 1's second attempt.
TEST_F(WorkerProtocolTest, WorkerAsksForAChangedInputToBeRecomputed) {
  ASSERT_NO_FATAL_FAILURE(Start(Options()));
  // A block output whose layers.json records no hashes: what
  // VerifyBlockFile says about it is the error a block task returns.
  const std::string stale = temp_ + "/stale";
  std::filesystem::create_directories(stale);
  ASSERT_TRUE(
      WriteFileAtomically(stale + "/block-00000.layers.json", R"({"block": 0})")
          .ok());
  const absl::Status changed = VerifyBlockFile(stale, 0, ".cal.safetensors");
  ASSERT_EQ(ChangedBlockOutput(changed), 0) << changed;

  std::mutex mu;
  std::vector<std::pair<int, int>> runs;  // (block, attempt)
  worker::WorkerOptions options;
  options.server = server_->address();
  options.name = "in-process";
  options.lease_wait_ms = 500;
  options.run_task =
      [&](const v1::Task& task, const worker::TaskProgressSink&,
          const std::atomic<bool>*,
          const worker::TaskLimits&) -> absl::StatusOr<worker::TaskOutcome> {
    {
      std::lock_guard<std::mutex> lock(mu);
      runs.emplace_back(task.block(), task.attempt());
    }
    if (task.kind() != v1::TASK_KIND_BLOCK || task.block() > 1) {
      return absl::CancelledError("not needed by this test");
    }
    if (task.block() == 1 && task.attempt() == 1) return changed;
    const std::string work = task.work_uri().substr(7);
    const std::string layers_sha256 = PublishFakeBlock(work, task.block());
    return worker::TaskOutcome{
        "file://" + BlockOutputPrefix(work, task.block()), layers_sha256,
        false};
  };
  auto created = worker::Worker::Create(options);
  ASSERT_TRUE(created.ok()) << created.status();
  std::unique_ptr<worker::Worker> in_process = *std::move(created);
  std::thread running([&] { (void)in_process->Run(); });
  CreateJob();
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(20);
  auto seen = [&] {
    std::lock_guard<std::mutex> lock(mu);
    return std::find(runs.begin(), runs.end(), std::make_pair(1, 2)) !=
           runs.end();
  };
  while (!seen() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  in_process->RequestStop();
  running.join();
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_GE(runs.size(), 4u);
  EXPECT_EQ(runs[0], std::make_pair(0, 1));
  EXPECT_EQ(runs[1], std::make_pair(1, 1));
  EXPECT_EQ(runs[2], std::make_pair(0, 2));  // Recomputed first.
  EXPECT_EQ(runs[3], std::make_pair(1, 2));
}

// A task that never returns, whatever its cancel flag says: a read from
// storage that hangs. Released by the test at the end.
class HangingTask {
 public:
  absl::StatusOr<worker::TaskOutcome> Run(const v1::Task& task) {
    MutexLock lock(&mu_);
    leased_tasks_.push_back(task);
    wake_.SignalAll();
    while (!released_) wake_.Wait(&mu_);
    return absl::UnavailableError("released by the test");
  }
  void Release() {
    MutexLock lock(&mu_);
    released_ = true;
    wake_.SignalAll();
  }
  void OnStuck(const std::string& message) {
    MutexLock lock(&mu_);
    stuck_messages_.push_back(message);
    wake_.SignalAll();
  }
  // Waits up to `seconds` for a stuck report.
  std::vector<std::string> WaitForStuck(int seconds) {
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    MutexLock lock(&mu_);
    while (stuck_messages_.empty() && wake_.WaitUntil(&mu_, deadline)) {
    }
    return stuck_messages_;
  }

 private:
  Mutex mu_;
  CondVar wake_;
  bool released_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<v1::Task> leased_tasks_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> stuck_messages_ ABSL_GUARDED_BY(mu_);
};

worker::WorkerOptions InProcessWorker(const std::string& address) {
  worker::WorkerOptions options;
  options.server = address;
  options.name = "in-process";
  options.lease_wait_ms = 500;
  options.cancel_grace_ms = 1000;
  return options;
}

// A task stuck inside I/O used to hold its lease forever: the heartbeats
// went on, cancelling the job freed nothing and the next job stayed
// QUEUED. Now a task that does not return within the grace period of being
// cancelled is declared stuck and its lease is no longer renewed, so it
// expires and another worker takes the task.
TEST_F(WorkerProtocolTest, TaskStuckPastItsBoundIsAbandonedAndItsLeaseFreed) {
  ASSERT_NO_FATAL_FAILURE(Start(Options()));
  HangingTask hanging;
  worker::WorkerOptions options = InProcessWorker(server_->address());
  options.max_task_ms = 300;
  options.run_task = [&](const v1::Task& task, const worker::TaskProgressSink&,
                         const std::atomic<bool>*, const worker::TaskLimits&) {
    return hanging.Run(task);
  };
  options.on_stuck_task = [&](const std::string& m) { hanging.OnStuck(m); };
  auto created = worker::Worker::Create(options);
  ASSERT_TRUE(created.ok()) << created.status();
  std::unique_ptr<worker::Worker> in_process = *std::move(created);
  std::thread running([&] { (void)in_process->Run(); });

  const v1::Job job = CreateJob();
  const std::vector<std::string> stuck = hanging.WaitForStuck(20);
  ASSERT_EQ(stuck.size(), 1u);
  EXPECT_NE(stuck[0].find(job.id() + " block 0 did not stop within 1 s of "
                                     "being cancelled (it ran past "
                                     "--max_task_seconds)"),
            std::string::npos)
      << stuck[0];

  // The lease is no longer renewed: it expires (1 s here) and another
  // worker gets the task's next attempt.
  const std::string other = Register();
  v1::LeaseTaskResponse leased;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(15);
  while (!leased.has_task() && std::chrono::steady_clock::now() < deadline) {
    ASSERT_TRUE(Lease(other, 2000, &leased).ok());
  }
  ASSERT_TRUE(leased.has_task());
  EXPECT_EQ(leased.task().job_id(), job.id());
  EXPECT_EQ(leased.task().block(), 0);
  EXPECT_EQ(leased.task().attempt(), 2);

  hanging.Release();
  in_process->RequestStop();
  running.join();
  // The stuck attempt's late return is not reported as anything.
  EXPECT_EQ(in_process->completed(), 0);
}

// A task that sees its cancel flag but runs past --max_task_seconds is
// failed as retryable with a message that says why.
TEST_F(WorkerProtocolTest, TaskPastItsTimeBoundFailsSayingSo) {
  ASSERT_NO_FATAL_FAILURE(Start(Options()));
  worker::WorkerOptions options = InProcessWorker(server_->address());
  options.max_task_ms = 200;
  std::atomic<int> runs{0};
  options.run_task =
      [&](const v1::Task&, const worker::TaskProgressSink&,
          const std::atomic<bool>* cancelled,
          const worker::TaskLimits&) -> absl::StatusOr<worker::TaskOutcome> {
    ++runs;
    while (!cancelled->load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return absl::CancelledError("task cancelled");
  };
  options.on_stuck_task = [](const std::string& m) {
    ADD_FAILURE() << "not stuck: it returns once cancelled: " << m;
  };
  auto created = worker::Worker::Create(options);
  ASSERT_TRUE(created.ok()) << created.status();
  std::unique_ptr<worker::Worker> in_process = *std::move(created);
  std::thread running([&] { (void)in_process->Run(); });

  const v1::Job job = CreateJob();
  const v1::Job now = WaitForState(job.id(), v1::JOB_STATE_FAILED, 30);
  in_process->RequestStop();
  running.join();
  ASSERT_EQ(now.state(), v1::JOB_STATE_FAILED);
  // Retried until the attempts ran out (3), each ended by the bound.
  EXPECT_EQ(runs.load(), 3);
  EXPECT_NE(now.error().find("task exceeded --max_task_seconds (0.2 s) and "
                             "was cancelled"),
            std::string::npos)
      << now.error();
}

// The worker's bounds read its injected clock: a task that moves a
// FakeClock past a one-hour bound is cancelled at the heartbeat thread's next
// wake, three attempts in well under the test's deadline instead of three
// hours.
TEST_F(WorkerProtocolTest, TaskBoundIsJudgedOnTheInjectedClock) {
  ASSERT_NO_FATAL_FAILURE(Start(Options()));
  FakeClock clock;
  worker::WorkerOptions options = InProcessWorker(server_->address());
  options.clock = &clock;
  options.max_task_ms = 3'600'000;
  std::atomic<int> runs{0};
  options.run_task =
      [&](const v1::Task&, const worker::TaskProgressSink&,
          const std::atomic<bool>* cancelled,
          const worker::TaskLimits&) -> absl::StatusOr<worker::TaskOutcome> {
    ++runs;
    clock.AdvanceMs(3'600'001);
    while (!cancelled->load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return absl::CancelledError("task cancelled");
  };
  options.on_stuck_task = [](const std::string& m) {
    ADD_FAILURE() << "not stuck: the grace is on the same clock: " << m;
  };
  auto created = worker::Worker::Create(options);
  ASSERT_TRUE(created.ok()) << created.status();
  std::unique_ptr<worker::Worker> in_process = *std::move(created);
  std::thread running([&] { (void)in_process->Run(); });

  const v1::Job job = CreateJob();
  const v1::Job now = WaitForState(job.id(), v1::JOB_STATE_FAILED, 30);
  in_process->RequestStop();
  running.join();
  ASSERT_EQ(now.state(), v1::JOB_STATE_FAILED);
  EXPECT_EQ(runs.load(), 3);
  EXPECT_NE(now.error().find("task exceeded --max_task_seconds (3600 s) and "
                             "was cancelled"),
            std::string::npos)
      << now.error();
}

// A heartbeat whose finished layers quantd refuses (here a layer of
// another block) used to look like an unreachable coordinator: the worker
// kept the layers for the next beat, which was refused too, the lease was
// never renewed, and the job failed three attempts later as "lease
// expired". Now the task is cancelled and failed at once with quantd's
// reason, not retried: the same worker code would send the same rows.
TEST_F(WorkerProtocolTest, RefusedHeartbeatFailsTheTaskWithItsReason) {
  ASSERT_NO_FATAL_FAILURE(Start(Options()));
  worker::WorkerOptions options = InProcessWorker(server_->address());
  std::atomic<int> runs{0};
  options.run_task =
      [&](const v1::Task& task, const worker::TaskProgressSink& sink,
          const std::atomic<bool>* cancelled,
          const worker::TaskLimits&) -> absl::StatusOr<worker::TaskOutcome> {
    ++runs;
    v1::LayerAudit layer;
    layer.set_name(
        absl::StrCat("model.layers.", task.block() + 7, ".self_attn.q_proj"));
    layer.set_type("q_proj");
    sink.on_layer(layer);
    const auto give_up =
        std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!cancelled->load() && std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return absl::CancelledError("task cancelled");
  };
  options.on_stuck_task = [](const std::string& m) {
    ADD_FAILURE() << "not stuck: it returns once cancelled: " << m;
  };
  auto created = worker::Worker::Create(options);
  ASSERT_TRUE(created.ok()) << created.status();
  std::unique_ptr<worker::Worker> in_process = *std::move(created);
  std::thread running([&] { (void)in_process->Run(); });

  const v1::Job job = CreateJob();
  const v1::Job now = WaitForState(job.id(), v1::JOB_STATE_FAILED, 30);
  in_process->RequestStop();
  running.join();
  ASSERT_EQ(now.state(), v1::JOB_STATE_FAILED);
  EXPECT_EQ(runs.load(), 1);  // Not retried.
  EXPECT_NE(now.error().find("quantd refused the task's progress: "
                             "progress.finished_layers.name"),
            std::string::npos)
      << now.error();
  EXPECT_EQ(now.error().find("lease"), std::string::npos) << now.error();
}

// A coordinator that hands out one task and answers each heartbeat only
// after `answer_delay`, as a quantd on a loaded host whose store waits on
// the disk. It records when each beat arrived.
class SlowHeartbeatCoordinator final : public v1::WorkerService::Service {
 public:
  SlowHeartbeatCoordinator(int64_t interval_ms,
                           std::chrono::milliseconds answer_delay)
      : interval_ms_(interval_ms), answer_delay_(answer_delay) {}

  grpc::Status RegisterWorker(grpc::ServerContext*,
                              const v1::RegisterWorkerRequest*,
                              v1::RegisterWorkerResponse* response) override {
    response->set_worker_id("slow-beats-worker");
    response->set_heartbeat_interval_ms(interval_ms_);
    response->set_lease_duration_ms(3 * interval_ms_);
    return grpc::Status::OK;
  }
  grpc::Status LeaseTask(grpc::ServerContext*,
                         const v1::LeaseTaskRequest* request,
                         v1::LeaseTaskResponse* response) override {
    if (handed_out_.exchange(true)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(
          std::min<int64_t>(request->wait_ms(), 200)));
      return grpc::Status::OK;
    }
    response->set_lease_id("lease-1");
    v1::Task* task = response->mutable_task();
    task->set_job_id("job-slow-beats");
    task->set_kind(v1::TASK_KIND_BLOCK);
    task->set_attempt(1);
    return grpc::Status::OK;
  }
  grpc::Status Heartbeat(grpc::ServerContext*, const v1::HeartbeatRequest*,
                         v1::HeartbeatResponse*) override {
    {
      MutexLock lock(&mu_);
      arrivals_.push_back(std::chrono::steady_clock::now());
    }
    std::this_thread::sleep_for(answer_delay_);
    return grpc::Status::OK;
  }
  grpc::Status CompleteTask(grpc::ServerContext*,
                            const v1::CompleteTaskRequest*,
                            v1::CompleteTaskResponse*) override {
    completed_.store(true);
    return grpc::Status::OK;
  }
  grpc::Status FailTask(grpc::ServerContext*, const v1::FailTaskRequest*,
                        v1::FailTaskResponse*) override {
    return grpc::Status::OK;
  }

  // The gaps between consecutive beats' arrivals, in milliseconds.
  std::vector<int64_t> GapsMs() {
    MutexLock lock(&mu_);
    std::vector<int64_t> gaps;
    for (size_t i = 1; i < arrivals_.size(); ++i) {
      gaps.push_back(std::chrono::duration_cast<std::chrono::milliseconds>(
                         arrivals_[i] - arrivals_[i - 1])
                         .count());
    }
    return gaps;
  }
  bool completed() const { return completed_.load(); }

 private:
  const int64_t interval_ms_;
  const std::chrono::milliseconds answer_delay_;
  std::atomic<bool> handed_out_{false};
  std::atomic<bool> completed_{false};
  Mutex mu_;
  std::vector<std::chrono::steady_clock::time_point> arrivals_
      ABSL_GUARDED_BY(mu_);
};

// A worker timed its next heartbeat from the moment the last one was
// answered, so every second of a slow answer was added to the gap between
// renewals: with quantd's interval of a third of the lease, an answer
// slower than a third of the lease let the lease expire under a live
// worker, and the task ran again (seen on a loaded CI host). Beats are now
// due an interval after the last one was sent.
TEST(WorkerHeartbeatTest, ASlowAnswerDoesNotDelayTheNextBeat) {
  constexpr int64_t kIntervalMs = 600;
  SlowHeartbeatCoordinator coordinator(kIntervalMs,
                                       std::chrono::milliseconds(1000));
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                           &port);
  builder.RegisterService(&coordinator);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  ASSERT_GT(port, 0);

  worker::WorkerOptions options =
      InProcessWorker(absl::StrCat("127.0.0.1:", port));
  options.run_task =
      [](const v1::Task&, const worker::TaskProgressSink&,
         const std::atomic<bool>* cancelled,
         const worker::TaskLimits&) -> absl::StatusOr<worker::TaskOutcome> {
    const auto until =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(6500);
    while (!cancelled->load() && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return worker::TaskOutcome{};
  };
  auto created = worker::Worker::Create(options);
  ASSERT_TRUE(created.ok()) << created.status();
  std::unique_ptr<worker::Worker> in_process = *std::move(created);
  std::thread running([&] { (void)in_process->Run(); });
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!coordinator.completed() &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  in_process->RequestStop();
  running.join();
  server->Shutdown();
  ASSERT_TRUE(coordinator.completed());

  // Answered after 1000 ms, beats timed from the answer would arrive at
  // least 1000 + 600 ms apart; timed from the send, about 1000 ms apart
  // (the next is due before the answer comes). The median is judged, so
  // one beat late on a loaded host does not decide it.
  std::vector<int64_t> gaps = coordinator.GapsMs();
  ASSERT_GE(gaps.size(), 3u);
  std::sort(gaps.begin(), gaps.end());
  const int64_t median = gaps[gaps.size() / 2];
  EXPECT_LT(median, 1000 + kIntervalMs - 150)
      << "gaps between beats (ms), sorted: " << absl::StrJoin(gaps, ", ");
  EXPECT_GE(median, 1000 - 50);
}

TEST(WorkerOptionsTest, BoundsAreChecked) {
  worker::WorkerOptions options = InProcessWorker("127.0.0.1:1");
  options.max_task_ms = -1;
  auto created = worker::Worker::Create(options);
  ASSERT_FALSE(created.ok());
  EXPECT_NE(created.status().message().find("--max_task_seconds"),
            std::string::npos);
  options = InProcessWorker("127.0.0.1:1");
  options.cancel_grace_ms = 10;
  created = worker::Worker::Create(options);
  ASSERT_FALSE(created.ok());
  EXPECT_NE(created.status().message().find("--cancel_grace_seconds"),
            std::string::npos);
}

}  // namespace
}  // namespace quant

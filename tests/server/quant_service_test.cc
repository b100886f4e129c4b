// quantd's client API over real loopback gRPC: the server runs in-process
// on 127.0.0.1:0 with a real SQLite file and artifact directory in a
// temporary folder; stories260K and TinyStories text come from ../shared.
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/health_probe.h"
#include "core/base/file_util.h"
#include "core/base/sha256.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "quant/v1/service.grpc.pb.h"
#include "quant/v1/worker.grpc.pb.h"
#include "server/quantd_server.h"
#include "server/task_plan.h"
#include "tests/server/reflection_probe.h"
#include "tests/support/test_env.h"

namespace quant {
namespace {

using server::QuantdOptions;
using server::QuantdServer;
using testing::RealPath;

class QuantServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    QUANT_REQUIRE_SHARED(testing::SharedPath("models/stories260K/hf-f32"));
    QUANT_REQUIRE_SHARED(testing::SharedPath("data/tinystories_val.txt"));
    temp_ = RealPath(testing::MakeTempDir());
    models_ = RealPath(testing::SharedPath("models"));
    checkpoint_uri_ = absl::StrCat("file://", models_, "/stories260K/hf-f32");
    QuantdOptions options;
    options.listen = "127.0.0.1:0";
    options.data_dir = temp_ + "/data";
    options.artifact_root = absl::StrCat("file://", temp_, "/artifacts");
    options.allowed_roots = {models_, temp_};
    options.max_upload_bytes = 2 << 20;
    // Sequential jobs as rounds (the plan this suite checks).
    options.round_tasks = true;
    auto server = QuantdServer::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    ASSERT_GT(server_->port(), 0);
    channel_ = grpc::CreateChannel(server_->address(),
                                   grpc::InsecureChannelCredentials());
    stub_ = v1::QuantService::NewStub(channel_);
  }

  void TearDown() override {
    stub_.reset();
    channel_.reset();
    if (server_) server_->Shutdown(1000);
    server_.reset();
  }

  // Streams `bytes` in 64 KiB chunks after the filename.
  grpc::Status Upload(const std::string& filename, const std::string& bytes,
                      v1::UploadCalibrationResponse* response,
                      bool send_filename = true) {
    grpc::ClientContext context;
    auto writer = stub_->UploadCalibration(&context, response);
    v1::UploadCalibrationRequest message;
    if (send_filename) {
      message.set_filename(filename);
      writer->Write(message);
    }
    for (size_t offset = 0; offset < bytes.size(); offset += 65536) {
      message.set_chunk(bytes.substr(offset, 65536));
      if (!writer->Write(message)) break;
    }
    writer->WritesDone();
    return writer->Finish();
  }

  std::string UploadTinyStories() {
    auto bytes =
        ReadFileToString(testing::SharedPath("data/tinystories_val.txt"));
    EXPECT_TRUE(bytes.ok()) << bytes.status();
    v1::UploadCalibrationResponse response;
    const grpc::Status status =
        Upload("tinystories_val.txt", *bytes, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response.sha256();
  }

  v1::CreateJobRequest GoodRequest(const std::string& calibration_sha256) {
    v1::CreateJobRequest request;
    request.set_checkpoint_uri(checkpoint_uri_);
    v1::Recipe* recipe = request.mutable_recipe();
    recipe->set_method(v1::METHOD_GPTQ);
    recipe->set_bits(4);
    recipe->set_group_size(32);
    recipe->mutable_damp()->set_fraction(0.01);
    recipe->mutable_calibration()->set_samples(8);
    recipe->mutable_calibration()->set_seq_len(64);
    recipe->mutable_calibration()->set_heldout_fraction(0.1);
    recipe->add_ignore("lm_head");
    request.mutable_calibration()->set_sha256(calibration_sha256);
    (*request.mutable_labels())["team"] = "release";
    return request;
  }

  grpc::Status Create(const v1::CreateJobRequest& request, v1::Job* job) {
    grpc::ClientContext context;
    return stub_->CreateJob(&context, request, job);
  }

  // Every job, following page tokens.
  std::vector<v1::Job> AllJobs(v1::ListJobsRequest request = {}) {
    std::vector<v1::Job> jobs;
    for (int pages = 0; pages < 100; ++pages) {
      grpc::ClientContext context;
      v1::ListJobsResponse response;
      const grpc::Status status = stub_->ListJobs(&context, request, &response);
      EXPECT_TRUE(status.ok()) << status.error_message();
      if (!status.ok()) break;
      jobs.insert(jobs.end(), response.jobs().begin(), response.jobs().end());
      if (response.next_page_token().empty()) break;
      request.set_page_token(response.next_page_token());
    }
    return jobs;
  }

  std::string temp_;
  std::string models_;
  std::string checkpoint_uri_;
  std::unique_ptr<QuantdServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::QuantService::Stub> stub_;
};

TEST_F(QuantServiceTest, UploadIsContentAddressedAndIdempotent) {
  const std::string path = testing::SharedPath("data/tinystories_val.txt");
  auto bytes = ReadFileToString(path);
  ASSERT_TRUE(bytes.ok());
  v1::UploadCalibrationResponse first;
  ASSERT_TRUE(Upload("val.txt", *bytes, &first).ok());
  EXPECT_EQ(first.sha256(), Sha256Hex(*bytes));
  EXPECT_EQ(first.size_bytes(), static_cast<int64_t>(bytes->size()));
  EXPECT_GT(first.documents(), 1000);
  EXPECT_FALSE(first.already_present());
  // Stored under the artifact root, byte for byte.
  auto stored = ReadFileToString(
      absl::StrCat(temp_, "/artifacts/calib/", first.sha256(), ".jsonl"));
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_EQ(*stored, *bytes);

  v1::UploadCalibrationResponse second;
  ASSERT_TRUE(Upload("again.txt", *bytes, &second).ok());
  EXPECT_EQ(second.sha256(), first.sha256());
  EXPECT_TRUE(second.already_present());
}

TEST_F(QuantServiceTest, BadUploadsAreRefused) {
  v1::UploadCalibrationResponse response;
  grpc::Status status = Upload("x", "hello\n", &response, false);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("filename"), std::string::npos);

  status = Upload("empty.jsonl", "", &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("empty.jsonl"), std::string::npos);

  status = Upload("bad.jsonl", "{\"text\": 1}\n", &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("line 1"), std::string::npos)
      << status.error_message();

  // Over the 2 MiB bound of this server.
  status = Upload("big.txt", std::string(3 << 20, 'a'), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(status.error_message().find("big.txt"), std::string::npos);
}

// The dry run: the plan, output size and time on the registered workers,
// refused as CreateJob refuses, and nothing created.
TEST_F(QuantServiceTest, EstimateJobPredictsAndCreatesNothing) {
  v1::CreateJobRequest request = GoodRequest("");
  request.clear_calibration();  // Optional for a dry run.
  v1::JobEstimate estimate;
  {
    grpc::ClientContext context;
    const grpc::Status status =
        stub_->EstimateJob(&context, request, &estimate);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }
  EXPECT_EQ(estimate.blocks(), 5);
  // Rounds of 1 calibration and 1 held-out shard per layer group.
  EXPECT_EQ(
      estimate.tasks(),
      static_cast<int>(
          server::PlanRoundTasks(5, RoundShardCounts{1, 1, true}).size()));
  EXPECT_EQ(estimate.calibration_tokens(), 8 * 64);
  EXPECT_EQ(estimate.heldout_tokens(), 8 * 64);
  // gptq format: the MLP layers (K or N = 172) are kept.
  EXPECT_EQ(estimate.packed_layers(), 5 * 4);
  EXPECT_EQ(estimate.kept_layers(), 5 * 3);
  EXPECT_GT(estimate.output_bytes(), 0);
  EXPECT_LT(estimate.output_bytes(), estimate.source_bytes());
  // No worker has registered rates: no time.
  EXPECT_EQ(estimate.workers(), 0);
  EXPECT_FALSE(estimate.has_expected_seconds());

  auto worker = v1::WorkerService::NewStub(channel_);
  {
    grpc::ClientContext context;
    v1::RegisterWorkerRequest reg;
    reg.set_name("measured");
    reg.set_slots(1);
    reg.mutable_rates()->set_forward_flops_per_second(1e10);
    reg.mutable_rates()->set_hessian_flops_per_second(1e10);
    reg.mutable_rates()->set_gptq_flops_per_second(1e10);
    v1::RegisterWorkerResponse response;
    ASSERT_TRUE(worker->RegisterWorker(&context, reg, &response).ok());
  }
  {
    grpc::ClientContext context;
    ASSERT_TRUE(stub_->EstimateJob(&context, request, &estimate).ok());
  }
  EXPECT_EQ(estimate.workers(), 1);
  ASSERT_TRUE(estimate.has_expected_seconds());
  EXPECT_GT(estimate.expected_seconds(), 0);
  const double at_ten_gflops = estimate.expected_seconds();
  // Twice the work (twice the windows): longer.
  request.mutable_recipe()->mutable_calibration()->set_samples(16);
  {
    grpc::ClientContext context;
    ASSERT_TRUE(stub_->EstimateJob(&context, request, &estimate).ok());
  }
  EXPECT_GT(estimate.expected_seconds(), at_ten_gflops);

  // Refused as CreateJob refuses: a bad recipe, an unknown calibration.
  v1::CreateJobRequest bad = request;
  bad.mutable_recipe()->set_bits(5);
  {
    grpc::ClientContext context;
    const grpc::Status status = stub_->EstimateJob(&context, bad, &estimate);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(status.error_message().find("bits"), std::string::npos)
        << status.error_message();
  }
  bad = request;
  bad.mutable_calibration()->set_sha256(std::string(64, 'b'));
  {
    grpc::ClientContext context;
    const grpc::Status status = stub_->EstimateJob(&context, bad, &estimate);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND)
        << status.error_message();
  }
  // A worker's rates must be numbers >= 0.
  {
    grpc::ClientContext context;
    v1::RegisterWorkerRequest reg;
    reg.set_name("negative");
    reg.set_slots(1);
    reg.mutable_rates()->set_gptq_flops_per_second(-1);
    v1::RegisterWorkerResponse response;
    const grpc::Status status =
        worker->RegisterWorker(&context, reg, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(status.error_message().find("rates.gptq_flops_per_second"),
              std::string::npos)
        << status.error_message();
  }
  EXPECT_TRUE(AllJobs().empty());
}

TEST_F(QuantServiceTest, CreateJobRecordsAQueuedJobWithItsPlan) {
  const std::string sha = UploadTinyStories();
  v1::Job job;
  const grpc::Status status = Create(GoodRequest(sha), &job);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_FALSE(job.id().empty());
  EXPECT_EQ(job.state(), v1::JOB_STATE_QUEUED);
  EXPECT_EQ(job.verdict(), v1::VERDICT_UNSPECIFIED);
  EXPECT_EQ(job.checkpoint_uri(), checkpoint_uri_);
  EXPECT_EQ(job.calibration_sha256(), sha);
  EXPECT_EQ(job.recipe().method(), v1::METHOD_GPTQ);
  EXPECT_EQ(job.recipe().bits(), 4);
  EXPECT_EQ(job.recipe().group_size(), 32);
  EXPECT_EQ(job.recipe().calibration().samples(), 8);
  EXPECT_EQ(job.recipe().propagation(), v1::PROPAGATION_SEQUENTIAL);
  EXPECT_EQ(job.labels().at("team"), "release");
  EXPECT_EQ(job.progress().blocks_total(), 5);  // stories260K: 5 layers
  EXPECT_EQ(job.progress().blocks_done(), 0);
  EXPECT_GT(job.create_time().seconds(), 0);

  // The plan: a sequential dense job's blocks as rounds (8 sequences: one
  // shard per split; GPTQ: reduces a layer at a time, waiting for the
  // calibration shard only), then finalize after every block's last reduce.
  auto tasks = server_->store().ListTasks(job.id());
  ASSERT_TRUE(tasks.ok()) << tasks.status();
  const std::vector<store::TaskSpec> planned =
      server::PlanRoundTasks(5, RoundShardCounts{1, 1, true, true});
  ASSERT_EQ(tasks->size(), planned.size());
  for (size_t i = 0; i < planned.size(); ++i) {
    EXPECT_EQ((*tasks)[i].kind, planned[i].kind);
    EXPECT_EQ((*tasks)[i].block, planned[i].block);
    EXPECT_EQ((*tasks)[i].group, planned[i].group);
    EXPECT_EQ((*tasks)[i].layer, planned[i].layer);
    EXPECT_EQ((*tasks)[i].split, planned[i].split);
    EXPECT_EQ((*tasks)[i].shard, planned[i].shard);
    EXPECT_EQ((*tasks)[i].depends_on, planned[i].depends_on);
  }
  EXPECT_EQ(tasks->back().kind, store::TaskKind::kFinalize);
  auto events = server_->store().ListEvents(job.id(), 0, 0);
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 1u);
  EXPECT_NE((*events)[0].payload_json.find("QUEUED"), std::string::npos);

  // No packed checkpoint yet: nothing to download.
  {
    grpc::ClientContext context;
    v1::DownloadArtifactRequest download;
    download.set_job_id(job.id());
    auto reader = stub_->DownloadArtifact(&context, download);
    v1::ArtifactChunk chunk;
    EXPECT_FALSE(reader->Read(&chunk));
    const grpc::Status status = reader->Finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
    EXPECT_NE(status.error_message().find("only a SUCCEEDED job"),
              std::string::npos)
        << status.error_message();
  }

  // GetJob sees the same job.
  grpc::ClientContext context;
  v1::GetJobRequest get;
  get.set_id(job.id());
  v1::Job fetched;
  ASSERT_TRUE(stub_->GetJob(&context, get, &fetched).ok());
  // Time has passed (elapsed_seconds is live); the rest is the same.
  EXPECT_GE(fetched.progress().elapsed_seconds(),
            job.progress().elapsed_seconds());
  fetched.mutable_progress()->clear_elapsed_seconds();
  job.mutable_progress()->clear_elapsed_seconds();
  EXPECT_EQ(fetched.SerializeAsString(), job.SerializeAsString());

  // Independent propagation: blocks depend on nothing.
  v1::CreateJobRequest independent = GoodRequest(sha);
  independent.mutable_recipe()->set_propagation(v1::PROPAGATION_INDEPENDENT);
  v1::Job second;
  ASSERT_TRUE(Create(independent, &second).ok());
  EXPECT_NE(second.id(), job.id());
  tasks = server_->store().ListTasks(second.id());
  ASSERT_TRUE(tasks.ok());
  ASSERT_EQ(tasks->size(), 6u);
  for (int i = 0; i < 5; ++i) EXPECT_TRUE((*tasks)[i].depends_on.empty());
  EXPECT_EQ((*tasks)[5].depends_on.size(), 5u);
  EXPECT_EQ(job.warnings_size(), 0);
}

TEST_F(QuantServiceTest, OverrideMatchingNoLayerIsAWarningOnTheJob) {
  const std::string sha = UploadTinyStories();
  v1::CreateJobRequest request = GoodRequest(sha);
  v1::LayerOverride* override = request.mutable_recipe()->add_overrides();
  override->set_match("model\\.layers\\.99\\..*");
  override->set_bits(8);
  v1::Job job;
  const grpc::Status status = Create(request, &job);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(job.warnings_size(), 1);
  EXPECT_NE(job.warnings(0).find("overrides[0]"), std::string::npos)
      << job.warnings(0);
  EXPECT_NE(job.warnings(0).find("matches no layer"), std::string::npos)
      << job.warnings(0);
  // Kept with the job, not only in CreateJob's reply.
  grpc::ClientContext context;
  v1::GetJobRequest get;
  get.set_id(job.id());
  v1::Job fetched;
  ASSERT_TRUE(stub_->GetJob(&context, get, &fetched).ok());
  ASSERT_EQ(fetched.warnings_size(), 1);
  EXPECT_EQ(fetched.warnings(0), job.warnings(0));
}

// stories260K: q/k/v/o/gate/up read 64 inputs, down_proj 172. With at most
// 1 x 100 calibration tokens only down_proj's Hessian is certain to be
// rank-deficient; with 1 x 32 every layer's is.
TEST_F(QuantServiceTest, FewerCalibrationTokensThanInputsIsAWarningOnTheJob) {
  const std::string sha = UploadTinyStories();
  v1::CreateJobRequest request = GoodRequest(sha);
  request.mutable_recipe()->mutable_calibration()->set_samples(1);
  request.mutable_recipe()->mutable_calibration()->set_seq_len(100);
  v1::Job job;
  grpc::Status status = Create(request, &job);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(job.warnings_size(), 1);
  EXPECT_EQ(job.warnings(0),
            "calibration: at most 100 tokens (samples 1 x seq_len 100), fewer "
            "than the 172 inputs of down_proj: their Hessians are "
            "rank-deficient (T < K), so GPTQ and AWQ lean on damping there "
            "and the audit flags them rank_deficient");

  request.mutable_recipe()->mutable_calibration()->set_seq_len(32);
  v1::Job all;
  status = Create(request, &all);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(all.warnings_size(), 2);
  EXPECT_NE(all.warnings(0).find("fewer than the 64 inputs of q_proj, k_proj, "
                                 "v_proj, o_proj, gate_proj, up_proj:"),
            std::string::npos)
      << all.warnings(0);
  EXPECT_NE(all.warnings(1).find("fewer than the 172 inputs of down_proj:"),
            std::string::npos)
      << all.warnings(1);

  // Exactly as many tokens as inputs is full rank: no warning.
  request.mutable_recipe()->mutable_calibration()->set_seq_len(172);
  v1::Job none;
  status = Create(request, &none);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(none.warnings_size(), 0);
}

TEST_F(QuantServiceTest, RequestIdMakesCreateIdempotent) {
  const std::string sha = UploadTinyStories();
  v1::CreateJobRequest request = GoodRequest(sha);
  request.set_request_id("release-42");
  v1::Job first;
  ASSERT_TRUE(Create(request, &first).ok());
  v1::Job replay;
  ASSERT_TRUE(Create(request, &replay).ok());
  EXPECT_EQ(replay.id(), first.id());
  EXPECT_EQ(replay.request_id(), "release-42");
  EXPECT_EQ(AllJobs().size(), 1u);
  auto tasks = server_->store().ListTasks(first.id());
  ASSERT_TRUE(tasks.ok());
  EXPECT_EQ(tasks->size(),
            server::PlanRoundTasks(5, RoundShardCounts{1, 1, true}).size());
  // Planned once.

  request.mutable_recipe()->set_bits(8);
  v1::Job other;
  grpc::Status status = Create(request, &other);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_NE(status.error_message().find("release-42"), std::string::npos);

  request = GoodRequest(sha);
  request.set_request_id("release-42");
  (*request.mutable_labels())["team"] = "other";
  status = Create(request, &other);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_EQ(AllJobs().size(), 1u);
}

struct BadRequestCase {
  std::string name;
  grpc::StatusCode code;
  std::string field;  // Must appear in the message.
};

TEST_F(QuantServiceTest, InvalidRequestsAreRejectedAndCreateNothing) {
  const std::string sha = UploadTinyStories();
  const std::string calib_path = temp_ + "/calib.jsonl";
  const std::string calib_text = "{\"text\": \"Once upon a time.\"}\n";
  ASSERT_TRUE(WriteFileAtomically(calib_path, calib_text).ok());
  ASSERT_EQ(symlink("/etc", (temp_ + "/etc_link").c_str()), 0);
  ASSERT_EQ(mkdir((temp_ + "/not_a_model").c_str(), 0755), 0);
  // A FIFO as the calibration file (once hung CreateJob forever), a
  // directory as one (once INTERNAL).
  ASSERT_EQ(mkfifo((temp_ + "/calib.fifo").c_str(), 0600), 0);
  ASSERT_EQ(mkdir((temp_ + "/calib_dir").c_str(), 0755), 0);
  // A checkpoint under a root whose config.json leads out of every root.
  const std::string leaky = temp_ + "/leaky_model";
  ASSERT_EQ(mkdir(leaky.c_str(), 0755), 0);
  const std::string outside = RealPath(testing::MakeTempDir());
  const std::string stories = models_ + "/stories260K/hf-f32";
  for (const char* name : {"config.json", "model.safetensors"}) {
    ASSERT_TRUE(WriteFileAtomically(
                    outside + "/" + name,
                    *ReadFileToString(stories + "/" + name, size_t{1} << 30))
                    .ok());
  }
  ASSERT_EQ(symlink((outside + "/config.json").c_str(),
                    (leaky + "/config.json").c_str()),
            0);
  ASSERT_EQ(symlink((stories + "/model.safetensors").c_str(),
                    (leaky + "/model.safetensors").c_str()),
            0);
  // The same with model.safetensors leading out.
  const std::string leaky_weights = temp_ + "/leaky_weights";
  ASSERT_EQ(mkdir(leaky_weights.c_str(), 0755), 0);
  ASSERT_EQ(symlink((stories + "/config.json").c_str(),
                    (leaky_weights + "/config.json").c_str()),
            0);
  ASSERT_EQ(symlink((outside + "/model.safetensors").c_str(),
                    (leaky_weights + "/model.safetensors").c_str()),
            0);

  struct Case {
    BadRequestCase expect;
    std::function<void(v1::CreateJobRequest*)> mutate;
  };
  const std::vector<Case> cases = {
      {{"empty request", grpc::StatusCode::INVALID_ARGUMENT, "checkpoint_uri"},
       [](v1::CreateJobRequest* r) { r->Clear(); }},
      {{"bad bits", grpc::StatusCode::INVALID_ARGUMENT, "recipe.bits"},
       [](v1::CreateJobRequest* r) { r->mutable_recipe()->set_bits(5); }},
      {{"bad override bits", grpc::StatusCode::INVALID_ARGUMENT,
        "recipe.overrides[0].bits"},
       [](v1::CreateJobRequest* r) {
         auto* o = r->mutable_recipe()->add_overrides();
         o->set_match("model\\.layers\\.0\\..*");
         o->set_bits(7);
       }},
      {{"bad samples", grpc::StatusCode::INVALID_ARGUMENT,
        "recipe.calibration.samples"},
       [](v1::CreateJobRequest* r) {
         r->mutable_recipe()->mutable_calibration()->set_samples(0);
       }},
      {{"unknown enum", grpc::StatusCode::INVALID_ARGUMENT, "recipe.method"},
       [](v1::CreateJobRequest* r) {
         r->mutable_recipe()->set_method(static_cast<v1::Method>(42));
       }},
      {{"no recipe", grpc::StatusCode::INVALID_ARGUMENT, "recipe"},
       [](v1::CreateJobRequest* r) { r->clear_recipe(); }},
      {{"no calibration", grpc::StatusCode::INVALID_ARGUMENT, "calibration"},
       [](v1::CreateJobRequest* r) { r->clear_calibration(); }},
      {{"unknown calibration hash", grpc::StatusCode::NOT_FOUND,
        "calibration.sha256"},
       [](v1::CreateJobRequest* r) {
         r->mutable_calibration()->set_sha256(std::string(64, 'a'));
       }},
      {{"malformed calibration hash", grpc::StatusCode::INVALID_ARGUMENT,
        "calibration.sha256"},
       [](v1::CreateJobRequest* r) {
         r->mutable_calibration()->set_sha256("ABC");
       }},
      {{"hash mismatch", grpc::StatusCode::FAILED_PRECONDITION,
        "calibration.uri.sha256"},
       [&](v1::CreateJobRequest* r) {
         auto* uri = r->mutable_calibration()->mutable_uri();
         uri->set_uri("file://" + calib_path);
         uri->set_sha256(sha);  // TinyStories' hash, not this file's.
       }},
      {{"calibration outside roots", grpc::StatusCode::PERMISSION_DENIED,
        "calibration.uri.uri"},
       [&](v1::CreateJobRequest* r) {
         auto* uri = r->mutable_calibration()->mutable_uri();
         uri->set_uri("file:///etc/passwd");
         uri->set_sha256(sha);
       }},
      {{"checkpoint outside roots", grpc::StatusCode::PERMISSION_DENIED,
        "checkpoint_uri"},
       [](v1::CreateJobRequest* r) { r->set_checkpoint_uri("file:///etc"); }},
      {{"checkpoint ../ traversal", grpc::StatusCode::PERMISSION_DENIED,
        "checkpoint_uri"},
       [&](v1::CreateJobRequest* r) {
         r->set_checkpoint_uri("file://" + models_ + "/stories260K/../../data");
       }},
      {{"checkpoint symlink out", grpc::StatusCode::PERMISSION_DENIED,
        "checkpoint_uri"},
       [&](v1::CreateJobRequest* r) {
         r->set_checkpoint_uri("file://" + temp_ + "/etc_link");
       }},
      {{"missing checkpoint", grpc::StatusCode::NOT_FOUND, "checkpoint_uri"},
       [&](v1::CreateJobRequest* r) {
         r->set_checkpoint_uri("file://" + models_ + "/no_such_model");
       }},
      {{"not a checkpoint", grpc::StatusCode::NOT_FOUND, "checkpoint_uri"},
       [&](v1::CreateJobRequest* r) {
         r->set_checkpoint_uri("file://" + temp_ + "/not_a_model");
       }},
      {{"not a file uri", grpc::StatusCode::INVALID_ARGUMENT, "checkpoint_uri"},
       [](v1::CreateJobRequest* r) {
         r->set_checkpoint_uri("https://example.com/model");
       }},
      {{"empty label key", grpc::StatusCode::INVALID_ARGUMENT, "labels"},
       [](v1::CreateJobRequest* r) { (*r->mutable_labels())[""] = "x"; }},
      {{"calibration FIFO", grpc::StatusCode::INVALID_ARGUMENT,
        "calibration.uri.uri: " + temp_ + "/calib.fifo is a FIFO"},
       [&](v1::CreateJobRequest* r) {
         auto* uri = r->mutable_calibration()->mutable_uri();
         uri->set_uri("file://" + temp_ + "/calib.fifo");
         uri->set_sha256(sha);
       }},
      {{"calibration directory", grpc::StatusCode::INVALID_ARGUMENT,
        "is a directory, not a regular file"},
       [&](v1::CreateJobRequest* r) {
         auto* uri = r->mutable_calibration()->mutable_uri();
         uri->set_uri("file://" + temp_ + "/calib_dir");
         uri->set_sha256(sha);
       }},
      {{"config.json leading out", grpc::StatusCode::PERMISSION_DENIED,
        "config.json leads outside the allowed roots"},
       [&](v1::CreateJobRequest* r) {
         r->set_checkpoint_uri("file://" + leaky);
       }},
      {{"model.safetensors leading out", grpc::StatusCode::PERMISSION_DENIED,
        "model.safetensors leads outside the allowed roots"},
       [&](v1::CreateJobRequest* r) {
         r->set_checkpoint_uri("file://" + leaky_weights);
       }},
      {{"label too long", grpc::StatusCode::INVALID_ARGUMENT,
        "labels: \"team\": key of 4 and value of 1000 bytes"},
       [](v1::CreateJobRequest* r) {
         (*r->mutable_labels())["team"] = std::string(1000, 'x');
       }},
      {{"request over the bound", grpc::StatusCode::INVALID_ARGUMENT,
        "a CreateJobRequest may hold at most 524288"},
       [](v1::CreateJobRequest* r) {
         // One 4 MB label once made every later GetJob exceed a client's
         // message limit (gRPC's own 4 MiB limit refuses larger requests).
         (*r->mutable_labels())["team"] = std::string(1 << 20, 'x');
       }},
      {{"too many labels", grpc::StatusCode::INVALID_ARGUMENT,
        "labels: 65 labels; at most 64"},
       [](v1::CreateJobRequest* r) {
         r->clear_labels();
         for (int i = 0; i < 65; ++i) {
           (*r->mutable_labels())[absl::StrCat("k", i)] = "v";
         }
       }},
      {{"recipe over the bound", grpc::StatusCode::INVALID_ARGUMENT,
        "recipe.ignore: 2000 patterns; at most 256"},
       [](v1::CreateJobRequest* r) {
         r->mutable_recipe()->clear_ignore();
         for (int i = 0; i < 2000; ++i) {
           r->mutable_recipe()->add_ignore(std::string(200, 'a'));
         }
       }},
      {{"seq_len over max_position_embeddings",
        grpc::StatusCode::INVALID_ARGUMENT,
        "calibration.seq_len: 4096 exceeds the model's "
        "max_position_embeddings (512)"},
       [](v1::CreateJobRequest* r) {
         r->mutable_recipe()->mutable_calibration()->set_seq_len(4096);
       }},
      {{"10,000-character URI", grpc::StatusCode::PERMISSION_DENIED,
        "characters) is outside the allowed roots"},
       [](v1::CreateJobRequest* r) {
         r->set_checkpoint_uri("file:///" + std::string(10000, 'a'));
       }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.expect.name);
    v1::CreateJobRequest request = GoodRequest(sha);
    request.set_request_id("bad-" + c.expect.name);
    c.mutate(&request);
    v1::Job job;
    const grpc::Status status = Create(request, &job);
    EXPECT_EQ(status.error_code(), c.expect.code) << status.error_message();
    EXPECT_NE(status.error_message().find(c.expect.field), std::string::npos)
        << status.error_message();
  }
  EXPECT_TRUE(AllJobs().empty());
  auto unfinished = server_->store().UnfinishedJobs();
  ASSERT_TRUE(unfinished.ok());
  EXPECT_TRUE(unfinished->empty());
  EXPECT_TRUE(absl::IsNotFound(
      server_->store().GetCalibrationSet(Sha256Hex(calib_text)).status()));

  // The same URI with the file's own hash is accepted.
  v1::CreateJobRequest request = GoodRequest(sha);
  auto* uri = request.mutable_calibration()->mutable_uri();
  uri->set_uri("file://" + calib_path);
  uri->set_sha256(Sha256Hex(calib_text));
  v1::Job job;
  const grpc::Status status = Create(request, &job);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(job.calibration_sha256(), Sha256Hex(calib_text));
  EXPECT_EQ(AllJobs().size(), 1u);
  auto recorded = server_->store().GetCalibrationSet(Sha256Hex(calib_text));
  ASSERT_TRUE(recorded.ok()) << recorded.status();
  EXPECT_EQ(recorded->path, calib_path);
  EXPECT_EQ(recorded->size_bytes, static_cast<int64_t>(calib_text.size()));
}

TEST_F(QuantServiceTest, ListJobsPaginatesAndFilters) {
  const std::string sha = UploadTinyStories();
  std::vector<std::string> ids;
  for (int i = 0; i < 5; ++i) {
    v1::CreateJobRequest request = GoodRequest(sha);
    request.set_request_id(absl::StrCat("r", i));
    (*request.mutable_labels())["parity"] = i % 2 == 0 ? "even" : "odd";
    v1::Job job;
    ASSERT_TRUE(Create(request, &job).ok());
    ids.push_back(job.id());
  }
  v1::ListJobsRequest request;
  request.set_page_size(2);
  std::vector<int> page_sizes;
  std::vector<std::string> listed;
  for (int pages = 0; pages < 10; ++pages) {
    grpc::ClientContext context;
    v1::ListJobsResponse response;
    ASSERT_TRUE(stub_->ListJobs(&context, request, &response).ok());
    page_sizes.push_back(response.jobs_size());
    for (const v1::Job& job : response.jobs()) listed.push_back(job.id());
    if (response.next_page_token().empty()) break;
    request.set_page_token(response.next_page_token());
  }
  EXPECT_EQ(page_sizes, (std::vector<int>{2, 2, 1}));
  // Newest first, each once.
  EXPECT_EQ(listed, std::vector<std::string>(ids.rbegin(), ids.rend()));

  v1::ListJobsRequest by_label;
  (*by_label.mutable_labels())["parity"] = "odd";
  const std::vector<v1::Job> odd = AllJobs(by_label);
  ASSERT_EQ(odd.size(), 2u);
  EXPECT_EQ(odd[0].id(), ids[3]);
  EXPECT_EQ(odd[1].id(), ids[1]);

  grpc::ClientContext context;
  v1::CancelJobRequest cancel;
  cancel.set_id(ids[2]);
  v1::Job cancelled;
  ASSERT_TRUE(stub_->CancelJob(&context, cancel, &cancelled).ok());
  v1::ListJobsRequest by_state;
  by_state.set_state(v1::JOB_STATE_CANCELLED);
  const std::vector<v1::Job> done = AllJobs(by_state);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].id(), ids[2]);
  by_state.set_state(v1::JOB_STATE_QUEUED);
  EXPECT_EQ(AllJobs(by_state).size(), 4u);

  grpc::ClientContext bad_context;
  v1::ListJobsRequest bad;
  bad.set_page_token("not-a-token");
  v1::ListJobsResponse response;
  const grpc::Status status = stub_->ListJobs(&bad_context, bad, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("page_token"), std::string::npos)
      << status.error_message();
}

TEST_F(QuantServiceTest, CancelEndsTheJobCancelled) {
  const std::string sha = UploadTinyStories();
  v1::Job job;
  ASSERT_TRUE(Create(GoodRequest(sha), &job).ok());
  v1::CancelJobRequest cancel;
  cancel.set_id(job.id());
  v1::Job cancelled;
  {
    grpc::ClientContext context;
    ASSERT_TRUE(stub_->CancelJob(&context, cancel, &cancelled).ok());
  }
  EXPECT_EQ(cancelled.state(), v1::JOB_STATE_CANCELLED);
  {
    grpc::ClientContext context;  // Again: still CANCELLED, no error.
    ASSERT_TRUE(stub_->CancelJob(&context, cancel, &cancelled).ok());
    EXPECT_EQ(cancelled.state(), v1::JOB_STATE_CANCELLED);
  }
  v1::GetJobRequest get;
  get.set_id(job.id());
  v1::Job fetched;
  {
    grpc::ClientContext context;
    ASSERT_TRUE(stub_->GetJob(&context, get, &fetched).ok());
    EXPECT_EQ(fetched.state(), v1::JOB_STATE_CANCELLED);
  }
  auto events = server_->store().ListEvents(job.id(), 0, 0);
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 2u);  // QUEUED, then CANCELLED once.
  EXPECT_NE((*events)[1].payload_json.find("CANCELLED"), std::string::npos);

  cancel.set_id("job-999999");
  {
    grpc::ClientContext context;
    const grpc::Status status = stub_->CancelJob(&context, cancel, &cancelled);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
    EXPECT_NE(status.error_message().find("job-999999"), std::string::npos);
  }
  get.set_id("");
  {
    grpc::ClientContext context;
    const grpc::Status status = stub_->GetJob(&context, get, &fetched);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(status.error_message().find("id"), std::string::npos);
  }
}

TEST_F(QuantServiceTest, HealthAndReflectionAreServed) {
  for (const std::string service :
       {"", "quant.v1.QuantService", "quant.v1.WorkerService"}) {
    const absl::StatusOr<int> serving = CheckHealth(channel_, service);
    ASSERT_TRUE(serving.ok()) << service << ": " << serving.status();
    EXPECT_EQ(*serving, 1) << service;  // SERVING
  }
  std::string error;
  const std::string services =
      testing::ListServicesViaReflection(channel_, &error);
  EXPECT_NE(services.find("quant.v1.QuantService"), std::string::npos) << error;
  EXPECT_NE(services.find("quant.v1.WorkerService"), std::string::npos)
      << error;
  EXPECT_NE(services.find("grpc.health.v1.Health"), std::string::npos) << error;
}

TEST_F(QuantServiceTest, WatchAndReportNameTheMissingJob) {
  {
    grpc::ClientContext context;
    v1::WatchJobRequest watch;
    watch.set_id("job-000042");
    auto reader = stub_->WatchJob(&context, watch);
    v1::JobEvent event;
    EXPECT_FALSE(reader->Read(&event));
    const grpc::Status status = reader->Finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
    EXPECT_NE(status.error_message().find("job-000042"), std::string::npos);
  }
  {
    grpc::ClientContext context;
    v1::GetJobReportRequest request;
    v1::JobReport report;
    const grpc::Status status = stub_->GetJobReport(&context, request, &report);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(status.error_message().find("id"), std::string::npos);
  }
}

TEST_F(QuantServiceTest, WatchOfAQueuedJobStartsWithItsStateAndEndsOnCancel) {
  const std::string sha256 = UploadTinyStories();
  v1::Job job;
  ASSERT_TRUE(Create(GoodRequest(sha256), &job).ok());
  grpc::ClientContext context;
  v1::WatchJobRequest watch;
  watch.set_id(job.id());
  auto reader = stub_->WatchJob(&context, watch);
  v1::JobEvent first;
  ASSERT_TRUE(reader->Read(&first));
  ASSERT_TRUE(first.has_job());
  EXPECT_EQ(first.job().id(), job.id());
  EXPECT_EQ(first.job().state(), v1::JOB_STATE_QUEUED);
  {
    grpc::ClientContext cancel_context;
    v1::CancelJobRequest cancel;
    cancel.set_id(job.id());
    v1::Job cancelled;
    ASSERT_TRUE(stub_->CancelJob(&cancel_context, cancel, &cancelled).ok());
  }
  v1::JobEvent event;
  v1::JobState last = v1::JOB_STATE_UNSPECIFIED;
  while (reader->Read(&event)) {
    if (event.has_job()) last = event.job().state();
  }
  EXPECT_TRUE(reader->Finish().ok());
  EXPECT_EQ(last, v1::JOB_STATE_CANCELLED);

  // Its report so far: no layers, no verdict.
  grpc::ClientContext report_context;
  v1::GetJobReportRequest request;
  request.set_id(job.id());
  v1::JobReport report;
  ASSERT_TRUE(stub_->GetJobReport(&report_context, request, &report).ok());
  EXPECT_EQ(report.layers_size(), 0);
  EXPECT_EQ(report.verdict(), v1::VERDICT_UNSPECIFIED);
  EXPECT_EQ(report.job().state(), v1::JOB_STATE_CANCELLED);
  // It has no report page.
  grpc::ClientContext html_context;
  request.set_html(true);
  const grpc::Status html =
      stub_->GetJobReport(&html_context, request, &report);
  EXPECT_EQ(html.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(
      html.error_message().find("html: job " + job.id() + " is CANCELLED"),
      std::string::npos)
      << html.error_message();
}

TEST_F(QuantServiceTest, RetryRequeuesOnlyAFailedJobAndWakesAWaitingWorker) {
  const std::string sha256 = UploadTinyStories();
  v1::Job job;
  v1::Job other;
  ASSERT_TRUE(Create(GoodRequest(sha256), &job).ok());
  ASSERT_TRUE(Create(GoodRequest(sha256), &other).ok());
  auto retry = [&](const std::string& id, v1::Job* out) {
    grpc::ClientContext context;
    v1::RetryJobRequest request;
    request.set_job_id(id);
    return stub_->RetryJob(&context, request, out);
  };
  v1::Job retried;
  grpc::Status status = retry(other.id(), &retried);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(status.error_message().find("QUEUED"), std::string::npos)
      << status.error_message();
  status = retry("job-999999", &retried);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(status.error_message().find("job-999999"), std::string::npos);
  status = retry("", &retried);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("job_id"), std::string::npos);
  {
    grpc::ClientContext context;
    v1::CancelJobRequest cancel;
    cancel.set_id(other.id());
    v1::Job cancelled;
    ASSERT_TRUE(stub_->CancelJob(&context, cancel, &cancelled).ok());
  }
  ASSERT_TRUE(server_->lifecycle()
                  .FailJob(job.id(), "model.safetensors: disk full")
                  .ok());

  // A worker waits for work; none is runnable until the retry.
  auto worker = v1::WorkerService::NewStub(channel_);
  std::string worker_id;
  {
    grpc::ClientContext context;
    v1::RegisterWorkerRequest request;
    request.set_name("retry-test");
    request.set_slots(1);
    v1::RegisterWorkerResponse response;
    ASSERT_TRUE(worker->RegisterWorker(&context, request, &response).ok());
    worker_id = response.worker_id();
  }
  std::atomic<bool> returned{false};
  v1::LeaseTaskResponse leased;
  grpc::Status lease_status;
  std::thread poll([&] {
    grpc::ClientContext context;
    v1::LeaseTaskRequest request;
    request.set_worker_id(worker_id);
    request.set_wait_ms(15'000);
    lease_status = worker->LeaseTask(&context, request, &leased);
    returned = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_FALSE(returned) << "a task was leased from a FAILED job";
  const auto retried_at = std::chrono::steady_clock::now();
  status = retry(job.id(), &retried);
  poll.join();
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(retried.state(), v1::JOB_STATE_QUEUED);
  EXPECT_EQ(retried.error(), "");
  ASSERT_TRUE(lease_status.ok()) << lease_status.error_message();
  ASSERT_TRUE(leased.has_task()) << "the waiting worker got nothing";
  EXPECT_EQ(leased.task().job_id(), job.id());
  EXPECT_EQ(leased.task().index(), 0);
  EXPECT_LT(std::chrono::steady_clock::now() - retried_at,
            std::chrono::seconds(5));

  // The event log records the retry and why the run before failed.
  auto events = server_->store().ListEvents(job.id(), 0, 0);
  ASSERT_TRUE(events.ok());
  bool recorded = false;
  for (const store::Event& event : *events) {
    if (event.payload_json.find("\"retried_after\":\"model.safetensors: "
                                "disk full\"") != std::string::npos &&
        event.payload_json.find("QUEUED") != std::string::npos) {
      recorded = true;
    }
  }
  EXPECT_TRUE(recorded);
  // Running again: not FAILED, so not retried twice.
  status = retry(job.id(), &retried);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(status.error_message().find("RUNNING"), std::string::npos)
      << status.error_message();
}

}  // namespace
}  // namespace quant

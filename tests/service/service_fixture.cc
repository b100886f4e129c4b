// ServiceHarness and the cached reference run.
#include "tests/service/service_fixture.h"

#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/recipe_convert.h"
#include "core/base/clock.h"
#include "core/base/file_util.h"
#include "core/base/sha256.h"
#include "core/pipeline/local_pipeline.h"
#include "core/recipe/recipe.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "server/store/sqlite_job_store.h"
#include "tests/support/test_env.h"

namespace quant::testing {
namespace {

absl::Status FromGrpc(const grpc::Status& status, const std::string& what) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      absl::StrCat(what, ": ", status.error_message()));
}

// One unary call about job `id` (GetJob, CancelJob, ...), given 10 s.
template <typename Request, typename Response>
absl::StatusOr<Response> CallById(
    v1::QuantService::Stub* stub,
    grpc::Status (v1::QuantService::Stub::*method)(grpc::ClientContext*,
                                                   const Request&, Response*),
    const std::string& what, const std::string& id,
    const std::string& client_token) {
  grpc::ClientContext context;
  if (!client_token.empty()) {
    context.AddMetadata("authorization", "Bearer " + client_token);
  }
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(10));
  Request request;
  request.set_id(id);
  Response response;
  absl::Status status = FromGrpc((stub->*method)(&context, request, &response),
                                 absl::StrCat(what, " ", id));
  if (!status.ok()) return status;
  return response;
}

bool Terminal(v1::JobState state) {
  return state == v1::JOB_STATE_SUCCEEDED || state == v1::JOB_STATE_FAILED ||
         state == v1::JOB_STATE_CANCELLED;
}

}  // namespace

std::string SmallRecipePath() {
  return FixturesDir() + "/service/stories260k-gptq-small.yaml";
}

std::string CheckpointDir() {
  return RealPath(SharedPath("models/stories260K/hf-f32"));
}

std::string CalibrationPath() {
  return RealPath(SharedPath("data/tinystories_val.txt"));
}

absl::StatusOr<Reference> ReferenceRun(const std::string& recipe_path) {
  // One local run per recipe per binary: it costs as much as a job.
  static std::mutex mu;
  static auto* cache = new std::map<std::string, Reference>();
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = cache->find(recipe_path); it != cache->end()) {
    return it->second;
  }
  auto recipe = LoadRecipe(recipe_path);
  if (!recipe.ok()) return recipe.status();
  LocalQuantizeOptions local;
  local.checkpoint_dir = CheckpointDir();
  local.calibration_path = CalibrationPath();
  local.out_dir = MakeTempDir() + "/reference";
  local.recipe = *recipe;
  const auto started = std::chrono::steady_clock::now();
  auto result = RunLocalQuantization(local);
  if (!result.ok()) return result.status();
  Reference reference;
  reference.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started)
          .count();
  auto tensors = ReadFileToString(local.out_dir + "/model.safetensors");
  if (!tensors.ok()) return tensors.status();
  reference.tensors = *std::move(tensors);
  (*cache)[recipe_path] = reference;
  return reference;
}

ServiceHarness::ServiceHarness(std::string dir) : dir_(std::move(dir)) {}

ServiceHarness::~ServiceHarness() { KillQuantd(); }

std::vector<std::string> ServiceHarness::QuantdArgs(
    const std::string& listen) const {
  return {BinaryDir() + "/server/quantd", "--listen=" + listen,
          "--data-dir=" + dir_ + "/data",
          "--artifact-root=file://" + dir_ + "/artifacts",
          "--allowed-roots=" + RealPath(SharedDir()) + "," + dir_};
}

absl::Status ServiceHarness::StartQuantd(std::vector<std::string> args,
                                         std::vector<std::string> extra_env) {
  quantd_ = std::make_unique<ChildProcess>(
      std::move(args), std::move(extra_env), dir_ + "/quantd.log");
  const std::string line = quantd_->ReadLine(120'000);
  absl::StrAppend(&quantd_stdout_, line, "\n");
  const std::string prefix = "quantd: listening on ";
  if (!absl::StartsWith(line, prefix)) {
    return absl::UnavailableError(absl::StrCat(
        "quantd said \"", line, "\"; its log:\n", Log("quantd.log")));
  }
  address_ = line.substr(prefix.size());
  stub_ = v1::QuantService::NewStub(
      grpc::CreateChannel(address_, grpc::InsecureChannelCredentials()));
  return absl::OkStatus();
}

void ServiceHarness::KillQuantd() {
  if (quantd_ == nullptr) return;
  quantd_->Signal(SIGKILL);
  quantd_->Wait(30'000);
  quantd_stdout_ += quantd_->ReadToEnd(5'000);
  quantd_.reset();
}

absl::Status ServiceHarness::StopQuantd() {
  if (quantd_ == nullptr) return absl::OkStatus();
  quantd_->Signal(SIGTERM);
  const int status = quantd_->Wait(120'000);
  quantd_stdout_ += quantd_->ReadToEnd(5'000);
  quantd_.reset();
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::InternalError(absl::StrCat("quantd did not exit 0 (status ",
                                            status, "); its log:\n",
                                            Log("quantd.log")));
  }
  return absl::OkStatus();
}

std::unique_ptr<ChildProcess> ServiceHarness::StartWorker(
    const std::string& name, std::vector<std::string> extra_args) {
  return StartWrappedWorker({}, name, std::move(extra_args));
}

std::unique_ptr<ChildProcess> ServiceHarness::StartWrappedWorker(
    std::vector<std::string> wrapper, const std::string& name,
    std::vector<std::string> extra_args) {
  std::vector<std::string> args = std::move(wrapper);
  args.insert(args.end(),
              {BinaryDir() + "/worker/quant-worker", "--server=" + address_,
               "--name=" + name, "--lease_wait_ms=1000"});
  for (std::string& a : extra_args) args.push_back(std::move(a));
  return std::make_unique<ChildProcess>(
      std::move(args), std::vector<std::string>{}, dir_ + "/" + name + ".log");
}

void ServiceHarness::Authorize(grpc::ClientContext* context) const {
  if (!client_token_.empty()) {
    context->AddMetadata("authorization", "Bearer " + client_token_);
  }
}

std::string ServiceHarness::Log(const std::string& name) const {
  auto text = ReadFileToString(dir_ + "/" + name);
  return text.ok() ? *text : "";
}

absl::Status ServiceHarness::WaitForLog(const std::string& name,
                                        const std::string& text,
                                        int timeout_s) const {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  while (Log(name).find(text) == std::string::npos) {
    if (std::chrono::steady_clock::now() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("never saw \"", text, "\" in ", name, ":\n", Log(name)));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::CreateJobRequest> ServiceHarness::Request(
    const std::string& request_id, const std::string& recipe_path) const {
  auto recipe = LoadRecipe(recipe_path);
  if (!recipe.ok()) return recipe.status();
  auto request = RecipeRequest(*recipe);
  if (!request.ok()) return request.status();
  request->set_request_id(request_id);
  (*request->mutable_labels())["suite"] = "soak";
  return request;
}

absl::StatusOr<v1::Job> ServiceHarness::Create(const std::string& request_id,
                                               const std::string& recipe_path) {
  auto request = Request(request_id, recipe_path);
  if (!request.ok()) return request.status();
  return CreateJob(*request);
}

absl::StatusOr<v1::CreateJobRequest> ServiceHarness::RecipeRequest(
    const Recipe& recipe) const {
  auto sha = Sha256File(CalibrationPath());
  if (!sha.ok()) return sha.status();
  v1::CreateJobRequest request;
  request.set_checkpoint_uri("file://" + CheckpointDir());
  *request.mutable_recipe() = common::RecipeToProto(recipe);
  request.mutable_calibration()->mutable_uri()->set_uri("file://" +
                                                        CalibrationPath());
  request.mutable_calibration()->mutable_uri()->set_sha256(*sha);
  return request;
}

absl::StatusOr<v1::Job> ServiceHarness::CreateJob(
    const v1::CreateJobRequest& request) {
  grpc::ClientContext context;
  Authorize(&context);
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(60));
  v1::Job job;
  absl::Status status =
      FromGrpc(stub_->CreateJob(&context, request, &job), "CreateJob");
  if (!status.ok()) return status;
  return job;
}

absl::StatusOr<v1::Job> ServiceHarness::Get(const std::string& id) {
  return CallById<v1::GetJobRequest, v1::Job>(stub_.get(),
                                              &v1::QuantService::Stub::GetJob,
                                              "GetJob", id, client_token_);
}

absl::StatusOr<v1::Job> ServiceHarness::WaitForEnd(const std::string& id,
                                                   int timeout_s) {
  return Poll(id, nullptr, timeout_s, /*strict=*/false);
}

absl::StatusOr<v1::Job> ServiceHarness::WaitFor(
    const std::string& id, const std::function<bool(const v1::Job&)>& done,
    int timeout_s) {
  return Poll(id, done, timeout_s, /*strict=*/true);
}

absl::StatusOr<v1::Job> ServiceHarness::Poll(
    const std::string& id, const std::function<bool(const v1::Job&)>& done,
    int timeout_s, bool strict) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  while (true) {
    auto job = Get(id);
    if (strict && !job.ok()) return job;
    if (job.ok() && (Terminal(job->state()) || (done && done(*job)))) {
      return job;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "job ", id, " did not end within ", timeout_s, " s (last: ",
          job.ok() ? v1::JobState_Name(job->state())
                   : std::string(job.status().message()),
          "); quantd log:\n", Log("quantd.log")));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

absl::StatusOr<std::vector<v1::JobEvent>> ServiceHarness::WatchToEnd(
    const std::string& id) {
  grpc::ClientContext context;
  Authorize(&context);
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::minutes(20));
  v1::WatchJobRequest request;
  request.set_id(id);
  auto reader = stub_->WatchJob(&context, request);
  std::vector<v1::JobEvent> events;
  v1::JobEvent event;
  while (reader->Read(&event)) events.push_back(event);
  absl::Status status = FromGrpc(reader->Finish(), "WatchJob " + id);
  if (!status.ok()) return status;
  return events;
}

absl::StatusOr<v1::JobReport> ServiceHarness::Report(const std::string& id) {
  return CallById<v1::GetJobReportRequest, v1::JobReport>(
      stub_.get(), &v1::QuantService::Stub::GetJobReport, "GetJobReport", id,
      client_token_);
}

absl::StatusOr<std::string> ServiceHarness::ReportHtml(const std::string& id) {
  grpc::ClientContext context;
  Authorize(&context);
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(10));
  v1::GetJobReportRequest request;
  request.set_id(id);
  request.set_html(true);
  v1::JobReport report;
  absl::Status status =
      FromGrpc(stub_->GetJobReport(&context, request, &report),
               absl::StrCat("GetJobReport html ", id));
  if (!status.ok()) return status;
  return report.html();
}

absl::StatusOr<v1::Job> ServiceHarness::Cancel(const std::string& id) {
  return CallById<v1::CancelJobRequest, v1::Job>(
      stub_.get(), &v1::QuantService::Stub::CancelJob, "CancelJob", id,
      client_token_);
}

absl::StatusOr<std::vector<v1::Job>> ServiceHarness::ListAll() {
  std::vector<v1::Job> jobs;
  v1::ListJobsRequest request;
  request.set_page_size(2);  // Several pages: pagination must not skip.
  do {
    grpc::ClientContext context;
    Authorize(&context);
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(10));
    v1::ListJobsResponse page;
    absl::Status status =
        FromGrpc(stub_->ListJobs(&context, request, &page), "ListJobs");
    if (!status.ok()) return status;
    for (const v1::Job& job : page.jobs()) jobs.push_back(job);
    request.set_page_token(page.next_page_token());
  } while (!request.page_token().empty());
  return jobs;
}

absl::StatusOr<std::vector<store::Task>> ServiceHarness::StoredTasks(
    const std::string& id) {
  if (quantd_ != nullptr && quantd_->running()) {
    return absl::FailedPreconditionError("StoredTasks: quantd is running");
  }
  return ReadStoredTasks(id);
}

absl::StatusOr<std::vector<store::Task>> ServiceHarness::ReadStoredTasks(
    const std::string& id) const {
  auto opened = store::SqliteJobStore::Open(dir_ + "/data/quantd.db",
                                            SystemClock::Default());
  if (!opened.ok()) return opened.status();
  return (*opened)->ListTasks(id);
}

absl::StatusOr<std::string> ServiceHarness::JobTensors(
    const std::string& id) const {
  return JobFile(id, "model.safetensors");
}

absl::StatusOr<std::string> ServiceHarness::JobFile(
    const std::string& id, const std::string& name) const {
  return ReadFileToString(dir_ + "/artifacts/jobs/" + id + "/checkpoint/" +
                          name);
}

}  // namespace quant::testing

// RunLoadTest: quantd, the clients, the drain and the lost-job check.
#include "bench/load/load_run.h"

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bench/load/job_registry.h"
#include "bench/load/load_client.h"
#include "bench/load/quantd_process.h"
#include "bench/load/small_recipe.h"
#include "bench/load/temp_dir.h"
#include "common/recipe_convert.h"
#include "core/base/sha256.h"
#include "grpcpp/client_context.h"
#include "quant/v1/service.grpc.pb.h"

namespace quant::load {
namespace {

constexpr char kModel[] = "models/stories260K/hf-f32";
constexpr char kCalibration[] = "data/tinystories_val.txt";

// A small job (SmallRtnRecipe) by file:// URIs.
v1::CreateJobRequest BaseRequest(const std::string& checkpoint_dir,
                                 const std::string& calibration_path,
                                 const std::string& calibration_sha256) {
  v1::CreateJobRequest request;
  request.set_checkpoint_uri("file://" + checkpoint_dir);
  *request.mutable_recipe() = common::RecipeToProto(SmallRtnRecipe(4));
  request.mutable_calibration()->mutable_uri()->set_uri("file://" +
                                                        calibration_path);
  request.mutable_calibration()->mutable_uri()->set_sha256(calibration_sha256);
  (*request.mutable_labels())["suite"] = "load";
  return request;
}

grpc::Status GetJob(v1::QuantService::Stub& stub, const std::string& id,
                    v1::Job* job) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
  v1::GetJobRequest request;
  request.set_id(id);
  return stub.GetJob(&context, request, job);
}

// Polls the jobs not yet seen terminal until none is left or `deadline`.
void Drain(v1::QuantService::Stub& stub, JobRegistry& registry,
           absl::Time deadline) {
  const std::vector<std::string> all = registry.Ids();
  while (true) {
    const std::vector<std::string> pending = registry.Pending(all);
    if (pending.empty() || absl::Now() >= deadline) return;
    for (const std::string& id : pending) {
      v1::Job job;
      // Failures here are found again, and counted, by the final check.
      if (GetJob(stub, id, &job).ok()) registry.Observe(id, job.state());
    }
    absl::SleepFor(absl::Milliseconds(250));
  }
}

// Every created job must still be there, by id and in the full listing,
// and none may have failed. Fills the job counts of `result`.
void CheckNothingLost(v1::QuantService::Stub& stub, const JobRegistry& registry,
                      LatencyRecorder& recorder, LoadResult& result) {
  const std::vector<std::string> created = registry.Ids();
  std::set<std::string> lost;
  for (const std::string& id : created) {
    v1::Job job;
    const grpc::Status status = GetJob(stub, id, &job);
    if (status.error_code() == grpc::StatusCode::NOT_FOUND) {
      lost.insert(id);
      recorder.RecordOtherError(
          absl::StrCat("final GetJob: job ", id, " not found"));
      continue;
    }
    if (!status.ok()) {
      recorder.RecordOtherError(
          absl::StrCat("final GetJob ", id, ": ", status.error_message()));
      continue;
    }
    switch (job.state()) {
      case v1::JOB_STATE_SUCCEEDED:
        ++result.jobs_completed;
        break;
      case v1::JOB_STATE_FAILED:
      case v1::JOB_STATE_CANCELLED:
        ++result.jobs_failed;
        recorder.RecordOtherError(absl::StrCat("job ", id, " ended ",
                                               v1::JobState_Name(job.state()),
                                               ": ", job.error()));
        break;
      default:
        ++result.jobs_pending;
        break;
    }
  }
  // The whole listing, page by page: each job exactly once, and only ours.
  std::map<std::string, int> listed;
  std::string token;
  for (int page = 0; page < 100'000; ++page) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
    v1::ListJobsRequest request;
    request.set_page_size(5);
    request.set_page_token(token);
    v1::ListJobsResponse response;
    const grpc::Status status = stub.ListJobs(&context, request, &response);
    if (!status.ok()) {
      recorder.RecordOtherError(absl::StrCat("final ListJobs page ", page, ": ",
                                             status.error_message()));
      return;
    }
    for (const v1::Job& job : response.jobs()) ++listed[job.id()];
    token = response.next_page_token();
    if (token.empty()) break;
  }
  const std::set<std::string> ours(created.begin(), created.end());
  for (const std::string& id : created) {
    if (listed.count(id) == 0 && lost.insert(id).second) {
      recorder.RecordOtherError(
          absl::StrCat("final ListJobs: job ", id, " missing"));
    }
  }
  for (const auto& [id, times] : listed) {
    if (times > 1) {
      recorder.RecordOtherError(absl::StrCat("final ListJobs: job ", id,
                                             " listed ", times, " times"));
    }
    if (ours.count(id) == 0) {
      recorder.RecordOtherError(
          absl::StrCat("final ListJobs: job ", id, " was never created"));
    }
  }
  result.jobs_lost = static_cast<int64_t>(lost.size());
}

}  // namespace

absl::StatusOr<LoadResult> RunLoadTest(const LoadOptions& options) {
  if (options.clients < 1) {
    return absl::InvalidArgumentError("clients: must be at least 1");
  }
  if (options.workers < 1) {
    return absl::InvalidArgumentError("workers: must be at least 1");
  }
  absl::StatusOr<std::string> shared = RealPath(options.shared_dir);
  if (!shared.ok()) {
    return absl::NotFoundError(
        absl::StrCat("shared: no such folder: ", options.shared_dir));
  }
  absl::StatusOr<std::string> checkpoint =
      RealPath(absl::StrCat(*shared, "/", kModel));
  if (!checkpoint.ok()) return checkpoint.status();
  absl::StatusOr<std::string> calibration =
      RealPath(absl::StrCat(*shared, "/", kCalibration));
  if (!calibration.ok()) return calibration.status();
  absl::StatusOr<std::string> sha = Sha256File(*calibration);
  if (!sha.ok()) return sha.status();
  absl::StatusOr<std::string> temp = MakeTempDir("quant-load");
  if (!temp.ok()) return temp.status();

  LoopbackQuantdOptions quantd_options;
  quantd_options.quantd_path = options.quantd_path;
  quantd_options.temp_dir = *temp;
  quantd_options.allowed_roots = absl::StrCat(*shared, ",", *temp);
  quantd_options.local_workers = options.workers;
  absl::StatusOr<std::unique_ptr<QuantdProcess>> quantd =
      StartLoopbackQuantd(quantd_options);
  if (!quantd.ok()) return quantd.status();

  LoadResult result;
  result.clients = options.clients;
  result.workers = options.workers;
  JobRegistry registry;
  LatencyRecorder recorder;
  const v1::CreateJobRequest base =
      BaseRequest(*checkpoint, *calibration, *sha);

  std::atomic<bool> stop{false};
  std::vector<std::unique_ptr<LoadClient>> clients;
  for (int i = 0; i < options.clients; ++i) {
    ClientOptions client;
    client.index = i;
    client.seed = options.seed * 1000 + static_cast<uint64_t>(i);
    client.max_pending = options.max_pending_per_client;
    client.base_request = base;
    clients.push_back(std::make_unique<LoadClient>(
        MakeClientChannel((*quantd)->address()), client, &registry, &recorder));
  }
  const absl::Time start = absl::Now();
  std::vector<std::thread> threads;
  for (auto& client : clients) {
    threads.emplace_back([&client, &stop] { client->Run(stop); });
  }
  absl::SleepFor(options.duration);
  stop = true;
  for (std::thread& thread : threads) thread.join();
  result.seconds = absl::ToDoubleSeconds(absl::Now() - start);

  auto stub =
      v1::QuantService::NewStub(MakeClientChannel((*quantd)->address()));
  const absl::Time drain_start = absl::Now();
  Drain(*stub, registry, drain_start + options.drain);
  result.drain_seconds = absl::ToDoubleSeconds(absl::Now() - drain_start);
  result.jobs_created = static_cast<int64_t>(registry.size());
  CheckNothingLost(*stub, registry, recorder, result);

  if (absl::Status stopped = (*quantd)->Stop(absl::Seconds(60));
      !stopped.ok()) {
    recorder.RecordOtherError(std::string(stopped.message()));
  }
  quantd->reset();

  result.rpcs = recorder.Summaries();
  result.errors = recorder.TotalErrors();
  result.error_samples = recorder.ErrorSamples();
  if (options.keep_temp || !result.ok()) {
    result.temp_dir = *temp;
  } else {
    std::error_code ignored;
    std::filesystem::remove_all(*temp, ignored);
  }
  return result;
}

}  // namespace quant::load

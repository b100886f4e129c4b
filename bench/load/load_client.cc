// LoadClient: the call mix of one client thread.
#include "bench/load/load_client.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"

namespace quant::load {
namespace {

std::string Describe(const grpc::Status& status) {
  return absl::StrCat("status ", static_cast<int>(status.error_code()), ": ",
                      status.error_message());
}

}  // namespace

std::shared_ptr<grpc::Channel> MakeClientChannel(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(),
                                   args);
}

LoadClient::LoadClient(std::shared_ptr<grpc::Channel> channel,
                       ClientOptions options, JobRegistry* registry,
                       LatencyRecorder* recorder)
    : stub_(v1::QuantService::NewStub(std::move(channel))),
      options_(std::move(options)),
      registry_(registry),
      recorder_(recorder),
      rng_(options_.seed) {}

void LoadClient::Prepare(grpc::ClientContext* context) const {
  context->set_deadline(
      absl::ToChronoTime(absl::Now() + options_.rpc_deadline));
}

void LoadClient::Run(const std::atomic<bool>& stop) {
  // Weights of the reads and replays once a job exists.
  std::discrete_distribution<int> pick({10, 35, 20, 15, 20});
  std::uniform_real_distribution<double> unit(0, 1);
  while (!stop.load()) {
    const bool may_create =
        static_cast<int>(registry_->Pending(own_ids_).size()) <
        options_.max_pending;
    if (registry_->size() == 0 || (may_create && unit(rng_) < 0.25)) {
      CreateNew();
      continue;
    }
    switch (pick(rng_)) {
      case 0:
        Replay();
        break;
      case 1:
        GetJob();
        break;
      case 2:
        ListJobs();
        break;
      case 3:
        WatchJob();
        break;
      default:
        GetJobReport();
        break;
    }
  }
}

void LoadClient::CreateNew() {
  v1::CreateJobRequest request = options_.base_request;
  request.set_request_id(
      absl::StrCat("load-", options_.index, "-", next_request_++));
  (*request.mutable_labels())["client"] = absl::StrCat(options_.index);
  grpc::ClientContext context;
  Prepare(&context);
  v1::Job job;
  const absl::Time start = absl::Now();
  const grpc::Status status = stub_->CreateJob(&context, request, &job);
  recorder_->Record(Rpc::kCreateJob, absl::Now() - start);
  if (!status.ok()) {
    recorder_->RecordError(Rpc::kCreateJob, Describe(status));
    return;
  }
  if (job.id().empty() || job.request_id() != request.request_id()) {
    recorder_->RecordError(Rpc::kCreateJob,
                           "the job lacks its id or request_id");
    return;
  }
  if (!registry_->Add({job.id(), request})) {
    recorder_->RecordError(
        Rpc::kCreateJob, absl::StrCat("new request_id ", request.request_id(),
                                      " returned the existing job ", job.id()));
    return;
  }
  own_ids_.push_back(job.id());
}

void LoadClient::Replay() {
  std::optional<CreatedJob> earlier = registry_->Random(rng_);
  if (!earlier.has_value()) return;
  grpc::ClientContext context;
  Prepare(&context);
  v1::Job job;
  const absl::Time start = absl::Now();
  const grpc::Status status =
      stub_->CreateJob(&context, earlier->request, &job);
  recorder_->Record(Rpc::kCreateJobReplay, absl::Now() - start);
  if (!status.ok()) {
    recorder_->RecordError(Rpc::kCreateJobReplay, Describe(status));
    return;
  }
  if (job.id() != earlier->id) {
    recorder_->RecordError(
        Rpc::kCreateJobReplay,
        absl::StrCat("replay of ", earlier->request.request_id(),
                     " returned job ", job.id(), ", not ", earlier->id));
    return;
  }
  registry_->Observe(job.id(), job.state());
}

void LoadClient::GetJob() {
  // Mostly its own pending jobs, as a client polling for completion would.
  std::string id;
  const std::vector<std::string> pending = registry_->Pending(own_ids_);
  if (!pending.empty() && rng_() % 4 != 0) {
    id = pending[rng_() % pending.size()];
  } else if (std::optional<CreatedJob> any = registry_->Random(rng_)) {
    id = any->id;
  } else {
    return;
  }
  grpc::ClientContext context;
  Prepare(&context);
  v1::GetJobRequest request;
  request.set_id(id);
  v1::Job job;
  const absl::Time start = absl::Now();
  const grpc::Status status = stub_->GetJob(&context, request, &job);
  recorder_->Record(Rpc::kGetJob, absl::Now() - start);
  if (!status.ok()) {
    recorder_->RecordError(Rpc::kGetJob,
                           absl::StrCat("job ", id, ": ", Describe(status)));
    return;
  }
  if (job.id() != id) {
    recorder_->RecordError(Rpc::kGetJob,
                           absl::StrCat("asked for ", id, ", got ", job.id()));
    return;
  }
  if (job.state() == v1::JOB_STATE_FAILED ||
      job.state() == v1::JOB_STATE_CANCELLED) {
    recorder_->RecordError(
        Rpc::kGetJob,
        absl::StrCat("job ", id, " ended in state ",
                     v1::JobState_Name(job.state()), ": ", job.error()));
  }
  registry_->Observe(id, job.state());
}

void LoadClient::ListJobs() {
  // The first few pages, as a dashboard would.
  std::string token;
  for (int page = 0; page < 3; ++page) {
    grpc::ClientContext context;
    Prepare(&context);
    v1::ListJobsRequest request;
    request.set_page_size(5);
    request.set_page_token(token);
    v1::ListJobsResponse response;
    const absl::Time start = absl::Now();
    const grpc::Status status = stub_->ListJobs(&context, request, &response);
    recorder_->Record(Rpc::kListJobs, absl::Now() - start);
    if (!status.ok()) {
      recorder_->RecordError(Rpc::kListJobs, Describe(status));
      return;
    }
    if (response.jobs_size() > 5) {
      recorder_->RecordError(
          Rpc::kListJobs,
          absl::StrCat("page of ", response.jobs_size(), " jobs, asked 5"));
      return;
    }
    for (const v1::Job& job : response.jobs()) {
      if (job.id().empty()) {
        recorder_->RecordError(Rpc::kListJobs, "a listed job has no id");
        return;
      }
      registry_->Observe(job.id(), job.state());
    }
    token = response.next_page_token();
    if (token.empty()) return;
  }
}

void LoadClient::WatchJob() {
  std::optional<CreatedJob> target = registry_->Random(rng_);
  if (!target.has_value()) return;
  grpc::ClientContext context;
  Prepare(&context);
  v1::WatchJobRequest request;
  request.set_id(target->id);
  const absl::Time start = absl::Now();
  std::unique_ptr<grpc::ClientReader<v1::JobEvent>> reader =
      stub_->WatchJob(&context, request);
  v1::JobEvent event;
  const bool got = reader->Read(&event);
  // The latency is the time to the first event: the job as it is.
  recorder_->Record(Rpc::kWatchJob, absl::Now() - start);
  context.TryCancel();
  const grpc::Status status = reader->Finish();
  // CANCELLED is ours; OK when the job was terminal and the stream ended.
  if (!status.ok() && status.error_code() != grpc::StatusCode::CANCELLED) {
    recorder_->RecordError(
        Rpc::kWatchJob,
        absl::StrCat("job ", target->id, ": ", Describe(status)));
    return;
  }
  if (!got || !event.has_job() || event.job().id() != target->id) {
    recorder_->RecordError(
        Rpc::kWatchJob,
        absl::StrCat("job ", target->id, ": the first event is not the job"));
    return;
  }
  registry_->Observe(target->id, event.job().state());
}

void LoadClient::GetJobReport() {
  // Finished jobs when there are any; before that, a running job's report
  // (the layers so far), as a dashboard would read it.
  std::optional<std::string> id = registry_->RandomFinished(rng_);
  const bool finished = id.has_value();
  if (!finished) {
    std::optional<CreatedJob> any = registry_->Random(rng_);
    if (!any.has_value()) return;
    id = any->id;
  }
  grpc::ClientContext context;
  Prepare(&context);
  v1::GetJobReportRequest request;
  request.set_id(*id);
  v1::JobReport report;
  const absl::Time start = absl::Now();
  const grpc::Status status = stub_->GetJobReport(&context, request, &report);
  recorder_->Record(Rpc::kGetJobReport, absl::Now() - start);
  if (!status.ok()) {
    recorder_->RecordError(Rpc::kGetJobReport,
                           absl::StrCat("job ", *id, ": ", Describe(status)));
    return;
  }
  if (report.job().id() != *id) {
    recorder_->RecordError(
        Rpc::kGetJobReport,
        absl::StrCat("asked for ", *id, ", got ", report.job().id()));
    return;
  }
  // A finished job's report has its audited layers and the verdict.
  if (finished && (report.layers_size() == 0 ||
                   report.verdict() == v1::VERDICT_UNSPECIFIED)) {
    recorder_->RecordError(
        Rpc::kGetJobReport,
        absl::StrCat("job ", *id, ": incomplete report (", report.layers_size(),
                     " layers, verdict ", v1::Verdict_Name(report.verdict()),
                     ")"));
  }
}

}  // namespace quant::load

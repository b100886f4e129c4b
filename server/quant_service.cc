// QuantServiceImpl: the client API over the job store and artifact store.
#include "server/quant_service.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/calib/calibration_file.h"
#include "nlohmann/json.hpp"
#include "server/grpc_status.h"
#include "server/job_request.h"
#include "server/task_plan.h"

namespace quant::server {
namespace {

absl::StatusOr<store::JobState> JobStateFromProto(v1::JobState state) {
  switch (state) {
    case v1::JOB_STATE_QUEUED:
      return store::JobState::kQueued;
    case v1::JOB_STATE_RUNNING:
      return store::JobState::kRunning;
    case v1::JOB_STATE_SUCCEEDED:
      return store::JobState::kSucceeded;
    case v1::JOB_STATE_FAILED:
      return store::JobState::kFailed;
    case v1::JOB_STATE_CANCELLED:
      return store::JobState::kCancelled;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("state: unknown job state ", state));
  }
}

absl::Status RequireId(const std::string& id) {
  if (id.empty()) return absl::InvalidArgumentError("id: required");
  return absl::OkStatus();
}

std::string StateEvent(store::JobState state) {
  return nlohmann::json{{"state", store::JobStateName(state)}}.dump();
}

}  // namespace

QuantServiceImpl::QuantServiceImpl(store::JobStore* store,
                                   ArtifactStore* artifacts,
                                   const UriPolicy* policy,
                                   QuantServiceOptions options)
    : store_(store),
      artifacts_(artifacts),
      policy_(policy),
      options_(options) {}

absl::StatusOr<v1::Job> QuantServiceImpl::ToProto(const store::Job& job) {
  absl::StatusOr<std::vector<store::Task>> tasks = store_->ListTasks(job.id);
  if (!tasks.ok()) return tasks.status();
  return JobToProto(job, *tasks);
}

absl::StatusOr<v1::UploadCalibrationResponse>
QuantServiceImpl::StoreCalibration(const std::string& filename,
                                   const std::string& bytes) {
  absl::StatusOr<CalibrationFile> parsed = ParseCalibrationFile(bytes);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "chunk: \"", filename,
        "\" is not a calibration file: ", parsed.status().message()));
  }
  const bool already_present = store_->GetCalibrationSet(parsed->sha256).ok();
  absl::StatusOr<std::string> sha256 = artifacts_->PutCalibration(bytes);
  if (!sha256.ok()) return sha256.status();
  absl::StatusOr<store::CalibrationSet> set =
      store_->PutCalibrationSet(*sha256, static_cast<int64_t>(bytes.size()),
                                artifacts_->CalibrationPath(*sha256));
  if (!set.ok()) return set.status();
  v1::UploadCalibrationResponse response;
  response.set_sha256(*sha256);
  response.set_size_bytes(set->size_bytes);
  response.set_documents(static_cast<int32_t>(parsed->documents.size()));
  response.set_already_present(already_present);
  return response;
}

grpc::Status QuantServiceImpl::UploadCalibration(
    grpc::ServerContext* /*context*/,
    grpc::ServerReader<v1::UploadCalibrationRequest>* reader,
    v1::UploadCalibrationResponse* response) {
  v1::UploadCalibrationRequest message;
  if (!reader->Read(&message) ||
      message.part_case() != v1::UploadCalibrationRequest::kFilename ||
      message.filename().empty()) {
    return ToGrpcStatus(absl::InvalidArgumentError(
        "filename: the first message must name the set; chunks follow"));
  }
  const std::string filename = message.filename();
  std::string bytes;
  while (reader->Read(&message)) {
    if (message.part_case() != v1::UploadCalibrationRequest::kChunk) {
      return ToGrpcStatus(absl::InvalidArgumentError(
          "filename: only the first message may name the set"));
    }
    if (static_cast<int64_t>(bytes.size() + message.chunk().size()) >
        options_.max_upload_bytes) {
      return ToGrpcStatus(absl::ResourceExhaustedError(
          absl::StrCat("chunk: \"", filename, "\" exceeds the upload limit of ",
                       options_.max_upload_bytes, " bytes")));
    }
    bytes += message.chunk();
  }
  absl::StatusOr<v1::UploadCalibrationResponse> result =
      StoreCalibration(filename, bytes);
  if (!result.ok()) return ToGrpcStatus(result.status());
  *response = *std::move(result);
  return grpc::Status::OK;
}

absl::StatusOr<v1::Job> QuantServiceImpl::DoCreateJob(
    const v1::CreateJobRequest& request) {
  absl::StatusOr<ValidatedJobRequest> valid = ValidateCreateJobRequest(
      request, *policy_, *store_, options_.max_upload_bytes);
  if (!valid.ok()) return valid.status();
  absl::StatusOr<store::CreateJobResult> created = store_->CreateJob(
      request.request_id(), JobSpecToJson(valid->spec), valid->spec.labels);
  if (!created.ok()) return created.status();
  const store::Job& job = created->job;
  // Recorded only once the job is accepted, so a refused request leaves
  // no trace; the same bytes recorded again are a no-op.
  if (valid->calibration_from_uri) {
    absl::StatusOr<store::CalibrationSet> set = store_->PutCalibrationSet(
        valid->spec.calibration_sha256, valid->calibration_size_bytes,
        valid->spec.calibration_path);
    if (!set.ok()) return set.status();
  }
  // A replay whose first attempt died between CreateJob and PlanTasks
  // finds no plan: plan it now.
  absl::StatusOr<std::vector<store::Task>> tasks = store_->ListTasks(job.id);
  if (!tasks.ok()) return tasks.status();
  if (tasks->empty()) {
    if (absl::Status s = store_->PlanTasks(
            job.id, PlanJobTasks(valid->spec.num_blocks,
                                 valid->spec.recipe.propagation));
        !s.ok()) {
      return s;
    }
  }
  if (created->created) {
    absl::StatusOr<int64_t> seq =
        store_->AppendEvent(job.id, "job", StateEvent(job.state));
    if (!seq.ok()) return seq.status();
  }
  // Planning touches the job (update_time): answer with what GetJob sees.
  absl::StatusOr<store::Job> current = store_->GetJob(job.id);
  if (!current.ok()) return current.status();
  return ToProto(*current);
}

grpc::Status QuantServiceImpl::CreateJob(grpc::ServerContext* /*context*/,
                                         const v1::CreateJobRequest* request,
                                         v1::Job* response) {
  absl::StatusOr<v1::Job> job = DoCreateJob(*request);
  if (!job.ok()) return ToGrpcStatus(job.status());
  *response = *std::move(job);
  return grpc::Status::OK;
}

absl::StatusOr<v1::Job> QuantServiceImpl::DoGetJob(const std::string& id) {
  if (absl::Status s = RequireId(id); !s.ok()) return s;
  absl::StatusOr<store::Job> job = store_->GetJob(id);
  if (!job.ok()) return job.status();
  return ToProto(*job);
}

grpc::Status QuantServiceImpl::GetJob(grpc::ServerContext* /*context*/,
                                      const v1::GetJobRequest* request,
                                      v1::Job* response) {
  absl::StatusOr<v1::Job> job = DoGetJob(request->id());
  if (!job.ok()) return ToGrpcStatus(job.status());
  *response = *std::move(job);
  return grpc::Status::OK;
}

absl::StatusOr<v1::ListJobsResponse> QuantServiceImpl::DoListJobs(
    const v1::ListJobsRequest& request) {
  store::JobFilter filter;
  if (request.state() != v1::JOB_STATE_UNSPECIFIED) {
    absl::StatusOr<store::JobState> state = JobStateFromProto(request.state());
    if (!state.ok()) return state.status();
    filter.state = *state;
  }
  if (request.labels_size() > 1) {
    return absl::InvalidArgumentError(
        "labels: filtering by more than one label is not supported yet");
  }
  for (const auto& [key, value] : request.labels()) {
    filter.label = std::make_pair(key, value);
  }
  absl::StatusOr<store::JobPage> page =
      store_->ListJobs(request.page_size(), request.page_token(), filter);
  if (!page.ok()) return page.status();
  v1::ListJobsResponse response;
  for (const store::Job& job : page->jobs) {
    absl::StatusOr<v1::Job> proto = ToProto(job);
    if (!proto.ok()) return proto.status();
    *response.add_jobs() = *std::move(proto);
  }
  response.set_next_page_token(page->next_page_token);
  return response;
}

grpc::Status QuantServiceImpl::ListJobs(grpc::ServerContext* /*context*/,
                                        const v1::ListJobsRequest* request,
                                        v1::ListJobsResponse* response) {
  absl::StatusOr<v1::ListJobsResponse> page = DoListJobs(*request);
  if (!page.ok()) return ToGrpcStatus(page.status());
  *response = *std::move(page);
  return grpc::Status::OK;
}

absl::StatusOr<v1::Job> QuantServiceImpl::DoCancelJob(const std::string& id) {
  if (absl::Status s = RequireId(id); !s.ok()) return s;
  absl::StatusOr<store::JobChange> change = store_->CancelJob(id);
  if (!change.ok()) return change.status();
  if (change->changed) {
    absl::StatusOr<int64_t> seq =
        store_->AppendEvent(id, "job", StateEvent(change->job.state));
    if (!seq.ok()) return seq.status();
  }
  return ToProto(change->job);
}

grpc::Status QuantServiceImpl::CancelJob(grpc::ServerContext* /*context*/,
                                         const v1::CancelJobRequest* request,
                                         v1::Job* response) {
  absl::StatusOr<v1::Job> job = DoCancelJob(request->id());
  if (!job.ok()) return ToGrpcStatus(job.status());
  *response = *std::move(job);
  return grpc::Status::OK;
}

grpc::Status QuantServiceImpl::WatchJob(
    grpc::ServerContext* /*context*/, const v1::WatchJobRequest* /*request*/,
    grpc::ServerWriter<v1::JobEvent>* /*writer*/) {
  return ToGrpcStatus(absl::UnimplementedError(
      "WatchJob is not implemented yet in quantd (no scheduler runs jobs)"));
}

grpc::Status QuantServiceImpl::GetJobReport(
    grpc::ServerContext* /*context*/,
    const v1::GetJobReportRequest* /*request*/, v1::JobReport* /*response*/) {
  return ToGrpcStatus(absl::UnimplementedError(
      "GetJobReport is not implemented yet in quantd (no job produces a "
      "report until workers exist)"));
}

}  // namespace quant::server

// QuantServiceImpl: the client API over the job store and artifact store.
#include "server/quant_service.h"

#include <chrono>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/base/file_uri.h"
#include "core/calib/calibration_file.h"
#include "core/estimate/plan_estimate.h"
#include "nlohmann/json.hpp"
#include "server/artifact_download.h"
#include "server/grpc_status.h"
#include "server/job_eta.h"
#include "server/job_events.h"
#include "server/job_report.h"
#include "server/job_request.h"
#include "server/task_plan.h"

namespace quant::server {
namespace {

// Counts a call while it runs; count() includes this one.
class InFlight {
 public:
  explicit InFlight(std::atomic<int>* counter)
      : counter_(counter), count_(counter->fetch_add(1) + 1) {}
  ~InFlight() { counter_->fetch_sub(1); }
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;
  int count() const { return count_; }

 private:
  std::atomic<int>* counter_;
  int count_;
};

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

}  // namespace

QuantServiceImpl::QuantServiceImpl(JobLifecycle* lifecycle,
                                   const UriPolicy* policy,
                                   const Authenticator* auth,
                                   QuantServiceOptions options)
    : lifecycle_(lifecycle),
      store_(&lifecycle->store()),
      artifacts_(&lifecycle->artifacts()),
      policy_(policy),
      auth_(auth),
      options_(options) {}

absl::StatusOr<v1::Job> QuantServiceImpl::ToProto(const store::Job& job) {
  return lifecycle_->JobProto(job);
}

template <typename Response, typename Handler>
grpc::Status QuantServiceImpl::Reply(const grpc::ServerContext& context,
                                     Response* response, Handler&& handler) {
  return ReplyIfAllowed(auth_->Check(context, CallerRole::kClient), response,
                        std::forward<Handler>(handler));
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

absl::StatusOr<v1::UploadCalibrationResponse>
QuantServiceImpl::ReceiveCalibration(
    grpc::ServerReader<v1::UploadCalibrationRequest>& reader) {
  const InFlight upload(&uploads_in_flight_);
  if (upload.count() > options_.max_concurrent_uploads) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "UploadCalibration: ", options_.max_concurrent_uploads,
        " uploads are in progress (--max_concurrent_uploads); retry later"));
  }
  v1::UploadCalibrationRequest message;
  if (!reader.Read(&message) ||
      message.part_case() != v1::UploadCalibrationRequest::kFilename ||
      message.filename().empty()) {
    return absl::InvalidArgumentError(
        "filename: the first message must name the set; chunks follow");
  }
  const std::string filename = message.filename();
  std::string bytes;
  while (reader.Read(&message)) {
    if (message.part_case() != v1::UploadCalibrationRequest::kChunk) {
      return absl::InvalidArgumentError(
          "filename: only the first message may name the set");
    }
    if (static_cast<int64_t>(bytes.size() + message.chunk().size()) >
        options_.max_upload_bytes) {
      return absl::ResourceExhaustedError(
          absl::StrCat("chunk: \"", filename, "\" exceeds the upload limit of ",
                       options_.max_upload_bytes, " bytes"));
    }
    bytes += message.chunk();
  }
  return StoreCalibration(filename, bytes);
}

grpc::Status QuantServiceImpl::UploadCalibration(
    grpc::ServerContext* context,
    grpc::ServerReader<v1::UploadCalibrationRequest>* reader,
    v1::UploadCalibrationResponse* response) {
  return Reply(*context, response, [&] { return ReceiveCalibration(*reader); });
}

void QuantServiceImpl::ApplyPlanOptions(JobSpec* spec) const {
  if (!options_.round_tasks) spec->rounds.reset();
  if (spec->rounds.has_value() && !options_.round_layer_reduces) {
    spec->rounds->layer_reduces = false;
  }
  if (spec->rounds.has_value() && !options_.round_heldout_later) {
    spec->rounds->heldout_later = false;
  }
  spec->gate_parts = options_.gate_parts;
}

absl::StatusOr<v1::Job> QuantServiceImpl::DoCreateJob(
    const v1::CreateJobRequest& request) {
  absl::StatusOr<ValidatedJobRequest> valid = ValidateCreateJobRequest(
      request, *policy_, *store_, options_.max_upload_bytes);
  if (!valid.ok()) return valid.status();
  ApplyPlanOptions(&valid->spec);
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
  if (absl::Status s = EnsureJobPlanned(*store_, job.id, valid->spec);
      !s.ok()) {
    return s;
  }
  if (created->created) {
    if (absl::Status s = lifecycle_->StateChanged(job.id, job.state); !s.ok()) {
      return s;
    }
  }
  // Planning touches the job (update_time): answer with what GetJob sees.
  absl::StatusOr<store::Job> current = store_->GetJob(job.id);
  if (!current.ok()) return current.status();
  return ToProto(*current);
}

absl::StatusOr<v1::JobEstimate> QuantServiceImpl::DoEstimateJob(
    const v1::CreateJobRequest& request) {
  absl::StatusOr<ValidatedJobRequest> valid = ValidateCreateJobRequest(
      request, *policy_, *store_, options_.max_upload_bytes,
      /*calibration_optional=*/true);
  if (!valid.ok()) return valid.status();
  ApplyPlanOptions(&valid->spec);
  const JobSpec& spec = valid->spec;
  v1::JobEstimate estimate;
  estimate.set_blocks(spec.num_blocks);
  estimate.set_tasks(static_cast<int>(PlanJobTasks(spec).size()));
  if (spec.work.has_value()) {
    estimate.set_calibration_tokens(spec.work->calibration_tokens);
    estimate.set_heldout_tokens(spec.work->heldout_tokens);
  }
  estimate.set_output_bytes(valid->output.tensor_bytes);
  estimate.set_source_bytes(valid->output.source_tensor_bytes);
  estimate.set_packed_layers(static_cast<int32_t>(valid->output.packed_layers));
  estimate.set_kept_layers(static_cast<int32_t>(valid->output.kept_layers));
  const FleetRates fleet =
      lifecycle_->eta() != nullptr ? lifecycle_->eta()->Fleet() : FleetRates();
  estimate.set_workers(fleet.workers);
  if (fleet.workers > 0 && fleet.rates.known() && spec.work.has_value()) {
    estimate.set_expected_seconds(PredictJobSeconds(
        *spec.work, fleet.rates, spec.recipe.propagation, fleet.workers));
  }
  for (const std::string& warning : spec.warnings) {
    estimate.add_warnings(warning);
  }
  return estimate;
}

grpc::Status QuantServiceImpl::EstimateJob(grpc::ServerContext* context,
                                           const v1::CreateJobRequest* request,
                                           v1::JobEstimate* response) {
  return Reply(*context, response, [&] { return DoEstimateJob(*request); });
}

grpc::Status QuantServiceImpl::CreateJob(grpc::ServerContext* context,
                                         const v1::CreateJobRequest* request,
                                         v1::Job* response) {
  return Reply(*context, response, [&] { return DoCreateJob(*request); });
}

absl::StatusOr<v1::Job> QuantServiceImpl::DoGetJob(const std::string& id) {
  if (absl::Status s = RequireId(id); !s.ok()) return s;
  absl::StatusOr<store::Job> job = store_->GetJob(id);
  if (!job.ok()) return job.status();
  return ToProto(*job);
}

grpc::Status QuantServiceImpl::GetJob(grpc::ServerContext* context,
                                      const v1::GetJobRequest* request,
                                      v1::Job* response) {
  return Reply(*context, response, [&] { return DoGetJob(request->id()); });
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

grpc::Status QuantServiceImpl::ListJobs(grpc::ServerContext* context,
                                        const v1::ListJobsRequest* request,
                                        v1::ListJobsResponse* response) {
  return Reply(*context, response, [&] { return DoListJobs(*request); });
}

absl::StatusOr<v1::Job> QuantServiceImpl::DoCancelJob(const std::string& id) {
  if (absl::Status s = RequireId(id); !s.ok()) return s;
  absl::StatusOr<store::JobChange> change = store_->CancelJob(id);
  if (!change.ok()) return change.status();
  if (change->changed) {
    if (absl::Status s = lifecycle_->StateChanged(id, change->job.state);
        !s.ok()) {
      return s;
    }
  }
  return ToProto(change->job);
}

grpc::Status QuantServiceImpl::CancelJob(grpc::ServerContext* context,
                                         const v1::CancelJobRequest* request,
                                         v1::Job* response) {
  return Reply(*context, response, [&] { return DoCancelJob(request->id()); });
}

absl::Status QuantServiceImpl::DoWatchJob(
    const std::string& id, const std::function<bool(const v1::JobEvent&)>& send,
    const std::function<bool()>& cancelled) {
  if (absl::Status s = RequireId(id); !s.ok()) return s;
  ChangeSignal& signal = lifecycle_->signal();
  uint64_t seen = signal.generation();
  absl::StatusOr<store::Job> job = store_->GetJob(id);
  if (!job.ok()) return job.status();
  absl::StatusOr<v1::Job> current = ToProto(*job);
  if (!current.ok()) return current.status();
  // The current state first. Then every progress and layer event from the
  // job's start (a late watcher still sees every layer), and the state
  // changes from now on.
  int64_t state_events_after = 0;
  if (absl::Status s = ForEachEvent(*store_, id, 0,
                                    [&](const store::Event& event) {
                                      state_events_after = event.seq;
                                      return absl::OkStatus();
                                    });
      !s.ok()) {
    return s;
  }
  v1::JobEvent first;
  first.set_sequence(state_events_after);
  *first.mutable_job() = *current;
  *first.mutable_time() = current->update_time();
  if (!send(first)) return absl::OkStatus();
  // A job that had ended before the watch (a watcher that reconnected
  // after quantd restarted, or one that came late) still gets its
  // progress and layers, then its final state again as the last event.
  const bool ended_before_watch = store::IsTerminal(job->state);
  bool terminal = false;
  int64_t after = 0;
  while (!terminal) {
    absl::StatusOr<std::vector<store::Event>> events =
        store_->ListEvents(id, after, 1000);
    if (!events.ok()) return events.status();
    for (const store::Event& event : *events) {
      after = event.seq;
      if (event.type == kJobStateEvent && event.seq <= state_events_after) {
        continue;  // Before the snapshot sent first.
      }
      if (event.type == kJobStateEvent) {
        absl::StatusOr<v1::Job> now = lifecycle_->JobProto(id);
        if (!now.ok()) return now.status();
        *current = *now;
      }
      absl::StatusOr<v1::JobEvent> message = EventToProto(event, *current);
      if (!message.ok()) return message.status();
      if (!send(*message)) return absl::OkStatus();
      if (message->has_job() &&
          (message->job().state() == v1::JOB_STATE_SUCCEEDED ||
           message->job().state() == v1::JOB_STATE_FAILED ||
           message->job().state() == v1::JOB_STATE_CANCELLED)) {
        terminal = true;
        break;
      }
    }
    if (terminal || !events->empty()) continue;
    if (ended_before_watch) {
      send(first);
      break;
    }
    if (signal.stopping()) {
      return absl::UnavailableError("quantd is shutting down; watch again");
    }
    if (cancelled()) return absl::CancelledError("watch: client went away");
    signal.WaitFor(seen, std::chrono::milliseconds(500));
    seen = signal.generation();
  }
  return absl::OkStatus();
}

grpc::Status QuantServiceImpl::WatchJob(
    grpc::ServerContext* context, const v1::WatchJobRequest* request,
    grpc::ServerWriter<v1::JobEvent>* writer) {
  // The events go to `writer`; there is no single response.
  return Reply<void>(*context, nullptr, [&]() -> absl::Status {
    const InFlight stream(&watch_streams_);
    if (stream.count() > options_.max_watch_streams) {
      return absl::ResourceExhaustedError(
          absl::StrCat("WatchJob: ", options_.max_watch_streams,
                       " streams are open (--max_watch_streams); retry later"));
    }
    return DoWatchJob(
        request->id(),
        [writer](const v1::JobEvent& event) { return writer->Write(event); },
        [context] { return context->IsCancelled(); });
  });
}

absl::Status QuantServiceImpl::DoDownloadArtifact(
    const v1::DownloadArtifactRequest& request,
    const std::function<bool(const v1::ArtifactChunk&)>& send) {
  if (absl::Status s = RequireId(request.job_id()); !s.ok()) return s;
  absl::StatusOr<store::Job> job = store_->GetJob(request.job_id());
  if (!job.ok()) return job.status();
  if (job->state != store::JobState::kSucceeded) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job ", job->id, " is ", store::JobStateName(job->state),
        "; only a SUCCEEDED job has a packed checkpoint to download"));
  }
  absl::StatusOr<std::string> manifest = artifacts_->ReadManifest(job->id);
  if (!manifest.ok()) return manifest.status();
  absl::StatusOr<std::string> dir =
      FileUriPath(artifacts_->CheckpointUri(job->id), "artifact_uri");
  if (!dir.ok()) return dir.status();
  return SendCheckpointFile(*dir, *manifest, request.file(), request.offset(),
                            kArtifactChunkBytes, send);
}

grpc::Status QuantServiceImpl::DownloadArtifact(
    grpc::ServerContext* context, const v1::DownloadArtifactRequest* request,
    grpc::ServerWriter<v1::ArtifactChunk>* writer) {
  return Reply<void>(*context, nullptr, [&]() -> absl::Status {
    const InFlight stream(&downloads_);
    if (stream.count() > options_.max_downloads) {
      return absl::ResourceExhaustedError(
          absl::StrCat("DownloadArtifact: ", options_.max_downloads,
                       " downloads are running; retry later"));
    }
    return DoDownloadArtifact(
        *request, [writer, context](const v1::ArtifactChunk& chunk) {
          return !context->IsCancelled() && writer->Write(chunk);
        });
  });
}

absl::StatusOr<v1::JobReport> QuantServiceImpl::DoGetJobReport(
    const std::string& id, bool html) {
  if (absl::Status s = RequireId(id); !s.ok()) return s;
  absl::StatusOr<store::Job> job = store_->GetJob(id);
  if (!job.ok()) return job.status();
  v1::JobReport report;
  absl::StatusOr<v1::Job> proto = ToProto(*job);
  if (!proto.ok()) return proto.status();
  *report.mutable_job() = *proto;
  report.set_verdict(proto->verdict());
  report.set_artifact_uri(proto->artifact_uri());
  if (job->state == store::JobState::kSucceeded) {
    absl::StatusOr<PublishedAudit> parsed = ReadPublishedAudit(*artifacts_, id);
    if (!parsed.ok()) return parsed.status();
    if (absl::Status s = AuditToReport(*parsed, &report); !s.ok()) return s;
    if (html) {
      absl::StatusOr<std::string> page =
          RenderJobReportHtml(*artifacts_, id, *parsed);
      if (!page.ok()) return page.status();
      report.set_html(*std::move(page));
    }
    return report;
  }
  if (html) {
    return absl::FailedPreconditionError(
        absl::StrCat("html: job ", id, " is ", store::JobStateName(job->state),
                     "; its report page exists once it has succeeded"));
  }
  // Not finished: the layers finished so far.
  if (absl::Status s = ForEachEvent(*store_, id, 0,
                                    [&](const store::Event& event) {
                                      if (event.type != kLayerEvent)
                                        return absl::OkStatus();
                                      absl::StatusOr<v1::JobEvent> message =
                                          EventToProto(event, *proto);
                                      if (!message.ok())
                                        return message.status();
                                      *report.add_layers() = message->layer();
                                      return absl::OkStatus();
                                    });
      !s.ok()) {
    return s;
  }
  return report;
}

grpc::Status QuantServiceImpl::GetJobReport(
    grpc::ServerContext* context, const v1::GetJobReportRequest* request,
    v1::JobReport* response) {
  return Reply(*context, response,
               [&] { return DoGetJobReport(request->id(), request->html()); });
}

absl::StatusOr<v1::Job> QuantServiceImpl::DoRetryJob(const std::string& id) {
  if (id.empty()) return absl::InvalidArgumentError("job_id: required");
  absl::StatusOr<store::Job> job = lifecycle_->RetryJob(id);
  if (!job.ok()) return job.status();
  return ToProto(*job);
}

grpc::Status QuantServiceImpl::RetryJob(grpc::ServerContext* context,
                                        const v1::RetryJobRequest* request,
                                        v1::Job* response) {
  return Reply(*context, response,
               [&] { return DoRetryJob(request->job_id()); });
}

}  // namespace quant::server

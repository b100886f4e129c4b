// quant.v1.QuantService, the client API of quantd: calibration uploads,
// job submission (validated, recorded QUEUED with its task plan for the
// workers to pull), lookup, listing, cancellation, retrying a failed job,
// the WatchJob stream of a job's events and its report (per-layer audit,
// gates, verdict).
//
// Each RPC does its work in an absl::Status-returning method; the gRPC
// overrides only convert (server/grpc_status.h).
#ifndef QUANT_SERVER_QUANT_SERVICE_H_
#define QUANT_SERVER_QUANT_SERVICE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "quant/v1/service.grpc.pb.h"
#include "server/artifact_store.h"
#include "server/auth.h"
#include "server/job_lifecycle.h"
#include "server/job_spec.h"
#include "server/store/job_store.h"
#include "server/uri_policy.h"

namespace quant::server {

struct QuantServiceOptions {
  // Bound on an uploaded calibration set and on a calibration file named
  // by URI.
  int64_t max_upload_bytes = int64_t{64} << 20;
  // Plan a sequential dense job's blocks as rounds of small tasks that many
  // workers share (docs/DATA_PARALLEL.md); false: one task per block.
  // quantd's --round_tasks. Off by default: at the sizes measured here a
  // round task's fixed costs (loading the block, reading and checking the
  // round files, the lease) still outweigh what a second worker gains
  // (docs/PERFORMANCE.md, "One sequential job on 2 workers").
  bool round_tasks = false;
  // With round_tasks: a GPTQ or RTN job's groups of several layers (q, k,
  // v; gate, up) are reduced one task per layer, side by side
  // (RoundReducesByLayer); false: one reduce per group. The same bytes
  // either way. quantd's --round_layer_reduces.
  bool round_layer_reduces = true;
  // With round_tasks: a GPTQ or RTN job's reduces wait for their round's
  // calibration shards only, and a block's last reduce audits every layer
  // on the held-out shards (RoundShardCounts::heldout_later); false: each
  // reduce waits for both splits. The same bytes and layers.json either
  // way. quantd's --round_heldout_later.
  bool round_heldout_later = true;
  // The finalize's held-out evaluation as this many gate_part tasks after a
  // finalize_pack task, so that several workers share it (JobSpec's
  // gate_parts); 0: one finalize task. The same files either way.
  // quantd's --gate_parts.
  int gate_parts = 0;
  // Uploads are held in memory until stored, and every WatchJob stream
  // holds a thread: both are bounded (RESOURCE_EXHAUSTED beyond, naming the
  // flag). quantd's --max_concurrent_uploads and --max_watch_streams.
  int max_concurrent_uploads = 4;
  int max_watch_streams = 256;
  // DownloadArtifact streams at once (each holds a thread and a chunk).
  int max_downloads = 16;
};

class QuantServiceImpl final : public v1::QuantService::Service {
 public:
  // The pointers must outlive the service.
  QuantServiceImpl(JobLifecycle* lifecycle, const UriPolicy* policy,
                   const Authenticator* auth, QuantServiceOptions options);

  grpc::Status UploadCalibration(
      grpc::ServerContext* context,
      grpc::ServerReader<v1::UploadCalibrationRequest>* reader,
      v1::UploadCalibrationResponse* response) override;
  grpc::Status CreateJob(grpc::ServerContext* context,
                         const v1::CreateJobRequest* request,
                         v1::Job* response) override;
  grpc::Status EstimateJob(grpc::ServerContext* context,
                           const v1::CreateJobRequest* request,
                           v1::JobEstimate* response) override;
  grpc::Status GetJob(grpc::ServerContext* context,
                      const v1::GetJobRequest* request,
                      v1::Job* response) override;
  grpc::Status ListJobs(grpc::ServerContext* context,
                        const v1::ListJobsRequest* request,
                        v1::ListJobsResponse* response) override;
  grpc::Status WatchJob(grpc::ServerContext* context,
                        const v1::WatchJobRequest* request,
                        grpc::ServerWriter<v1::JobEvent>* writer) override;
  grpc::Status CancelJob(grpc::ServerContext* context,
                         const v1::CancelJobRequest* request,
                         v1::Job* response) override;
  grpc::Status GetJobReport(grpc::ServerContext* context,
                            const v1::GetJobReportRequest* request,
                            v1::JobReport* response) override;
  grpc::Status DownloadArtifact(
      grpc::ServerContext* context, const v1::DownloadArtifactRequest* request,
      grpc::ServerWriter<v1::ArtifactChunk>* writer) override;
  grpc::Status RetryJob(grpc::ServerContext* context,
                        const v1::RetryJobRequest* request,
                        v1::Job* response) override;

  // Stores `bytes` (named `filename` in messages) as a calibration set
  // after checking that they parse as one.
  absl::StatusOr<v1::UploadCalibrationResponse> StoreCalibration(
      const std::string& filename, const std::string& bytes);
  absl::StatusOr<v1::Job> DoCreateJob(const v1::CreateJobRequest& request);
  // Validates as DoCreateJob does; stores nothing.
  absl::StatusOr<v1::JobEstimate> DoEstimateJob(
      const v1::CreateJobRequest& request);
  absl::StatusOr<v1::Job> DoGetJob(const std::string& id);
  absl::StatusOr<v1::ListJobsResponse> DoListJobs(
      const v1::ListJobsRequest& request);
  absl::StatusOr<v1::Job> DoCancelJob(const std::string& id);
  // Sends the job's events to `send` until the job is terminal, `send`
  // returns false (the client went away) or the server stops.
  absl::Status DoWatchJob(const std::string& id,
                          const std::function<bool(const v1::JobEvent&)>& send,
                          const std::function<bool()>& cancelled);
  // Sends the file's chunks to `send` (false: the client went away).
  absl::Status DoDownloadArtifact(
      const v1::DownloadArtifactRequest& request,
      const std::function<bool(const v1::ArtifactChunk&)>& send);
  absl::StatusOr<v1::JobReport> DoGetJobReport(const std::string& id,
                                               bool html);
  absl::StatusOr<v1::Job> DoRetryJob(const std::string& id);

 private:
  absl::StatusOr<v1::Job> ToProto(const store::Job& job);
  // The service's planning options on a validated spec: rounds or not, and
  // how, and the finalize's gate parts.
  void ApplyPlanOptions(JobSpec* spec) const;
  // Every RPC's frame: `handler` (returning absl::Status or
  // absl::StatusOr<Response>) runs only for a caller with the client token,
  // and its result becomes the reply.
  template <typename Response, typename Handler>
  grpc::Status Reply(const grpc::ServerContext& context, Response* response,
                     Handler&& handler);
  // The first message names the set, the chunks follow.
  absl::StatusOr<v1::UploadCalibrationResponse> ReceiveCalibration(
      grpc::ServerReader<v1::UploadCalibrationRequest>& reader);

  JobLifecycle* lifecycle_;
  store::JobStore* store_;
  ArtifactStore* artifacts_;
  const UriPolicy* policy_;
  const Authenticator* auth_;
  QuantServiceOptions options_;
  std::atomic<int> uploads_in_flight_{0};
  std::atomic<int> watch_streams_{0};
  std::atomic<int> downloads_{0};
};

}  // namespace quant::server

#endif  // QUANT_SERVER_QUANT_SERVICE_H_

// quant.v1.QuantService, the client API of quantd: calibration uploads and
// job submission, lookup, listing and cancellation over the job store.
//
// This slice validates and records jobs (QUEUED, with their task plan);
// nothing runs them yet: there is no scheduler or worker protocol, so jobs
// stay QUEUED until cancelled. WatchJob and GetJobReport answer
// UNIMPLEMENTED.
//
// Each RPC does its work in an absl::Status-returning method; the gRPC
// overrides only convert (server/grpc_status.h).
#ifndef QUANT_SERVER_QUANT_SERVICE_H_
#define QUANT_SERVER_QUANT_SERVICE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "quant/v1/service.grpc.pb.h"
#include "server/artifact_store.h"
#include "server/store/job_store.h"
#include "server/uri_policy.h"

namespace quant::server {

struct QuantServiceOptions {
  // Bound on an uploaded calibration set and on a calibration file named
  // by URI.
  int64_t max_upload_bytes = int64_t{64} << 20;
};

class QuantServiceImpl final : public v1::QuantService::Service {
 public:
  // The pointers must outlive the service.
  QuantServiceImpl(store::JobStore* store, ArtifactStore* artifacts,
                   const UriPolicy* policy, QuantServiceOptions options);

  grpc::Status UploadCalibration(
      grpc::ServerContext* context,
      grpc::ServerReader<v1::UploadCalibrationRequest>* reader,
      v1::UploadCalibrationResponse* response) override;
  grpc::Status CreateJob(grpc::ServerContext* context,
                         const v1::CreateJobRequest* request,
                         v1::Job* response) override;
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

  // Stores `bytes` (named `filename` in messages) as a calibration set
  // after checking that they parse as one.
  absl::StatusOr<v1::UploadCalibrationResponse> StoreCalibration(
      const std::string& filename, const std::string& bytes);
  absl::StatusOr<v1::Job> DoCreateJob(const v1::CreateJobRequest& request);
  absl::StatusOr<v1::Job> DoGetJob(const std::string& id);
  absl::StatusOr<v1::ListJobsResponse> DoListJobs(
      const v1::ListJobsRequest& request);
  absl::StatusOr<v1::Job> DoCancelJob(const std::string& id);

 private:
  absl::StatusOr<v1::Job> ToProto(const store::Job& job);

  store::JobStore* store_;
  ArtifactStore* artifacts_;
  const UriPolicy* policy_;
  QuantServiceOptions options_;
};

}  // namespace quant::server

#endif  // QUANT_SERVER_QUANT_SERVICE_H_

// The gRPC channel from quantctl to quantd (quant.v1.QuantService): where it
// goes (--addr, env QUANT_ADDR, default 127.0.0.1:50051), how it is secured
// (TLS with the --tls_ca root certificate, insecure otherwise) and the bearer
// token every call carries (--token, --token_file or env QUANT_TOKEN, sent as
// "authorization: Bearer <token>"). Each RPC returns absl::Status with the
// server's code and message; gRPC types stay inside this file's .cc.
#ifndef QUANT_CLIENT_SERVICE_CLIENT_H_
#define QUANT_CLIENT_SERVICE_CLIENT_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/declare.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "quant/v1/service.grpc.pb.h"
#include "quant/v1/service.pb.h"

ABSL_DECLARE_FLAG(std::string, addr);
ABSL_DECLARE_FLAG(std::string, token);
ABSL_DECLARE_FLAG(std::string, token_file);
ABSL_DECLARE_FLAG(std::string, tls_ca);

namespace quant {

inline constexpr char kDefaultQuantdAddress[] = "127.0.0.1:50051";

struct ServiceClientOptions {
  std::string address = kDefaultQuantdAddress;
  std::string token;        // Empty: no authorization metadata.
  std::string tls_ca_pem;   // Empty: insecure channel.
  std::string tls_ca_file;  // For messages.
};

// The connection flags every service command accepts: --addr, --token,
// --token_file, --tls_ca.
std::vector<const absl::CommandLineFlag*> ServiceFlags();

// Options from the flags above and the environment (QUANT_ADDR,
// QUANT_TOKEN); reads --token_file and --tls_ca. --token together with
// --token_file is a usage error.
absl::StatusOr<ServiceClientOptions> ServiceClientOptionsFromFlags();

// The server's status as absl::Status: same code, the server's message,
// with a hint where one helps (which address could not be reached, how to
// give a token).
absl::Status FromGrpcStatus(const grpc::Status& status,
                            const std::string& address);

class ServiceClient {
 public:
  // Creates the channel; connecting happens on the first call.
  static absl::StatusOr<std::unique_ptr<ServiceClient>> Create(
      const ServiceClientOptions& options);
  // Create(ServiceClientOptionsFromFlags()).
  static absl::StatusOr<std::unique_ptr<ServiceClient>> FromFlags();

  const std::string& address() const { return options_.address; }

  // Streams the file at `path` in chunks of `chunk_bytes`.
  absl::StatusOr<v1::UploadCalibrationResponse> UploadCalibration(
      const std::string& path, size_t chunk_bytes = size_t{1} << 20);
  absl::StatusOr<v1::Job> CreateJob(const v1::CreateJobRequest& request);
  absl::StatusOr<v1::JobEstimate> EstimateJob(
      const v1::CreateJobRequest& request);
  // Streams one file of a job's packed checkpoint from `offset`; stops at
  // the first error `on_chunk` returns (and returns it).
  absl::Status DownloadArtifact(
      const std::string& job_id, const std::string& file, int64_t offset,
      const std::function<absl::Status(const v1::ArtifactChunk&)>& on_chunk);
  absl::StatusOr<v1::Job> GetJob(const std::string& id);
  absl::StatusOr<v1::ListJobsResponse> ListJobs(
      const v1::ListJobsRequest& request);
  absl::StatusOr<v1::Job> CancelJob(const std::string& id);
  absl::StatusOr<v1::Job> RetryJob(const std::string& id);
  // `html`: with report.html (JobReport.html); the job must have succeeded.
  absl::StatusOr<v1::JobReport> GetJobReport(const std::string& id,
                                             bool html = false);
  // Calls `on_event` for each event until the server ends the stream (OK)
  // or `on_event` returns an error (the call is then cancelled and that
  // error returned).
  absl::Status WatchJob(
      const std::string& id,
      const std::function<absl::Status(const v1::JobEvent&)>& on_event);

 private:
  explicit ServiceClient(ServiceClientOptions options);
  // Adds the token; `deadline_s` > 0 bounds the call.
  void Prepare(grpc::ClientContext* context, int deadline_s) const;

  ServiceClientOptions options_;
  std::unique_ptr<v1::QuantService::Stub> stub_;
};

}  // namespace quant

#endif  // QUANT_CLIENT_SERVICE_CLIENT_H_

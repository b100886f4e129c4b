// quantctl's channel to quantd; see service_client.h.
#include "client/service_client.h"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <memory>
#include <utility>

#include "absl/flags/flag.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/command.h"
#include "common/token_file.h"
#include "core/base/file_util.h"
#include "core/base/read_roots.h"
#include "core/base/status_macros.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"

ABSL_FLAG(std::string, addr, "",
          "quantd's HOST:PORT. Default: env QUANT_ADDR, else 127.0.0.1:50051.");
ABSL_FLAG(std::string, token, "",
          "Bearer token sent with every call (metadata \"authorization: "
          "Bearer TOKEN\"). Default: env QUANT_TOKEN. Prefer --token_file: "
          "a command line is visible to other users.");
ABSL_FLAG(std::string, token_file, "",
          "File holding the bearer token (surrounding whitespace ignored).");
ABSL_FLAG(std::string, tls_ca, "",
          "PEM root certificate: connect with TLS and trust it. Without it "
          "the channel is plaintext (loopback or a trusted network only).");

namespace quant {
namespace {

// Unary calls are short; a server that does not answer in this time is
// treated as unreachable rather than waited for forever.
constexpr int kUnaryDeadlineSeconds = 60;

std::string Getenv(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? "" : value;
}

std::string BaseName(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Reads a server stream into `on_message` until it ends or the handler
// fails; then cancels the call and drains it so that Finish returns. The
// handler's error wins over the call's status.
template <typename Message>
absl::Status ReadStream(
    grpc::ClientContext* context, grpc::ClientReader<Message>* reader,
    const std::function<absl::Status(const Message&)>& on_message,
    const std::string& address) {
  Message message;
  absl::Status handler_status;
  while (reader->Read(&message)) {
    handler_status = on_message(message);
    if (!handler_status.ok()) {
      context->TryCancel();
      while (reader->Read(&message)) {
      }
      break;
    }
  }
  const grpc::Status status = reader->Finish();
  if (!handler_status.ok()) return handler_status;
  return FromGrpcStatus(status, address);
}

}  // namespace

std::vector<const absl::CommandLineFlag*> ServiceFlags() {
  return {
      &absl::GetFlagReflectionHandle(FLAGS_addr),
      &absl::GetFlagReflectionHandle(FLAGS_token),
      &absl::GetFlagReflectionHandle(FLAGS_token_file),
      &absl::GetFlagReflectionHandle(FLAGS_tls_ca),
  };
}

absl::StatusOr<ServiceClientOptions> ServiceClientOptionsFromFlags() {
  ServiceClientOptions options;
  options.address = absl::GetFlag(FLAGS_addr);
  if (options.address.empty()) options.address = Getenv("QUANT_ADDR");
  if (options.address.empty()) options.address = kDefaultQuantdAddress;

  const std::string token = absl::GetFlag(FLAGS_token);
  const std::string token_file = absl::GetFlag(FLAGS_token_file);
  if (!token.empty() && !token_file.empty()) {
    return UsageError("--token and --token_file exclude each other");
  }
  if (!token_file.empty()) {
    // The same rules quantd applies to its own token files.
    QUANT_ASSIGN_OR_RETURN(options.token,
                           common::ReadTokenFile(token_file, "--token_file"));
  } else {
    options.token = token.empty() ? Getenv("QUANT_TOKEN") : token;
    if (!options.token.empty()) {
      // A newline or non-ASCII byte would abort gRPC's metadata check.
      if (absl::Status ok = common::CheckToken(
              options.token, token.empty() ? "QUANT_TOKEN" : "--token");
          !ok.ok()) {
        return UsageError(ok.message());
      }
    }
  }

  options.tls_ca_file = absl::GetFlag(FLAGS_tls_ca);
  if (!options.tls_ca_file.empty()) {
    absl::StatusOr<std::string> pem =
        ReadFileToString(options.tls_ca_file, 1 << 20);
    if (!pem.ok()) {
      return absl::Status(pem.status().code(),
                          absl::StrCat("--tls_ca: ", pem.status().message()));
    }
    if (pem->empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--tls_ca: ", options.tls_ca_file, " is empty"));
    }
    options.tls_ca_pem = *std::move(pem);
  }
  return options;
}

absl::Status FromGrpcStatus(const grpc::Status& status,
                            const std::string& address) {
  if (status.ok()) return absl::OkStatus();
  // gRPC and absl share the canonical code numbers.
  const auto code = static_cast<absl::StatusCode>(status.error_code());
  switch (status.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
      return absl::Status(code, absl::StrCat("cannot reach quantd at ", address,
                                             ": ", status.error_message()));
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return absl::Status(
          code, absl::StrCat("quantd at ", address, " did not answer in time: ",
                             status.error_message()));
    case grpc::StatusCode::UNAUTHENTICATED:
      return absl::Status(
          code, absl::StrCat(status.error_message(),
                             " (give the client token with --token_file, "
                             "--token or env QUANT_TOKEN)"));
    case grpc::StatusCode::NOT_FOUND:
      // The store's messages may name just the missing thing ("job x").
      if (!absl::StrContains(absl::AsciiStrToLower(status.error_message()),
                             "not found")) {
        return absl::Status(
            code, absl::StrCat(status.error_message(), ": not found"));
      }
      return absl::Status(code, status.error_message());
    default:
      return absl::Status(code, status.error_message());
  }
}

ServiceClient::ServiceClient(ServiceClientOptions options)
    : options_(std::move(options)) {
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  if (options_.tls_ca_pem.empty()) {
    credentials = grpc::InsecureChannelCredentials();
  } else {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = options_.tls_ca_pem;
    credentials = grpc::SslCredentials(ssl);
  }
  grpc::ChannelArguments arguments;
  // Reports and watch events of large models exceed the 4 MiB default.
  arguments.SetMaxReceiveMessageSize(256 << 20);
  stub_ = v1::QuantService::NewStub(
      grpc::CreateCustomChannel(options_.address, credentials, arguments));
}

absl::StatusOr<std::unique_ptr<ServiceClient>> ServiceClient::Create(
    const ServiceClientOptions& options) {
  if (options.address.empty()) {
    return absl::InvalidArgumentError("--addr: empty address");
  }
  return std::unique_ptr<ServiceClient>(new ServiceClient(options));
}

absl::StatusOr<std::unique_ptr<ServiceClient>> ServiceClient::FromFlags() {
  absl::StatusOr<ServiceClientOptions> options =
      ServiceClientOptionsFromFlags();
  if (!options.ok()) return options.status();
  return Create(*options);
}

void ServiceClient::Prepare(grpc::ClientContext* context,
                            int deadline_s) const {
  if (!options_.token.empty()) {
    context->AddMetadata("authorization",
                         absl::StrCat("Bearer ", options_.token));
  }
  if (deadline_s > 0) {
    context->set_deadline(std::chrono::system_clock::now() +
                          std::chrono::seconds(deadline_s));
  }
}

absl::StatusOr<v1::UploadCalibrationResponse> ServiceClient::UploadCalibration(
    const std::string& path, size_t chunk_bytes) {
  // A FIFO or a directory is refused here rather than blocking or sending
  // nothing; the check is the same one quantd makes.
  QUANT_ASSIGN_OR_RETURN(const int fd, OpenRegularFileForRead(path));
  grpc::ClientContext context;
  Prepare(&context, 0);
  v1::UploadCalibrationResponse response;
  std::unique_ptr<grpc::ClientWriter<v1::UploadCalibrationRequest>> writer =
      stub_->UploadCalibration(&context, &response);
  v1::UploadCalibrationRequest message;
  message.set_filename(BaseName(path));
  bool sending = writer->Write(message);
  std::string buffer(chunk_bytes, '\0');
  int read_errno = 0;
  while (sending) {
    const ssize_t n = ::read(fd, buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) read_errno = errno;
    if (n <= 0) break;
    message.set_chunk(buffer.data(), static_cast<size_t>(n));
    sending = writer->Write(message);
  }
  ::close(fd);
  // A failed Write means the server has already answered (e.g. the file
  // is too large): Finish brings its status.
  if (sending) writer->WritesDone();
  const grpc::Status status = writer->Finish();
  if (read_errno != 0) {
    return ErrnoToStatus("cannot read calibration file", path, read_errno);
  }
  if (!status.ok()) return FromGrpcStatus(status, options_.address);
  return response;
}

absl::StatusOr<v1::Job> ServiceClient::CreateJob(
    const v1::CreateJobRequest& request) {
  grpc::ClientContext context;
  Prepare(&context, kUnaryDeadlineSeconds);
  v1::Job job;
  const grpc::Status status = stub_->CreateJob(&context, request, &job);
  if (!status.ok()) return FromGrpcStatus(status, options_.address);
  return job;
}

absl::StatusOr<v1::JobEstimate> ServiceClient::EstimateJob(
    const v1::CreateJobRequest& request) {
  grpc::ClientContext context;
  Prepare(&context, kUnaryDeadlineSeconds);
  v1::JobEstimate estimate;
  const grpc::Status status = stub_->EstimateJob(&context, request, &estimate);
  if (!status.ok()) return FromGrpcStatus(status, options_.address);
  return estimate;
}

absl::StatusOr<v1::Job> ServiceClient::GetJob(const std::string& id) {
  grpc::ClientContext context;
  Prepare(&context, kUnaryDeadlineSeconds);
  v1::GetJobRequest request;
  request.set_id(id);
  v1::Job job;
  const grpc::Status status = stub_->GetJob(&context, request, &job);
  if (!status.ok()) return FromGrpcStatus(status, options_.address);
  return job;
}

absl::StatusOr<v1::ListJobsResponse> ServiceClient::ListJobs(
    const v1::ListJobsRequest& request) {
  grpc::ClientContext context;
  Prepare(&context, kUnaryDeadlineSeconds);
  v1::ListJobsResponse response;
  const grpc::Status status = stub_->ListJobs(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status, options_.address);
  return response;
}

absl::StatusOr<v1::Job> ServiceClient::CancelJob(const std::string& id) {
  grpc::ClientContext context;
  Prepare(&context, kUnaryDeadlineSeconds);
  v1::CancelJobRequest request;
  request.set_id(id);
  v1::Job job;
  const grpc::Status status = stub_->CancelJob(&context, request, &job);
  if (!status.ok()) return FromGrpcStatus(status, options_.address);
  return job;
}

absl::StatusOr<v1::Job> ServiceClient::RetryJob(const std::string& id) {
  grpc::ClientContext context;
  Prepare(&context, kUnaryDeadlineSeconds);
  v1::RetryJobRequest request;
  request.set_job_id(id);
  v1::Job job;
  const grpc::Status status = stub_->RetryJob(&context, request, &job);
  if (!status.ok()) return FromGrpcStatus(status, options_.address);
  return job;
}

absl::StatusOr<v1::JobReport> ServiceClient::GetJobReport(const std::string& id,
                                                          bool html) {
  grpc::ClientContext context;
  Prepare(&context, kUnaryDeadlineSeconds);
  v1::GetJobReportRequest request;
  request.set_id(id);
  request.set_html(html);
  v1::JobReport report;
  const grpc::Status status = stub_->GetJobReport(&context, request, &report);
  if (!status.ok()) return FromGrpcStatus(status, options_.address);
  return report;
}

absl::Status ServiceClient::DownloadArtifact(
    const std::string& job_id, const std::string& file, int64_t offset,
    const std::function<absl::Status(const v1::ArtifactChunk&)>& on_chunk) {
  grpc::ClientContext context;
  Prepare(&context, 0);  // A checkpoint may be many GB.
  v1::DownloadArtifactRequest request;
  request.set_job_id(job_id);
  request.set_file(file);
  request.set_offset(offset);
  std::unique_ptr<grpc::ClientReader<v1::ArtifactChunk>> reader =
      stub_->DownloadArtifact(&context, request);
  return ReadStream(&context, reader.get(), on_chunk, options_.address);
}

absl::Status ServiceClient::WatchJob(
    const std::string& id,
    const std::function<absl::Status(const v1::JobEvent&)>& on_event) {
  grpc::ClientContext context;
  Prepare(&context, 0);  // A job may run for hours.
  v1::WatchJobRequest request;
  request.set_id(id);
  std::unique_ptr<grpc::ClientReader<v1::JobEvent>> reader =
      stub_->WatchJob(&context, request);
  return ReadStream(&context, reader.get(), on_event, options_.address);
}

}  // namespace quant

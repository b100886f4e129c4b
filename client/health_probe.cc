// CheckHealth: one unary call with hand-encoded HealthCheckRequest bytes.
#include "client/health_probe.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "grpcpp/client_context.h"
#include "grpcpp/impl/codegen/client_unary_call.h"
#include "grpcpp/impl/codegen/rpc_method.h"
#include "grpcpp/support/byte_buffer.h"

namespace quant {

absl::StatusOr<int> CheckHealth(const std::shared_ptr<grpc::Channel>& channel,
                                const std::string& service) {
  if (service.size() > 127) {
    return absl::InvalidArgumentError("service: name longer than 127 bytes");
  }
  std::string request;
  if (!service.empty()) {
    request.push_back(0x0a);  // Field 1 (service), length-delimited.
    request.push_back(static_cast<char>(service.size()));
    request += service;
  }
  grpc::Slice slice(request);
  grpc::ByteBuffer request_buffer(&slice, 1);
  grpc::ByteBuffer response_buffer;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(10));
  const grpc::internal::RpcMethod method("/grpc.health.v1.Health/Check",
                                         grpc::internal::RpcMethod::NORMAL_RPC);
  const grpc::Status status =
      grpc::internal::BlockingUnaryCall<grpc::ByteBuffer, grpc::ByteBuffer>(
          channel.get(), method, &context, request_buffer, &response_buffer);
  if (!status.ok()) {
    return absl::UnavailableError(
        absl::StrCat("health check: ", status.error_message()));
  }
  grpc::Slice out;
  if (!response_buffer.DumpToSingleSlice(&out).ok()) {
    return absl::DataLossError("health check: unreadable response");
  }
  const std::string bytes(reinterpret_cast<const char*>(out.begin()),
                          out.size());
  if (bytes.empty()) return 0;  // UNKNOWN, the default, encodes as nothing.
  if (bytes.size() != 2 || bytes[0] != 0x08) {
    return absl::DataLossError("health check: unexpected response encoding");
  }
  return static_cast<int>(bytes[1]);
}

}  // namespace quant

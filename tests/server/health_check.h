// Test helpers: grpc.health.v1.Health/Check and the v1alpha reflection
// service's list_services, without generated stubs (the messages are tiny
// hand-encoded protobufs).
#ifndef QUANT_TESTS_SERVER_HEALTH_CHECK_H_
#define QUANT_TESTS_SERVER_HEALTH_CHECK_H_

#include <memory>
#include <string>

#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "grpcpp/impl/codegen/client_unary_call.h"
#include "grpcpp/impl/codegen/rpc_method.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/sync_stream.h"

namespace quant::testing {

// The serving status (1 SERVING, 2 NOT_SERVING) of `service` ("" = the
// server), or -1 with `error` set when the call fails.
inline int CheckHealth(const std::shared_ptr<grpc::Channel>& channel,
                       const std::string& service, std::string* error) {
  std::string request;
  if (!service.empty()) {
    request.push_back(0x0a);  // field 1, length-delimited
    request.push_back(static_cast<char>(service.size()));
    request += service;
  }
  grpc::Slice slice(request);
  grpc::ByteBuffer request_buffer(&slice, 1);
  grpc::ByteBuffer response_buffer;
  grpc::ClientContext context;
  const grpc::internal::RpcMethod method("/grpc.health.v1.Health/Check",
                                         grpc::internal::RpcMethod::NORMAL_RPC);
  const grpc::Status status =
      grpc::internal::BlockingUnaryCall<grpc::ByteBuffer, grpc::ByteBuffer>(
          channel.get(), method, &context, request_buffer, &response_buffer);
  if (!status.ok()) {
    *error = status.error_message();
    return -1;
  }
  grpc::Slice out;
  if (!response_buffer.DumpToSingleSlice(&out).ok()) {
    *error = "unreadable response";
    return -1;
  }
  const std::string bytes(reinterpret_cast<const char*>(out.begin()),
                          out.size());
  if (bytes.empty()) return 0;  // UNKNOWN (the default) encodes as nothing.
  if (bytes.size() != 2 || bytes[0] != 0x08) {
    *error = "unexpected response encoding";
    return -1;
  }
  return bytes[1];
}

// The raw bytes of the server's answer to a reflection list_services
// request (they hold the service names), or "" with `error` set.
inline std::string ListServicesViaReflection(
    const std::shared_ptr<grpc::Channel>& channel, std::string* error) {
  grpc::ClientContext context;
  const grpc::internal::RpcMethod method(
      "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
      grpc::internal::RpcMethod::BIDI_STREAMING);
  std::unique_ptr<grpc::ClientReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>>
      stream(grpc::internal::ClientReaderWriterFactory<
             grpc::ByteBuffer, grpc::ByteBuffer>::Create(channel.get(), method,
                                                         &context));
  const std::string request("\x3a\x00", 2);  // field 7 list_services: ""
  grpc::Slice slice(request);
  grpc::ByteBuffer request_buffer(&slice, 1);
  stream->Write(request_buffer);
  stream->WritesDone();
  grpc::ByteBuffer response_buffer;
  std::string bytes;
  if (stream->Read(&response_buffer)) {
    grpc::Slice out;
    if (response_buffer.DumpToSingleSlice(&out).ok()) {
      bytes.assign(reinterpret_cast<const char*>(out.begin()), out.size());
    }
  }
  const grpc::Status status = stream->Finish();
  if (!status.ok()) *error = status.error_message();
  return bytes;
}

}  // namespace quant::testing

#endif  // QUANT_TESTS_SERVER_HEALTH_CHECK_H_

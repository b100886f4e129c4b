// Test helper: the v1alpha reflection service's list_services without
// generated stubs (the request is a tiny hand-encoded protobuf). The health
// check is client/health_probe.h.
#ifndef QUANT_TESTS_SERVER_REFLECTION_PROBE_H_
#define QUANT_TESTS_SERVER_REFLECTION_PROBE_H_

#include <memory>
#include <string>

#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "grpcpp/impl/codegen/rpc_method.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/sync_stream.h"

namespace quant::testing {

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

#endif  // QUANT_TESTS_SERVER_REFLECTION_PROBE_H_

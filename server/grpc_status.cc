// absl::Status -> grpc::Status with the same code and message.
#include "server/grpc_status.h"

#include <string>

namespace quant::server {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      std::string(status.message()));
}

}  // namespace quant::server

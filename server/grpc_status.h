// The one place where absl::Status becomes grpc::Status: at the service
// boundary. The canonical codes share their numbers.
#ifndef QUANT_SERVER_GRPC_STATUS_H_
#define QUANT_SERVER_GRPC_STATUS_H_

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace quant::server {

grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace quant::server

#endif  // QUANT_SERVER_GRPC_STATUS_H_

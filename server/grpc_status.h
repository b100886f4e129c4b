// The one place where absl::Status becomes grpc::Status: at the service
// boundary. The canonical codes share their numbers.
#ifndef QUANT_SERVER_GRPC_STATUS_H_
#define QUANT_SERVER_GRPC_STATUS_H_

#include <cstddef>
#include <type_traits>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "grpcpp/support/status.h"

namespace quant::server {

// Longer messages are cut (marked, on a UTF-8 boundary): a message echoing
// a 10,000-character input once exceeded the client's metadata limit, so
// the caller saw RESOURCE_EXHAUSTED instead of the error.
inline constexpr size_t kMaxStatusMessageBytes = 2048;

grpc::Status ToGrpcStatus(const absl::Status& status);

// A unary handler's reply: `handler` runs only when `access` (the caller's
// authentication) is OK; it returns absl::Status or absl::StatusOr<Response>,
// whose value becomes *response.
template <typename Response, typename Handler>
grpc::Status ReplyIfAllowed(const absl::Status& access, Response* response,
                            Handler&& handler) {
  if (!access.ok()) return ToGrpcStatus(access);
  auto result = std::forward<Handler>(handler)();
  if constexpr (std::is_same_v<decltype(result), absl::Status>) {
    return ToGrpcStatus(result);
  } else {
    if (!result.ok()) return ToGrpcStatus(result.status());
    *response = *std::move(result);
    return grpc::Status::OK;
  }
}

}  // namespace quant::server

#endif  // QUANT_SERVER_GRPC_STATUS_H_

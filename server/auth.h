// Bearer-token authentication of quantd's two services. Clients send
// "authorization: Bearer <client token>" and workers "Bearer <worker
// token>" as gRPC metadata. A service with a token configured answers a
// call without a valid one UNAUTHENTICATED, and a call carrying the other
// service's token PERMISSION_DENIED (a client cannot pose as a worker). A
// service without a token accepts every call: quantd allows that only on
// loopback addresses.
#ifndef QUANT_SERVER_AUTH_H_
#define QUANT_SERVER_AUTH_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "grpcpp/server_context.h"

namespace quant::server {

enum class CallerRole { kClient, kWorker };

struct AuthTokens {
  std::string client;  // Empty: the client service is open.
  std::string worker;  // Empty: the worker service is open.
};

class Authenticator {
 public:
  explicit Authenticator(AuthTokens tokens) : tokens_(std::move(tokens)) {}

  // OK, Unauthenticated or PermissionDenied, for a call to the service that
  // `role` uses.
  absl::Status Check(const grpc::ServerContext& context, CallerRole role) const;
  // The same for a raw "authorization" header value (tests, other
  // transports).
  absl::Status CheckHeader(const std::string* header, CallerRole role) const;

  bool open(CallerRole role) const;

 private:
  AuthTokens tokens_;
};

}  // namespace quant::server

#endif  // QUANT_SERVER_AUTH_H_

// grpc.health.v1.Health/Check without generated stubs: the request and the
// response are one-field protobufs, encoded here by hand, because the health
// proto's generated code is not part of the installed gRPC headers. The one
// probe the tests and the reliability benchmarks share.
#ifndef QUANT_CLIENT_HEALTH_PROBE_H_
#define QUANT_CLIENT_HEALTH_PROBE_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/channel.h"

namespace quant {

// The serving status of `service` ("" = the whole server): 1 SERVING,
// 2 NOT_SERVING, 0 UNKNOWN; an error when the call itself fails.
absl::StatusOr<int> CheckHealth(const std::shared_ptr<grpc::Channel>& channel,
                                const std::string& service);

}  // namespace quant

#endif  // QUANT_CLIENT_HEALTH_PROBE_H_

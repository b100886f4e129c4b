// quantd's --listen address: HOST:PORT, and whether HOST is loopback.
// Without client tokens (not implemented yet) quantd listens on loopback
// only.
#ifndef QUANT_SERVER_LISTEN_ADDRESS_H_
#define QUANT_SERVER_LISTEN_ADDRESS_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace quant::server {

// OK for "127.0.0.1:50051", "localhost:0", "[::1]:8080" (any 127.x.y.z);
// InvalidArgument naming the address otherwise, or when it is not
// HOST:PORT with a port in 0..65535.
absl::Status CheckLoopbackListenAddress(absl::string_view address);

}  // namespace quant::server

#endif  // QUANT_SERVER_LISTEN_ADDRESS_H_

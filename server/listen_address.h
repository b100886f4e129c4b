// quantd's --listen address: HOST:PORT, and whether HOST is loopback.
// Without client and worker tokens anyone who can connect could submit jobs
// or pose as a worker, so quantd then listens on loopback only.
#ifndef QUANT_SERVER_LISTEN_ADDRESS_H_
#define QUANT_SERVER_LISTEN_ADDRESS_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace quant::server {

// InvalidArgument naming the address when it is not HOST:PORT with a port
// in 0..65535, or, unless `authenticated`, when HOST is not loopback
// ("127.0.0.1:50051", "localhost:0", "[::1]:8080", any 127.x.y.z).
absl::Status CheckListenAddress(absl::string_view address, bool authenticated);

}  // namespace quant::server

#endif  // QUANT_SERVER_LISTEN_ADDRESS_H_

// quantd's --listen address: HOST:PORT, whether HOST is loopback, and the
// address its local workers dial.
// Without client and worker tokens anyone who can connect could submit jobs
// or pose as a worker, so quantd then listens on loopback only.
#ifndef QUANT_SERVER_LISTEN_ADDRESS_H_
#define QUANT_SERVER_LISTEN_ADDRESS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace quant::server {

// InvalidArgument naming the address when it is not HOST:PORT with a port
// in 0..65535, or, unless `authenticated`, when HOST is not loopback
// ("127.0.0.1:50051", "localhost:0", "[::1]:8080", any 127.x.y.z).
absl::Status CheckListenAddress(absl::string_view address, bool authenticated);

// Where quantd's own --local_workers dial it, given its checked --listen
// address and the port it got: the listen host itself, since a server bound
// to one interface (a pod's or a veth's address) is not reachable on
// loopback, or loopback when it listens on every interface ("0.0.0.0",
// "[::]", ""). With TLS a loopback dial uses "localhost", the name a
// certificate carries; any other host must be in the certificate.
std::string LocalDialAddress(absl::string_view listen, int port, bool tls);

}  // namespace quant::server

#endif  // QUANT_SERVER_LISTEN_ADDRESS_H_

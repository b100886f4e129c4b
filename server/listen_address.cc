// CheckListenAddress: parse HOST:PORT; require a loopback host without auth.
#include "server/listen_address.h"

#include <arpa/inet.h>

#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace quant::server {

absl::Status CheckListenAddress(absl::string_view address, bool authenticated) {
  const size_t colon = address.rfind(':');
  int port = -1;
  if (colon == absl::string_view::npos ||
      !absl::SimpleAtoi(address.substr(colon + 1), &port) || port < 0 ||
      port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--listen: \"", address, "\" is not HOST:PORT (port 0..65535)"));
  }
  if (authenticated) return absl::OkStatus();
  std::string host(address.substr(0, colon));
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  bool loopback = host == "localhost";
  in_addr v4;
  in6_addr v6;
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) {
    loopback = (ntohl(v4.s_addr) >> 24) == 127;
  } else if (inet_pton(AF_INET6, host.c_str(), &v6) == 1) {
    loopback = IN6_IS_ADDR_LOOPBACK(&v6);
  }
  if (loopback) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "--listen: \"", address,
      "\" is not a loopback address; without --client_token_file and "
      "--worker_token_file quantd listens only on 127.0.0.1, ::1 or "
      "localhost"));
}

}  // namespace quant::server

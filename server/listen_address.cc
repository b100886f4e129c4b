// CheckListenAddress: parse HOST:PORT; require a loopback host without auth.
// LocalDialAddress: the address quantd's local workers connect to.
#include "server/listen_address.h"

#include <arpa/inet.h>

#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace quant::server {
namespace {

// "localhost", any 127.x.y.z, or ::1 (bracketed or not).
bool IsLoopbackHost(absl::string_view bracketed) {
  std::string host(bracketed);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (host == "localhost") return true;
  in_addr v4;
  in6_addr v6;
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) {
    return (ntohl(v4.s_addr) >> 24) == 127;
  }
  return inet_pton(AF_INET6, host.c_str(), &v6) == 1 &&
         IN6_IS_ADDR_LOOPBACK(&v6);
}

}  // namespace

absl::Status CheckListenAddress(absl::string_view address, bool authenticated) {
  const size_t colon = address.rfind(':');
  int port = -1;
  if (colon == absl::string_view::npos ||
      !absl::SimpleAtoi(address.substr(colon + 1), &port) || port < 0 ||
      port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--listen: \"", address, "\" is not HOST:PORT (port 0..65535)"));
  }
  if (authenticated || IsLoopbackHost(address.substr(0, colon))) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--listen: \"", address,
      "\" is not a loopback address; without --client_token_file and "
      "--worker_token_file quantd listens only on 127.0.0.1, ::1 or "
      "localhost"));
}

std::string LocalDialAddress(absl::string_view listen, int port, bool tls) {
  const size_t colon = listen.rfind(':');
  const absl::string_view host =
      colon == absl::string_view::npos ? "" : listen.substr(0, colon);
  const bool every_interface =
      host.empty() || host == "0.0.0.0" || host == "[::]" || host == "::";
  if (every_interface || (tls && IsLoopbackHost(host))) {
    return absl::StrCat(tls ? "localhost" : "127.0.0.1", ":", port);
  }
  return absl::StrCat(host, ":", port);
}

}  // namespace quant::server

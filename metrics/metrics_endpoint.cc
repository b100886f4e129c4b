// MetricsEndpoint: address parsing, and the Exposer whose exceptions stop
// here (civetweb throws when it cannot bind).
#include "metrics/metrics_endpoint.h"

#include <arpa/inet.h>

#include <exception>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace quant::metrics {
namespace {

struct HostPort {
  std::string host;  // An IPv4 literal.
  int port = 0;
};

absl::StatusOr<HostPort> ParseAddress(absl::string_view address,
                                      absl::string_view flag) {
  auto invalid = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": \"", address, "\" ", why));
  };
  const size_t colon = address.rfind(':');
  HostPort result;
  if (colon == absl::string_view::npos ||
      !absl::SimpleAtoi(address.substr(colon + 1), &result.port) ||
      result.port < 0 || result.port > 65535) {
    return invalid("is not HOST:PORT (port 0..65535)");
  }
  const std::string host(address.substr(0, colon));
  if (host == "localhost") {
    result.host = "127.0.0.1";
    return result;
  }
  in_addr v4;
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) {
    result.host = host;
    return result;
  }
  // Debian 12's civetweb is built without IPv6: it cannot bind "[::1]".
  in6_addr v6;
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']' &&
      inet_pton(AF_INET6, host.substr(1, host.size() - 2).c_str(), &v6) == 1) {
    return invalid(
        "is IPv6, which the metrics server (civetweb) cannot bind; use an "
        "IPv4 address (0.0.0.0 for every interface) or localhost");
  }
  return invalid(
      "has no valid host: use an IPv4 address (0.0.0.0 for every "
      "interface) or localhost");
}

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsEndpoint>> MetricsEndpoint::Start(
    absl::string_view address, std::shared_ptr<prometheus::Registry> registry,
    absl::string_view flag) {
  if (registry == nullptr) {
    return absl::InvalidArgumentError("metrics endpoint: registry is null");
  }
  absl::StatusOr<HostPort> host_port = ParseAddress(address, flag);
  if (!host_port.ok()) return host_port.status();
  const std::string bind = absl::StrCat(host_port->host, ":", host_port->port);
  std::unique_ptr<prometheus::Exposer> exposer;
  std::vector<int> ports;
  // prometheus-cpp reports bind failures by throwing; nothing else in the
  // project sees the exception.
  try {
    exposer = std::make_unique<prometheus::Exposer>(bind);
    exposer->RegisterCollectable(registry);
    ports = exposer->GetListeningPorts();
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat(
        flag, ": cannot serve /metrics on \"", address, "\": ", e.what()));
  }
  if (ports.size() != 1 || ports[0] <= 0) {
    return absl::InternalError(absl::StrCat(flag, ": /metrics on \"", address,
                                            "\" reports ", ports.size(),
                                            " listening ports instead of one"));
  }
  return std::unique_ptr<MetricsEndpoint>(
      new MetricsEndpoint(std::move(exposer), std::move(registry), ports[0],
                          absl::StrCat(host_port->host, ":", ports[0])));
}

MetricsEndpoint::MetricsEndpoint(std::unique_ptr<prometheus::Exposer> exposer,
                                 std::shared_ptr<prometheus::Registry> registry,
                                 int port, std::string address)
    : registry_(std::move(registry)),
      exposer_(std::move(exposer)),
      port_(port),
      address_(std::move(address)) {}

// The exposer goes first (members are destroyed in reverse order), so no
// request can still be collecting from the registry.
MetricsEndpoint::~MetricsEndpoint() = default;

}  // namespace quant::metrics

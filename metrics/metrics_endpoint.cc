// MetricsEndpoint: address parsing, the server whose exceptions stop here
// (civetweb throws when it cannot bind), /metrics and the added pages.
#include "metrics/metrics_endpoint.h"

#include <arpa/inet.h>

#include <exception>
#include <utility>
#include <vector>

#include "CivetServer.h"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "civetweb.h"
#include "prometheus/text_serializer.h"

namespace quant::metrics {
namespace {

void Respond(mg_connection* connection, const HttpResponse& response) {
  mg_printf(connection,
            "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
            "Cache-Control: no-store\r\nConnection: close\r\n\r\n",
            response.status,
            mg_get_response_code_text(connection, response.status),
            response.content_type.c_str(), response.body.size());
  mg_write(connection, response.body.data(), response.body.size());
}

// GET /metrics: the registry's samples, collected per request.
class MetricsHandler : public CivetHandler {
 public:
  explicit MetricsHandler(std::shared_ptr<prometheus::Registry> registry)
      : registry_(std::move(registry)) {}

  bool handleGet(CivetServer*, mg_connection* connection) override {
    HttpResponse response;
    response.content_type = "text/plain; version=0.0.4; charset=utf-8";
    response.body =
        prometheus::TextSerializer().Serialize(registry_->Collect());
    Respond(connection, response);
    return true;
  }

 private:
  std::shared_ptr<prometheus::Registry> registry_;
};

class RouteHandler : public CivetHandler {
 public:
  explicit RouteHandler(PageRoute route) : route_(std::move(route)) {}

  bool handleGet(CivetServer*, mg_connection* connection) override {
    const mg_request_info* info = mg_get_request_info(connection);
    HttpRequest request;
    if (info != nullptr && info->local_uri != nullptr) {
      request.path = info->local_uri;
    }
    if (const char* header = mg_get_header(connection, "Authorization");
        header != nullptr) {
      request.authorization = header;
    }
    Respond(connection, route_.handler(request));
    return true;
  }

 private:
  PageRoute route_;
};

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
    absl::string_view flag, std::vector<PageRoute> routes) {
  if (registry == nullptr) {
    return absl::InvalidArgumentError("metrics endpoint: registry is null");
  }
  for (const PageRoute& route : routes) {
    if (route.prefix.empty() || route.prefix[0] != '/' ||
        route.prefix == "/metrics" || !route.handler) {
      return absl::InvalidArgumentError(absl::StrCat(
          "metrics endpoint: bad page route \"", route.prefix, "\""));
    }
  }
  absl::StatusOr<HostPort> host_port = ParseAddress(address, flag);
  if (!host_port.ok()) return host_port.status();
  const std::string bind = absl::StrCat(host_port->host, ":", host_port->port);
  std::unique_ptr<MetricsEndpoint> endpoint(new MetricsEndpoint());
  endpoint->registry_ = registry;
  std::vector<std::string> prefixes = {"/metrics"};
  endpoint->handlers_.push_back(std::make_unique<MetricsHandler>(registry));
  for (PageRoute& route : routes) {
    prefixes.push_back(route.prefix);
    endpoint->handlers_.push_back(
        std::make_unique<RouteHandler>(std::move(route)));
  }
  std::vector<int> ports;
  // civetweb reports bind failures by throwing; nothing else in the
  // project sees the exception.
  try {
    endpoint->server_ = std::make_unique<CivetServer>(
        std::vector<std::string>{"listening_ports", bind, "num_threads", "2"});
    for (size_t i = 0; i < prefixes.size(); ++i) {
      endpoint->server_->addHandler(prefixes[i], endpoint->handlers_[i].get());
    }
    ports = endpoint->server_->getListeningPorts();
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat(
        flag, ": cannot serve /metrics on \"", address, "\": ", e.what()));
  }
  if (ports.size() != 1 || ports[0] <= 0) {
    return absl::InternalError(absl::StrCat(flag, ": /metrics on \"", address,
                                            "\" reports ", ports.size(),
                                            " listening ports instead of one"));
  }
  endpoint->port_ = ports[0];
  endpoint->address_ = absl::StrCat(host_port->host, ":", ports[0]);
  return endpoint;
}

MetricsEndpoint::~MetricsEndpoint() {
  // Stop the server (its threads finish their requests) before the
  // handlers and the registry they use go.
  server_.reset();
}

}  // namespace quant::metrics

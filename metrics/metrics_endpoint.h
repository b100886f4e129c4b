// MetricsEndpoint: serves one prometheus::Registry at http://HOST:PORT/metrics
// in the text format (prometheus-cpp's TextSerializer, civetweb's server),
// and any pages the program adds beside it (quantd: /jobs/ID/report). quantd
// and quant-worker each start one from their --metrics_listen flag.
//
// Destroying it stops the server; once it has served a request this takes
// about 2 s (civetweb's shutdown waits out its worker threads), so tests
// start few.
#ifndef QUANT_METRICS_METRICS_ENDPOINT_H_
#define QUANT_METRICS_METRICS_ENDPOINT_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "prometheus/registry.h"

class CivetServer;
class CivetHandler;

namespace quant::metrics {

struct HttpRequest {
  std::string path;           // decoded, e.g. "/jobs/job-000042/report"
  std::string authorization;  // the Authorization header, "" when none
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

// GET requests for `prefix` and paths below it ("/jobs" takes "/jobs/...")
// go to `handler`, on the server's threads.
struct PageRoute {
  std::string prefix;
  std::function<HttpResponse(const HttpRequest&)> handler;
};

class MetricsEndpoint {
 public:
  // Binds `address`, "HOST:PORT" with HOST an IPv4 literal ("0.0.0.0":
  // every interface) or "localhost" (127.0.0.1), and PORT 0..65535 (0: any
  // free port; see port()). IPv6 is refused: Debian 12's civetweb is built
  // without it. `flag` names the setting in error messages.
  // InvalidArgument naming the value for a malformed or IPv6 address;
  // Unavailable when the socket cannot be bound (port in use, address not
  // local).
  static absl::StatusOr<std::unique_ptr<MetricsEndpoint>> Start(
      absl::string_view address, std::shared_ptr<prometheus::Registry> registry,
      absl::string_view flag = "--metrics_listen",
      std::vector<PageRoute> routes = {});

  MetricsEndpoint(const MetricsEndpoint&) = delete;
  MetricsEndpoint& operator=(const MetricsEndpoint&) = delete;
  ~MetricsEndpoint();

  // The bound port (the chosen one when started with port 0).
  int port() const { return port_; }
  // The bound address: "127.0.0.1:41237" ("localhost" shows as 127.0.0.1).
  const std::string& address() const { return address_; }

 private:
  MetricsEndpoint() = default;

  std::shared_ptr<prometheus::Registry> registry_;
  std::vector<std::unique_ptr<CivetHandler>> handlers_;
  // Last, so destroyed first: no request runs once the handlers go.
  std::unique_ptr<CivetServer> server_;
  int port_ = 0;
  std::string address_;
};

}  // namespace quant::metrics

#endif  // QUANT_METRICS_METRICS_ENDPOINT_H_

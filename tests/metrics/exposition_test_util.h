// Test helpers for the metrics tests: parse the text exposition into
// series -> value, fetch a URL over a real TCP connection, and run
// `promtool check metrics` on a body.
#ifndef QUANT_TESTS_METRICS_EXPOSITION_TEST_UTIL_H_
#define QUANT_TESTS_METRICS_EXPOSITION_TEST_UTIL_H_

#include <map>
#include <string>

#include "absl/status/statusor.h"

namespace quant::metrics::testing {

// Every sample line of a text exposition, keyed by the series exactly as
// printed ("name{label=\"value\",...}"; prometheus-cpp sorts labels by
// name, a histogram's le last). Comment and blank lines are skipped; a line
// that is not "SERIES VALUE" makes it fail with the line.
absl::StatusOr<std::map<std::string, double>> ParseSamples(
    const std::string& text);

// How many series of `samples` have a label `name="value"`.
int CountWithLabel(const std::map<std::string, double>& samples,
                   const std::string& name, const std::string& value);

struct HttpResponse {
  int status = 0;            // 200
  std::string content_type;  // "text/plain; version=0.0.4"
  std::string body;
};

// GET http://127.0.0.1:PORT/PATH with HTTP/1.0 (the server closes the
// connection after the body); 10 s timeouts on every socket call.
// `authorization`: an Authorization header's value, none when empty.
absl::StatusOr<HttpResponse> HttpGet(int port, const std::string& path,
                                     const std::string& authorization = "");

struct PromtoolResult {
  int exit_code = -1;  // 0: the body passed.
  std::string output;  // promtool's stdout and stderr.
};

// Whether promtool is on PATH.
bool HavePromtool();
// Runs `promtool check metrics` with `body` on stdin.
absl::StatusOr<PromtoolResult> PromtoolCheckMetrics(const std::string& body);

}  // namespace quant::metrics::testing

// Skips the test when promtool is absent, except under CI=true, where the
// dependency script must have installed it.
#define QUANT_REQUIRE_PROMTOOL()                                          \
  do {                                                                    \
    if (!::quant::metrics::testing::HavePromtool()) {                     \
      if (::quant::testing::RunningInCi()) {                              \
        FAIL() << "CI=true but promtool is not on PATH";                  \
      }                                                                   \
      GTEST_SKIP() << "promtool not on PATH (Debian package prometheus; " \
                      "scripts/install_deps.sh installs it)";             \
    }                                                                     \
  } while (0)

#endif  // QUANT_TESTS_METRICS_EXPOSITION_TEST_UTIL_H_

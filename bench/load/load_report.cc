// FormatTable and FormatJson for the load test's result.
#include "bench/load/load_report.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"

namespace quant::load {
namespace {

double Rate(int64_t count, double seconds) {
  return seconds > 0 ? static_cast<double>(count) / seconds : 0;
}

int64_t TotalRequests(const LoadResult& result) {
  int64_t total = 0;
  for (const RpcSummary& rpc : result.rpcs) total += rpc.requests;
  return total;
}

}  // namespace

std::string FormatTable(const LoadResult& result) {
  std::string out = absl::StrFormat(
      "quant_loadtest: %.1f s, %d clients, %d local workers\n\n",
      result.seconds, result.clients, result.workers);
  absl::StrAppendFormat(&out, "%-18s %9s %9s %9s %9s %9s %7s\n", "method",
                        "requests", "rps", "p50 ms", "p99 ms", "max ms",
                        "errors");
  for (const RpcSummary& rpc : result.rpcs) {
    absl::StrAppendFormat(&out, "%-18s %9d %9.1f %9.2f %9.2f %9.2f %7d\n",
                          rpc.name, rpc.requests,
                          Rate(rpc.requests, result.seconds), rpc.p50_ms,
                          rpc.p99_ms, rpc.max_ms, rpc.errors);
  }
  const int64_t total = TotalRequests(result);
  absl::StrAppendFormat(&out, "%-18s %9d %9.1f\n\n", "all", total,
                        Rate(total, result.seconds));
  absl::StrAppendFormat(
      &out,
      "jobs created %d, completed %d, failed %d, still queued/running %d "
      "(after a %.1f s drain)\n",
      result.jobs_created, result.jobs_completed, result.jobs_failed,
      result.jobs_pending, result.drain_seconds);
  absl::StrAppendFormat(&out, "errors %d\nlost %d\n", result.errors,
                        result.jobs_lost);
  for (const std::string& sample : result.error_samples) {
    absl::StrAppend(&out, "  error: ", sample, "\n");
  }
  if (!result.temp_dir.empty()) {
    absl::StrAppend(&out, "quantd's folder (log, data) kept: ", result.temp_dir,
                    "\n");
  }
  absl::StrAppend(&out, result.ok() ? "PASS\n" : "FAIL\n");
  return out;
}

std::string FormatJson(const LoadResult& result) {
  nlohmann::json rpcs = nlohmann::json::array();
  for (const RpcSummary& rpc : result.rpcs) {
    rpcs.push_back({{"method", rpc.name},
                    {"requests", rpc.requests},
                    {"rps", Rate(rpc.requests, result.seconds)},
                    {"p50_ms", rpc.p50_ms},
                    {"p99_ms", rpc.p99_ms},
                    {"max_ms", rpc.max_ms},
                    {"errors", rpc.errors}});
  }
  const int64_t total = TotalRequests(result);
  nlohmann::json json = {{"seconds", result.seconds},
                         {"clients", result.clients},
                         {"workers", result.workers},
                         {"rpcs", rpcs},
                         {"requests", total},
                         {"rps", Rate(total, result.seconds)},
                         {"jobs_created", result.jobs_created},
                         {"jobs_completed", result.jobs_completed},
                         {"jobs_failed", result.jobs_failed},
                         {"jobs_pending", result.jobs_pending},
                         {"lost", result.jobs_lost},
                         {"errors", result.errors},
                         {"error_samples", result.error_samples},
                         {"drain_seconds", result.drain_seconds},
                         {"temp_dir", result.temp_dir},
                         {"ok", result.ok()}};
  return json.dump();
}

}  // namespace quant::load

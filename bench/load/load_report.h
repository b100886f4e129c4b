// The load test's result as a table for people and as one line of JSON for
// tests and scripts.
#ifndef QUANT_BENCH_LOAD_LOAD_REPORT_H_
#define QUANT_BENCH_LOAD_LOAD_REPORT_H_

#include <string>

#include "bench/load/load_run.h"

namespace quant::load {

// Method, requests, rps, p50 ms, p99 ms, errors per RPC; then the totals,
// the jobs and the error samples.
std::string FormatTable(const LoadResult& result);

// {"seconds":..,"clients":..,"workers":..,"rpcs":[{"method":..,
// "requests":..,"rps":..,"p50_ms":..,"p99_ms":..,"max_ms":..,"errors":..}],
// "requests":..,"rps":..,"jobs_created":..,"jobs_completed":..,
// "jobs_failed":..,"jobs_pending":..,"lost":..,"errors":..,
// "error_samples":[..],"drain_seconds":..,"ok":..}
std::string FormatJson(const LoadResult& result);

}  // namespace quant::load

#endif  // QUANT_BENCH_LOAD_LOAD_REPORT_H_

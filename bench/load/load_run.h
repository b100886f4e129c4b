// The load test from start to end: quantd with local workers in a fresh
// temporary folder, client threads for a bounded time, a bounded drain of
// the queued jobs, the check that no created job vanished, and quantd's
// clean stop on SIGTERM.
#ifndef QUANT_BENCH_LOAD_LOAD_RUN_H_
#define QUANT_BENCH_LOAD_LOAD_RUN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "bench/load/latency_recorder.h"

namespace quant::load {

struct LoadOptions {
  absl::Duration duration = absl::Seconds(60);
  int clients = 8;
  int workers = 2;          // quantd --local-workers.
  std::string quantd_path;  // The quantd program.
  std::string shared_dir;   // Holds models/stories260K and data/.
  // After the clients stop: how long to wait for queued jobs to finish.
  absl::Duration drain = absl::Seconds(30);
  int max_pending_per_client = 2;
  uint64_t seed = 1;
  bool keep_temp = false;  // Keep quantd's folder (always kept on failure).
};

struct LoadResult {
  double seconds = 0;  // The clients' window.
  int clients = 0;
  int workers = 0;
  std::vector<RpcSummary> rpcs;
  int64_t jobs_created = 0;
  int64_t jobs_completed = 0;  // SUCCEEDED at the end.
  int64_t jobs_failed = 0;     // FAILED or CANCELLED (also errors).
  int64_t jobs_pending = 0;    // Still QUEUED or RUNNING after the drain.
  // Created jobs that GetJob or the full ListJobs no longer shows.
  int64_t jobs_lost = 0;
  double drain_seconds = 0;
  int64_t errors = 0;
  std::vector<std::string> error_samples;
  std::string temp_dir;  // Set when kept.

  bool ok() const { return errors == 0 && jobs_lost == 0 && jobs_created > 0; }
};

// Errors only for a run that could not start (missing quantd or shared
// data, quantd not listening); everything that goes wrong under load is in
// the result.
absl::StatusOr<LoadResult> RunLoadTest(const LoadOptions& options);

}  // namespace quant::load

#endif  // QUANT_BENCH_LOAD_LOAD_RUN_H_

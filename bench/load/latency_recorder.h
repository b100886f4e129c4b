// Per-RPC tallies for the load test: every call's latency, the calls that
// failed unexpectedly, and a few of their messages. Shared by the client
// threads; a mutex is cheap next to a loopback RPC.
#ifndef QUANT_BENCH_LOAD_LATENCY_RECORDER_H_
#define QUANT_BENCH_LOAD_LATENCY_RECORDER_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "core/base/mutex.h"

namespace quant::load {

// The calls the clients make; a CreateJob replay (same request_id, same
// request) is its own row because it takes another path in quantd.
enum class Rpc {
  kCreateJob,
  kCreateJobReplay,
  kGetJob,
  kListJobs,
  kWatchJob,
  kGetJobReport,
};
inline constexpr int kRpcCount = 6;

// "CreateJob", "CreateJob(replay)", ...
const char* RpcName(Rpc rpc);

struct RpcSummary {
  std::string name;
  int64_t requests = 0;
  int64_t errors = 0;
  double p50_ms = 0;
  double p99_ms = 0;
  double max_ms = 0;
};

class LatencyRecorder {
 public:
  void Record(Rpc rpc, absl::Duration latency);
  // An unexpected outcome of a call (recorded with Record too); `what` is
  // kept among the first few samples.
  void RecordError(Rpc rpc, const std::string& what);
  // An error outside the timed calls (drain, final checks, quantd).
  void RecordOtherError(const std::string& what);

  std::vector<RpcSummary> Summaries() const;
  int64_t TotalErrors() const;
  std::vector<std::string> ErrorSamples() const;

 private:
  static constexpr size_t kMaxSamples = 20;

  mutable Mutex mutex_;
  std::array<std::vector<double>, kRpcCount> latencies_ms_
      ABSL_GUARDED_BY(mutex_);
  std::array<int64_t, kRpcCount> errors_ ABSL_GUARDED_BY(mutex_){};
  int64_t other_errors_ ABSL_GUARDED_BY(mutex_) = 0;
  std::vector<std::string> samples_ ABSL_GUARDED_BY(mutex_);
};

// Nearest-rank percentile (p in [0, 1]) of unsorted values; 0 when empty.
double Percentile(std::vector<double> values, double p);

}  // namespace quant::load

#endif  // QUANT_BENCH_LOAD_LATENCY_RECORDER_H_

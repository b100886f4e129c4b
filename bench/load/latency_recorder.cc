// LatencyRecorder: per-RPC latencies and unexpected errors.
#include "bench/load/latency_recorder.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace quant::load {

const char* RpcName(Rpc rpc) {
  switch (rpc) {
    case Rpc::kCreateJob:
      return "CreateJob";
    case Rpc::kCreateJobReplay:
      return "CreateJob(replay)";
    case Rpc::kGetJob:
      return "GetJob";
    case Rpc::kListJobs:
      return "ListJobs";
    case Rpc::kWatchJob:
      return "WatchJob";
    case Rpc::kGetJobReport:
      return "GetJobReport";
  }
  return "?";
}

void LatencyRecorder::Record(Rpc rpc, absl::Duration latency) {
  MutexLock lock(&mutex_);
  latencies_ms_[static_cast<int>(rpc)].push_back(
      absl::ToDoubleMilliseconds(latency));
}

void LatencyRecorder::RecordError(Rpc rpc, const std::string& what) {
  MutexLock lock(&mutex_);
  ++errors_[static_cast<int>(rpc)];
  if (samples_.size() < kMaxSamples) {
    samples_.push_back(absl::StrCat(RpcName(rpc), ": ", what));
  }
}

void LatencyRecorder::RecordOtherError(const std::string& what) {
  MutexLock lock(&mutex_);
  ++other_errors_;
  if (samples_.size() < kMaxSamples) samples_.push_back(what);
}

std::vector<RpcSummary> LatencyRecorder::Summaries() const {
  MutexLock lock(&mutex_);
  std::vector<RpcSummary> out;
  for (int i = 0; i < kRpcCount; ++i) {
    const std::vector<double>& values = latencies_ms_[i];
    RpcSummary summary;
    summary.name = RpcName(static_cast<Rpc>(i));
    summary.requests = static_cast<int64_t>(values.size());
    summary.errors = errors_[i];
    summary.p50_ms = Percentile(values, 0.50);
    summary.p99_ms = Percentile(values, 0.99);
    summary.max_ms = Percentile(values, 1.0);
    out.push_back(summary);
  }
  return out;
}

int64_t LatencyRecorder::TotalErrors() const {
  MutexLock lock(&mutex_);
  int64_t total = other_errors_;
  for (int64_t e : errors_) total += e;
  return total;
}

std::vector<std::string> LatencyRecorder::ErrorSamples() const {
  MutexLock lock(&mutex_);
  return samples_;
}

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const double rank = std::ceil(p * static_cast<double>(values.size()));
  const size_t index =
      rank < 1 ? 0 : std::min(values.size() - 1, static_cast<size_t>(rank) - 1);
  return values[index];
}

}  // namespace quant::load

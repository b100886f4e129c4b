// The load test's own bookkeeping: percentiles, the per-RPC tallies and the
// registry of created jobs that the lost-job check relies on.
#include <random>
#include <string>
#include <vector>

#include "bench/load/job_registry.h"
#include "bench/load/latency_recorder.h"
#include "gtest/gtest.h"

namespace quant::load {
namespace {

TEST(PercentileTest, NearestRank) {
  std::vector<double> values;
  for (int i = 100; i >= 1; --i) values.push_back(i);
  EXPECT_EQ(Percentile(values, 0.50), 50);
  EXPECT_EQ(Percentile(values, 0.99), 99);
  EXPECT_EQ(Percentile(values, 1.0), 100);
  EXPECT_EQ(Percentile(values, 0.0), 1);
  EXPECT_EQ(Percentile({}, 0.5), 0);
  EXPECT_EQ(Percentile({7}, 0.99), 7);
}

TEST(LatencyRecorderTest, CountsRequestsAndErrorsPerRpc) {
  LatencyRecorder recorder;
  recorder.Record(Rpc::kGetJob, absl::Milliseconds(2));
  recorder.Record(Rpc::kGetJob, absl::Milliseconds(4));
  recorder.RecordError(Rpc::kGetJob, "status 5: not found");
  recorder.RecordOtherError("quantd exited with status 1");
  const std::vector<RpcSummary> summaries = recorder.Summaries();
  ASSERT_EQ(summaries.size(), static_cast<size_t>(kRpcCount));
  const RpcSummary& get = summaries[static_cast<int>(Rpc::kGetJob)];
  EXPECT_EQ(get.name, "GetJob");
  EXPECT_EQ(get.requests, 2);
  EXPECT_EQ(get.errors, 1);
  EXPECT_DOUBLE_EQ(get.p50_ms, 2);
  EXPECT_DOUBLE_EQ(get.p99_ms, 4);
  EXPECT_EQ(summaries[static_cast<int>(Rpc::kListJobs)].requests, 0);
  EXPECT_EQ(recorder.TotalErrors(), 2);
  EXPECT_EQ(recorder.ErrorSamples(),
            (std::vector<std::string>{"GetJob: status 5: not found",
                                      "quantd exited with status 1"}));
}

TEST(JobRegistryTest, RefusesAnIdTwiceAndKeepsTerminalStates) {
  JobRegistry registry;
  EXPECT_TRUE(registry.Add({"a", {}}));
  EXPECT_TRUE(registry.Add({"b", {}}));
  EXPECT_FALSE(registry.Add({"a", {}}));  // A new request made an old job.
  EXPECT_EQ(registry.size(), 2u);

  std::mt19937_64 rng(1);
  EXPECT_FALSE(registry.RandomFinished(rng).has_value());
  registry.Observe("a", v1::JOB_STATE_SUCCEEDED);
  // A stale response does not bring a finished job back.
  registry.Observe("a", v1::JOB_STATE_RUNNING);
  registry.Observe("unknown", v1::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(registry.Pending({"a", "b", "unknown"}),
            std::vector<std::string>{"b"});
  EXPECT_EQ(registry.RandomFinished(rng), "a");
  EXPECT_EQ(registry.Ids(), (std::vector<std::string>{"a", "b"}));
}

}  // namespace
}  // namespace quant::load

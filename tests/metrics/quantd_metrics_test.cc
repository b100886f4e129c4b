// QuantdMetrics through its text exposition: exact series and values for
// every event, label validation, and the retention rule that keeps the
// number of job series bounded.
#include "metrics/quantd_metrics.h"

#include <algorithm>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "metrics/text_exposition.h"
#include "tests/metrics/exposition_test_util.h"

namespace quant::metrics {
namespace {

using testing::CountWithLabel;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::ParseSamples;

std::map<std::string, double> Samples(const QuantdMetrics& metrics) {
  auto samples = ParseSamples(TextExposition(*metrics.registry()));
  EXPECT_TRUE(samples.ok()) << samples.status();
  return samples.ok() ? *samples : std::map<std::string, double>();
}

// The value of `series`, or -12345 when it is absent (never a real value
// here), so that a missing series fails EXPECT_EQ with a clear number.
double Value(const std::map<std::string, double>& samples,
             const std::string& series) {
  auto it = samples.find(series);
  return it == samples.end() ? -12345 : it->second;
}

// Series whose name starts with `prefix`.
int CountSeries(const std::map<std::string, double>& samples,
                const std::string& prefix) {
  int count = 0;
  for (const auto& [series, unused] : samples) {
    if (series.rfind(prefix, 0) == 0) ++count;
  }
  return count;
}

const absl::Time kStart = absl::FromUnixSeconds(1'700'000'000);

LayerResult Layer(const std::string& name, const std::string& type,
                  double base) {
  LayerResult layer;
  layer.name = name;
  layer.type = type;
  layer.rel_output_error_cal = base;
  layer.rel_output_error_heldout = base * 1.5;
  layer.gain_cal = 2 + base;
  layer.gain_heldout = 1 + base;
  return layer;
}

TEST(QuantdMetricsTest, FixedSeriesStartAtZeroAndNoJobSeriesExist) {
  QuantdMetrics metrics;
  const auto samples = Samples(metrics);
  for (const char* state :
       {"queued", "running", "succeeded", "failed", "cancelled"}) {
    EXPECT_EQ(Value(samples, absl::StrCat("quant_jobs{state=\"", state, "\"}")),
              0)
        << state;
  }
  for (const char* kind : {"block", "finalize"}) {
    for (const char* counter : {"started", "completed", "failed", "retried"}) {
      EXPECT_EQ(Value(samples, absl::StrCat("quant_tasks_", counter,
                                            "_total{kind=\"", kind, "\"}")),
                0)
          << counter << " " << kind;
    }
    EXPECT_EQ(Value(samples, absl::StrCat("quant_task_duration_seconds_count{"
                                          "kind=\"",
                                          kind, "\"}")),
              0);
  }
  EXPECT_EQ(Value(samples, "quant_queue_depth"), 0);
  EXPECT_EQ(Value(samples, "quant_lease_expiries_total"), 0);
  for (const char* state : {"idle", "busy", "lost"}) {
    EXPECT_EQ(
        Value(samples, absl::StrCat("quant_workers{state=\"", state, "\"}")),
        0);
  }
  EXPECT_EQ(CountSeries(samples, "quant_job_"), 0);
  EXPECT_EQ(CountSeries(samples, "quant_layer_"), 0);
  EXPECT_EQ(CountSeries(samples, "quant_rpc_"), 0);
}

TEST(QuantdMetricsTest, JobCountsQueueDepthAndWorkers) {
  QuantdMetrics metrics;
  metrics.SetJobCounts({/*queued=*/3, /*running=*/2, /*succeeded=*/7,
                        /*failed=*/1, /*cancelled=*/4});
  metrics.SetQueueDepth(11);
  metrics.SetWorkerCounts({/*idle=*/5, /*busy=*/2, /*lost=*/1});
  auto samples = Samples(metrics);
  EXPECT_EQ(Value(samples, "quant_jobs{state=\"queued\"}"), 3);
  EXPECT_EQ(Value(samples, "quant_jobs{state=\"running\"}"), 2);
  EXPECT_EQ(Value(samples, "quant_jobs{state=\"succeeded\"}"), 7);
  EXPECT_EQ(Value(samples, "quant_jobs{state=\"failed\"}"), 1);
  EXPECT_EQ(Value(samples, "quant_jobs{state=\"cancelled\"}"), 4);
  EXPECT_EQ(Value(samples, "quant_queue_depth"), 11);
  EXPECT_EQ(Value(samples, "quant_workers{state=\"idle\"}"), 5);
  EXPECT_EQ(Value(samples, "quant_workers{state=\"busy\"}"), 2);
  EXPECT_EQ(Value(samples, "quant_workers{state=\"lost\"}"), 1);

  // A later count replaces, including states that drop to zero.
  metrics.SetJobCounts({/*queued=*/0, /*running=*/1, /*succeeded=*/8,
                        /*failed=*/1, /*cancelled=*/4});
  samples = Samples(metrics);
  EXPECT_EQ(Value(samples, "quant_jobs{state=\"queued\"}"), 0);
  EXPECT_EQ(Value(samples, "quant_jobs{state=\"running\"}"), 1);
}

TEST(QuantdMetricsTest, ProgressRatioUsesLayersOnceKnownElseBlocks) {
  QuantdMetrics metrics;
  ASSERT_TRUE(metrics
                  .SetJobProgress("job-1", {/*blocks_done=*/1,
                                            /*blocks_total=*/4,
                                            /*layers_done=*/0,
                                            /*layers_total=*/0,
                                            /*eta_seconds=*/std::nullopt})
                  .ok());
  auto samples = Samples(metrics);
  EXPECT_DOUBLE_EQ(Value(samples, "quant_job_progress_ratio{job_id=\"job-1\"}"),
                   0.25);
  EXPECT_EQ(Value(samples, "quant_job_blocks_done{job_id=\"job-1\"}"), 1);
  EXPECT_EQ(Value(samples, "quant_job_blocks_planned{job_id=\"job-1\"}"), 4);
  EXPECT_EQ(Value(samples, "quant_job_layers_done{job_id=\"job-1\"}"), 0);
  EXPECT_EQ(Value(samples, "quant_job_layers_planned{job_id=\"job-1\"}"), 0);

  ASSERT_TRUE(
      metrics.SetJobProgress("job-1", {2, 4, 21, 28, std::nullopt}).ok());
  samples = Samples(metrics);
  EXPECT_DOUBLE_EQ(Value(samples, "quant_job_progress_ratio{job_id=\"job-1\"}"),
                   0.75);
  EXPECT_EQ(Value(samples, "quant_job_layers_done{job_id=\"job-1\"}"), 21);

  ASSERT_TRUE(
      metrics.SetJobProgress("job-1", {4, 4, 28, 28, std::nullopt}).ok());
  samples = Samples(metrics);
  EXPECT_EQ(Value(samples, "quant_job_progress_ratio{job_id=\"job-1\"}"), 1);
  // One series per gauge for the job, however often it is set.
  EXPECT_EQ(CountWithLabel(samples, "job_id", "job-1"), 5);
}

// quant_job_eta_seconds: present while the ETA is known, gone when not.
TEST(QuantdMetricsTest, EtaSeriesFollowsWhetherTheEtaIsKnown) {
  QuantdMetrics metrics;
  ASSERT_TRUE(metrics.SetJobProgress("job-1", {1, 4, 7, 28, 93.5}).ok());
  auto samples = Samples(metrics);
  EXPECT_DOUBLE_EQ(Value(samples, "quant_job_eta_seconds{job_id=\"job-1\"}"),
                   93.5);
  EXPECT_EQ(CountWithLabel(samples, "job_id", "job-1"), 6);
  ASSERT_TRUE(metrics.SetJobProgress("job-1", {2, 4, 14, 28, 40.0}).ok());
  samples = Samples(metrics);
  EXPECT_DOUBLE_EQ(Value(samples, "quant_job_eta_seconds{job_id=\"job-1\"}"),
                   40.0);
  ASSERT_TRUE(
      metrics.SetJobProgress("job-1", {2, 4, 14, 28, std::nullopt}).ok());
  samples = Samples(metrics);
  EXPECT_EQ(CountWithLabel(samples, "job_id", "job-1"), 5);
  EXPECT_EQ(samples.count("quant_job_eta_seconds{job_id=\"job-1\"}"), 0u)
      << "the series outlived its ETA";
}

TEST(QuantdMetricsTest, BadProgressIsRefusedNamingTheFieldAndRecordsNothing) {
  QuantdMetrics metrics;
  absl::Status status =
      metrics.SetJobProgress("job-1", {5, 4, 0, 0, std::nullopt});
  EXPECT_TRUE(absl::IsInvalidArgument(status));
  EXPECT_THAT(status.message(), HasSubstr("blocks_done"));
  status = metrics.SetJobProgress("job-1", {0, 4, -1, 10, std::nullopt});
  EXPECT_TRUE(absl::IsInvalidArgument(status));
  EXPECT_THAT(status.message(), HasSubstr("layers_done"));
  status = metrics.SetJobProgress("job-1", {0, -4, 0, 10, std::nullopt});
  EXPECT_THAT(status.message(), HasSubstr("blocks_total"));
  status = metrics.SetJobProgress("", {0, 4, 0, 10, std::nullopt});
  EXPECT_TRUE(absl::IsInvalidArgument(status));
  EXPECT_THAT(status.message(), HasSubstr("job_id"));
  EXPECT_TRUE(absl::IsInvalidArgument(
      metrics.OnLayerFinished("job-1", Layer("", "q_proj", 0.1))));
  EXPECT_THAT(
      metrics.OnLayerFinished("job-1", Layer("model.layers.0.x", "", 0.1))
          .message(),
      HasSubstr("layer.type"));
  EXPECT_TRUE(absl::IsInvalidArgument(metrics.SetGateValues("", {})));
  EXPECT_TRUE(absl::IsInvalidArgument(metrics.OnJobFinished("", kStart)));
  const auto samples = Samples(metrics);
  EXPECT_EQ(CountSeries(samples, "quant_job_"), 0);
  EXPECT_EQ(CountSeries(samples, "quant_layer_"), 0);
}

TEST(QuantdMetricsTest, LayerErrorAndGainPerSplit) {
  QuantdMetrics metrics;
  LayerResult layer;
  layer.name = "model.layers.0.self_attn.q_proj";
  layer.type = "q_proj";
  layer.rel_output_error_cal = 0.0125;
  layer.rel_output_error_heldout = 0.0175;
  layer.gain_cal = 3.5;
  layer.gain_heldout = 0.875;
  ASSERT_TRUE(metrics.OnLayerFinished("job-7", layer).ok());
  const auto samples = Samples(metrics);
  const std::string labels =
      "job_id=\"job-7\",layer=\"model.layers.0.self_attn.q_proj\",split=\"";
  EXPECT_DOUBLE_EQ(Value(samples, "quant_layer_rel_output_error{" + labels +
                                      "calibration\",type=\"q_proj\"}"),
                   0.0125);
  EXPECT_DOUBLE_EQ(Value(samples, "quant_layer_rel_output_error{" + labels +
                                      "heldout\",type=\"q_proj\"}"),
                   0.0175);
  EXPECT_DOUBLE_EQ(Value(samples, "quant_layer_gain_over_rtn{" + labels +
                                      "calibration\",type=\"q_proj\"}"),
                   3.5);
  EXPECT_DOUBLE_EQ(Value(samples, "quant_layer_gain_over_rtn{" + labels +
                                      "heldout\",type=\"q_proj\"}"),
                   0.875);
  EXPECT_EQ(CountSeries(samples, "quant_layer_"), 4);
}

TEST(QuantdMetricsTest, ExpertsAreOneSeriesPerTypeHoldingTheWorstExpert) {
  QuantdMetrics metrics;
  // 128 experts x 3 layer types of one block: bases 0.01 .. 1.28, the
  // worst (highest error, lowest gain) not the last.
  for (int e = 0; e < 128; ++e) {
    for (const char* type : {"gate_proj", "up_proj", "down_proj"}) {
      const double base = e == 77 ? 2.0 : 0.01 * (e + 1);
      LayerResult layer =
          Layer(absl::StrCat("model.layers.3.mlp.experts.", e, ".", type), type,
                base);
      layer.gain_heldout = e == 77 ? 0.25 : 1 + base;
      ASSERT_TRUE(metrics.OnLayerFinished("job-9", layer).ok());
    }
  }
  const auto samples = Samples(metrics);
  // 3 types x 2 splits x 2 metrics, whatever the number of experts.
  EXPECT_EQ(CountSeries(samples, "quant_layer_"), 12);
  const std::string labels =
      "job_id=\"job-9\",layer=\"model.layers.3.mlp.experts\",split=\"";
  EXPECT_DOUBLE_EQ(Value(samples, "quant_layer_rel_output_error{" + labels +
                                      "heldout\",type=\"down_proj\"}"),
                   3.0);
  EXPECT_DOUBLE_EQ(Value(samples, "quant_layer_rel_output_error{" + labels +
                                      "calibration\",type=\"gate_proj\"}"),
                   2.0);
  EXPECT_DOUBLE_EQ(Value(samples, "quant_layer_gain_over_rtn{" + labels +
                                      "heldout\",type=\"up_proj\"}"),
                   0.25);
  // The lowest calibration gain is the first expert's 2 + 0.01.
  EXPECT_DOUBLE_EQ(Value(samples, "quant_layer_gain_over_rtn{" + labels +
                                      "calibration\",type=\"up_proj\"}"),
                   2.01);
}

TEST(QuantdMetricsTest, GateValues) {
  QuantdMetrics metrics;
  ASSERT_TRUE(metrics
                  .SetGateValues("job-2", {/*ppl_ratio=*/1.0625,
                                           /*mean_kl=*/0.03125,
                                           /*top1_agreement=*/0.9375,
                                           /*passed=*/true})
                  .ok());
  ASSERT_TRUE(metrics.SetGateValues("job-3", {1.5, 0.25, 0.5, false}).ok());
  const auto samples = Samples(metrics);
  EXPECT_EQ(Value(samples, "quant_job_gate_ppl_ratio{job_id=\"job-2\"}"),
            1.0625);
  EXPECT_EQ(Value(samples, "quant_job_gate_mean_kl{job_id=\"job-2\"}"),
            0.03125);
  EXPECT_EQ(
      Value(samples, "quant_job_gate_top1_agreement_ratio{job_id=\"job-2\"}"),
      0.9375);
  EXPECT_EQ(Value(samples, "quant_job_gates_passed{job_id=\"job-2\"}"), 1);
  EXPECT_EQ(Value(samples, "quant_job_gates_passed{job_id=\"job-3\"}"), 0);
  EXPECT_EQ(Value(samples, "quant_job_gate_ppl_ratio{job_id=\"job-3\"}"), 1.5);
}

TEST(QuantdMetricsTest, TaskCountersAndDurationHistogram) {
  QuantdMetrics metrics;
  for (int i = 0; i < 3; ++i) metrics.OnTaskStarted(TaskKind::kBlock);
  metrics.OnTaskStarted(TaskKind::kFinalize);
  metrics.OnTaskCompleted(TaskKind::kBlock, absl::Milliseconds(20));
  metrics.OnTaskCompleted(TaskKind::kBlock, absl::Seconds(30));
  metrics.OnTaskFailed(TaskKind::kBlock);
  metrics.OnTaskRetried(TaskKind::kBlock);
  metrics.OnTaskCompleted(TaskKind::kFinalize, absl::Hours(2));
  metrics.OnLeasesExpired(2);
  metrics.OnLeasesExpired(0);
  metrics.OnLeasesExpired(-1);  // Ignored: counters never go down.
  const auto samples = Samples(metrics);
  EXPECT_EQ(Value(samples, "quant_tasks_started_total{kind=\"block\"}"), 3);
  EXPECT_EQ(Value(samples, "quant_tasks_started_total{kind=\"finalize\"}"), 1);
  EXPECT_EQ(Value(samples, "quant_tasks_completed_total{kind=\"block\"}"), 2);
  EXPECT_EQ(Value(samples, "quant_tasks_failed_total{kind=\"block\"}"), 1);
  EXPECT_EQ(Value(samples, "quant_tasks_failed_total{kind=\"finalize\"}"), 0);
  EXPECT_EQ(Value(samples, "quant_tasks_retried_total{kind=\"block\"}"), 1);
  EXPECT_EQ(Value(samples, "quant_lease_expiries_total"), 2);

  const std::string block = "quant_task_duration_seconds";
  EXPECT_EQ(Value(samples, block + "_count{kind=\"block\"}"), 2);
  EXPECT_DOUBLE_EQ(Value(samples, block + "_sum{kind=\"block\"}"), 30.02);
  EXPECT_EQ(Value(samples, block + "_bucket{kind=\"block\",le=\"0.01\"}"), 0);
  EXPECT_EQ(Value(samples, block + "_bucket{kind=\"block\",le=\"0.025\"}"), 1);
  EXPECT_EQ(Value(samples, block + "_bucket{kind=\"block\",le=\"25\"}"), 1);
  EXPECT_EQ(Value(samples, block + "_bucket{kind=\"block\",le=\"50\"}"), 2);
  EXPECT_EQ(Value(samples, block + "_bucket{kind=\"block\",le=\"3600\"}"), 2);
  EXPECT_EQ(Value(samples, block + "_bucket{kind=\"block\",le=\"+Inf\"}"), 2);
  // Two hours lies past the last finite bucket (1 h).
  EXPECT_EQ(Value(samples, block + "_bucket{kind=\"finalize\",le=\"3600\"}"),
            0);
  EXPECT_EQ(Value(samples, block + "_bucket{kind=\"finalize\",le=\"+Inf\"}"),
            1);
}

TEST(QuantdMetricsTest, RpcCountsByMethodAndCodeAndLatencyByMethod) {
  QuantdMetrics metrics;
  const std::string create = "quant.v1.QuantService/CreateJob";
  metrics.OnRpcFinished(create, absl::StatusCode::kOk, absl::Milliseconds(4));
  metrics.OnRpcFinished(create, absl::StatusCode::kOk, absl::Milliseconds(6));
  metrics.OnRpcFinished(create, absl::StatusCode::kInvalidArgument,
                        absl::Microseconds(300));
  metrics.OnRpcFinished("quant.v1.QuantService/GetJob",
                        absl::StatusCode::kNotFound, absl::Milliseconds(1));
  const auto samples = Samples(metrics);
  EXPECT_EQ(Value(samples, "quant_rpc_requests_total{code=\"OK\",method=\"" +
                               create + "\"}"),
            2);
  EXPECT_EQ(Value(samples,
                  "quant_rpc_requests_total{code=\"INVALID_ARGUMENT\",method="
                  "\"" +
                      create + "\"}"),
            1);
  EXPECT_EQ(Value(samples,
                  "quant_rpc_requests_total{code=\"NOT_FOUND\",method=\"quant."
                  "v1.QuantService/GetJob\"}"),
            1);
  EXPECT_EQ(CountSeries(samples, "quant_rpc_requests_total"), 3);
  EXPECT_EQ(Value(samples, "quant_rpc_duration_seconds_count{method=\"" +
                               create + "\"}"),
            3);
  EXPECT_DOUBLE_EQ(Value(samples, "quant_rpc_duration_seconds_sum{method=\"" +
                                      create + "\"}"),
                   0.0103);
  EXPECT_EQ(Value(samples, "quant_rpc_duration_seconds_bucket{method=\"" +
                               create + "\",le=\"0.0005\"}"),
            1);
  EXPECT_EQ(Value(samples, "quant_rpc_duration_seconds_bucket{method=\"" +
                               create + "\",le=\"0.005\"}"),
            2);
}

// Records progress, three layers and gates for `job_id`: 5 + 12 + 4 series.
void RunJob(QuantdMetrics& metrics, const std::string& job_id) {
  ASSERT_TRUE(metrics.SetJobProgress(job_id, {1, 1, 3, 3, std::nullopt}).ok());
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(metrics
                    .OnLayerFinished(
                        job_id, Layer(absl::StrCat("model.layers.0.mlp.p", i),
                                      "up_proj", 0.01 * (i + 1)))
                    .ok());
  }
  ASSERT_TRUE(metrics.SetGateValues(job_id, {1.01, 0.02, 0.95, true}).ok());
}
constexpr int kSeriesPerJob = 5 + 12 + 4;

TEST(QuantdMetricsTest, FinishedJobSeriesGoAfterRetentionRunningJobsStay) {
  QuantdMetricsOptions options;
  options.retention = absl::Minutes(10);
  QuantdMetrics metrics(options);
  RunJob(metrics, "job-done");
  RunJob(metrics, "job-running");
  ASSERT_TRUE(metrics.OnJobFinished("job-done", kStart).ok());
  const int fixed_series =
      CountSeries(Samples(metrics), "quant_") - 2 * kSeriesPerJob;

  // Within the window nothing goes, however often RemoveExpired runs; a
  // second OnJobFinished does not restart the window.
  EXPECT_EQ(metrics.RemoveExpired(kStart), 0);
  ASSERT_TRUE(
      metrics.OnJobFinished("job-done", kStart + absl::Minutes(5)).ok());
  EXPECT_EQ(
      metrics.RemoveExpired(kStart + absl::Minutes(10) - absl::Seconds(1)), 0);
  auto samples = Samples(metrics);
  EXPECT_EQ(CountWithLabel(samples, "job_id", "job-done"), kSeriesPerJob);
  EXPECT_EQ(CountWithLabel(samples, "job_id", "job-running"), kSeriesPerJob);
  EXPECT_DOUBLE_EQ(
      Value(samples,
            "quant_layer_rel_output_error{job_id=\"job-done\",layer=\"model."
            "layers.0.mlp.p2\",split=\"heldout\",type=\"up_proj\"}"),
      0.01 * 3 * 1.5);

  // At the window's end every series of the finished job goes; the running
  // job's stay, as do the fixed series.
  EXPECT_EQ(metrics.RemoveExpired(kStart + absl::Minutes(10)), 1);
  samples = Samples(metrics);
  EXPECT_EQ(CountWithLabel(samples, "job_id", "job-done"), 0);
  EXPECT_EQ(CountWithLabel(samples, "job_id", "job-running"), kSeriesPerJob);
  EXPECT_EQ(CountSeries(samples, "quant_"), fixed_series + kSeriesPerJob);
  EXPECT_EQ(metrics.RemoveExpired(kStart + absl::Hours(100)), 0);

  // The running job is removed only once it too has finished and expired.
  ASSERT_TRUE(
      metrics.OnJobFinished("job-running", kStart + absl::Hours(1)).ok());
  EXPECT_EQ(metrics.RemoveExpired(kStart + absl::Hours(1) + absl::Minutes(10)),
            1);
  EXPECT_EQ(CountSeries(Samples(metrics), "quant_"), fixed_series);
}

TEST(QuantdMetricsTest, RetriedJobKeepsItsSeriesUntilItFinishesAgain) {
  QuantdMetricsOptions options;
  options.retention = absl::Minutes(10);
  QuantdMetrics metrics(options);
  RunJob(metrics, "job-retried");
  ASSERT_TRUE(metrics.OnJobFinished("job-retried", kStart).ok());  // FAILED.
  ASSERT_TRUE(metrics.OnJobRestarted("job-retried").ok());         // Retry.
  EXPECT_EQ(metrics.RemoveExpired(kStart + absl::Hours(1)), 0);
  EXPECT_EQ(CountWithLabel(Samples(metrics), "job_id", "job-retried"),
            kSeriesPerJob);
  // Finished again: a new window from then.
  ASSERT_TRUE(
      metrics.OnJobFinished("job-retried", kStart + absl::Hours(2)).ok());
  EXPECT_EQ(metrics.RemoveExpired(kStart + absl::Hours(2)), 0);
  EXPECT_EQ(metrics.RemoveExpired(kStart + absl::Hours(2) + absl::Minutes(10)),
            1);
  EXPECT_EQ(CountWithLabel(Samples(metrics), "job_id", "job-retried"), 0);
  EXPECT_TRUE(metrics.OnJobRestarted("job-unknown").ok());
  EXPECT_FALSE(metrics.OnJobRestarted("").ok());
}

TEST(QuantdMetricsTest, JobSeriesStayBoundedOverManyJobs) {
  // One job a minute, each running 3 minutes, retention 10 minutes: jobs
  // m-12..m have series at minute m (3 running, 10 finished within the
  // window), however many have run.
  QuantdMetricsOptions options;
  options.retention = absl::Minutes(10);
  QuantdMetrics metrics(options);
  const int fixed_series = CountSeries(Samples(metrics), "quant_");
  int max_series = 0;
  for (int minute = 0; minute < 60; ++minute) {
    const absl::Time now = kStart + absl::Minutes(minute);
    RunJob(metrics, absl::StrCat("job-", minute));
    if (minute >= 3) {
      ASSERT_TRUE(
          metrics.OnJobFinished(absl::StrCat("job-", minute - 3), now).ok());
    }
    metrics.RemoveExpired(now);
    const int job_series =
        CountSeries(Samples(metrics), "quant_") - fixed_series;
    max_series = std::max(max_series, job_series);
    ASSERT_LE(job_series, 13 * kSeriesPerJob) << "minute " << minute;
  }
  // The bound is reached (the window is full), not just never approached.
  EXPECT_EQ(max_series, 13 * kSeriesPerJob);
  // The last job finished at minute 59 + 3; after its window nothing is left.
  for (int minute = 57; minute < 60; ++minute) {
    ASSERT_TRUE(metrics
                    .OnJobFinished(absl::StrCat("job-", minute),
                                   kStart + absl::Minutes(62))
                    .ok());
  }
  metrics.RemoveExpired(kStart + absl::Minutes(72));
  const auto samples = Samples(metrics);
  EXPECT_EQ(CountSeries(samples, "quant_"), fixed_series);
  EXPECT_EQ(CountSeries(samples, "quant_layer_"), 0);
}

TEST(QuantdMetricsTest, ConcurrentUpdatesRemovalAndCollection) {
  QuantdMetricsOptions options;
  options.retention = absl::Seconds(1);
  QuantdMetrics metrics(options);
  constexpr int kThreads = 4;
  constexpr int kRounds = 200;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&metrics, t] {
      for (int i = 0; i < kRounds; ++i) {
        const std::string job = absl::StrCat("job-", t, "-", i);
        metrics.OnTaskStarted(TaskKind::kBlock);
        EXPECT_TRUE(
            metrics.SetJobProgress(job, {0, 1, 1, 2, std::nullopt}).ok());
        EXPECT_TRUE(
            metrics.OnLayerFinished(job, Layer("l", "q_proj", 0.1)).ok());
        EXPECT_TRUE(metrics.OnJobFinished(job, kStart).ok());
        metrics.RemoveExpired(kStart + absl::Seconds(i % 2 == 0 ? 0 : 5));
        metrics.OnRpcFinished("m", absl::StatusCode::kOk,
                              absl::Milliseconds(1));
        TextExposition(*metrics.registry());
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  metrics.RemoveExpired(kStart + absl::Seconds(5));
  const auto samples = Samples(metrics);
  EXPECT_EQ(Value(samples, "quant_tasks_started_total{kind=\"block\"}"),
            kThreads * kRounds);
  EXPECT_EQ(
      Value(samples, "quant_rpc_requests_total{code=\"OK\",method=\"m\"}"),
      kThreads * kRounds);
  EXPECT_EQ(CountSeries(samples, "quant_job_"), 0);
  EXPECT_EQ(CountSeries(samples, "quant_layer_"), 0);
}

}  // namespace
}  // namespace quant::metrics

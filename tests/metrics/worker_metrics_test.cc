// WorkerMetrics through its text exposition: task outcomes and durations,
// the current-task series and busy slots, core throughput, and refusals.
#include "metrics/worker_metrics.h"

#include <cmath>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "metrics/text_exposition.h"
#include "tests/metrics/exposition_test_util.h"

namespace quant::metrics {
namespace {

using testing::CountWithLabel;
using ::testing::HasSubstr;
using testing::ParseSamples;

std::map<std::string, double> Samples(const WorkerMetrics& metrics) {
  auto samples = ParseSamples(TextExposition(*metrics.registry()));
  EXPECT_TRUE(samples.ok()) << samples.status();
  return samples.ok() ? *samples : std::map<std::string, double>();
}

double Value(const std::map<std::string, double>& samples,
             const std::string& series) {
  auto it = samples.find(series);
  return it == samples.end() ? -12345 : it->second;
}

int CountSeries(const std::map<std::string, double>& samples,
                const std::string& prefix) {
  int count = 0;
  for (const auto& [series, unused] : samples) {
    if (series.rfind(prefix, 0) == 0) ++count;
  }
  return count;
}

TEST(WorkerMetricsTest, FixedSeriesStartAtZero) {
  WorkerMetrics metrics;
  const auto samples = Samples(metrics);
  for (const char* kind : {"block", "finalize"}) {
    for (const char* outcome :
         {"completed", "failed", "cancelled", "lease_lost"}) {
      EXPECT_EQ(
          Value(samples, absl::StrCat("quant_worker_tasks_total{kind=\"", kind,
                                      "\",outcome=\"", outcome, "\"}")),
          0)
          << kind << " " << outcome;
    }
    EXPECT_EQ(
        Value(samples, absl::StrCat("quant_worker_task_duration_seconds_count{"
                                    "kind=\"",
                                    kind, "\"}")),
        0);
  }
  EXPECT_EQ(
      Value(samples, "quant_worker_core_flops_per_second{core=\"hessian\"}"),
      0);
  EXPECT_EQ(Value(samples, "quant_worker_core_flops_per_second{core=\"gptq\"}"),
            0);
  EXPECT_EQ(Value(samples, "quant_worker_busy_slots"), 0);
  EXPECT_EQ(Value(samples, "quant_worker_slots"), 0);
  EXPECT_EQ(CountSeries(samples, "quant_worker_current_task"), 0);
}

TEST(WorkerMetricsTest, CurrentTasksBusySlotsOutcomesAndDurations) {
  WorkerMetrics metrics;
  metrics.SetSlots(2);
  ASSERT_TRUE(metrics.OnTaskStarted("job-1", 0).ok());
  ASSERT_TRUE(metrics.OnTaskStarted("job-1", 5).ok());
  auto samples = Samples(metrics);
  EXPECT_EQ(Value(samples, "quant_worker_slots"), 2);
  EXPECT_EQ(Value(samples, "quant_worker_busy_slots"), 2);
  EXPECT_EQ(
      Value(samples, "quant_worker_current_task{job_id=\"job-1\",task=\"0\"}"),
      1);
  EXPECT_EQ(
      Value(samples, "quant_worker_current_task{job_id=\"job-1\",task=\"5\"}"),
      1);
  EXPECT_EQ(CountSeries(samples, "quant_worker_current_task"), 2);

  ASSERT_TRUE(metrics
                  .OnTaskFinished("job-1", 0, TaskKind::kBlock,
                                  TaskOutcome::kCompleted, absl::Seconds(2))
                  .ok());
  samples = Samples(metrics);
  EXPECT_EQ(Value(samples, "quant_worker_busy_slots"), 1);
  EXPECT_EQ(CountSeries(samples, "quant_worker_current_task"), 1);
  EXPECT_EQ(
      Value(samples, "quant_worker_current_task{job_id=\"job-1\",task=\"5\"}"),
      1);
  EXPECT_EQ(
      Value(samples,
            "quant_worker_tasks_total{kind=\"block\",outcome=\"completed\""
            "}"),
      1);
  EXPECT_EQ(Value(samples,
                  "quant_worker_task_duration_seconds_count{kind=\"block\"}"),
            1);
  EXPECT_EQ(
      Value(samples, "quant_worker_task_duration_seconds_sum{kind=\"block\"}"),
      2);
  EXPECT_EQ(Value(samples,
                  "quant_worker_task_duration_seconds_bucket{kind=\"block\","
                  "le=\"1\"}"),
            0);
  EXPECT_EQ(Value(samples,
                  "quant_worker_task_duration_seconds_bucket{kind=\"block\","
                  "le=\"2.5\"}"),
            1);

  ASSERT_TRUE(metrics
                  .OnTaskFinished("job-1", 5, TaskKind::kFinalize,
                                  TaskOutcome::kLeaseLost,
                                  absl::Milliseconds(250))
                  .ok());
  samples = Samples(metrics);
  EXPECT_EQ(Value(samples, "quant_worker_busy_slots"), 0);
  EXPECT_EQ(CountWithLabel(samples, "job_id", "job-1"), 0);
  EXPECT_EQ(Value(samples,
                  "quant_worker_tasks_total{kind=\"finalize\",outcome=\"lease_"
                  "lost\"}"),
            1);
  EXPECT_EQ(Value(samples,
                  "quant_worker_task_duration_seconds_sum{kind=\"finalize\"}"),
            0.25);

  // The same task can run here again later (a retried attempt).
  ASSERT_TRUE(metrics.OnTaskStarted("job-1", 0).ok());
  EXPECT_EQ(Value(Samples(metrics),
                  "quant_worker_current_task{job_id=\"job-1\",task=\"0\"}"),
            1);
}

TEST(WorkerMetricsTest, RefusesDuplicateUnknownAndBadTasks) {
  WorkerMetrics metrics;
  ASSERT_TRUE(metrics.OnTaskStarted("job-1", 3).ok());
  absl::Status status = metrics.OnTaskStarted("job-1", 3);
  EXPECT_TRUE(absl::IsAlreadyExists(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("task 3 of job job-1"));
  status = metrics.OnTaskFinished("job-2", 3, TaskKind::kBlock,
                                  TaskOutcome::kFailed, absl::Seconds(1));
  EXPECT_TRUE(absl::IsNotFound(status)) << status;
  EXPECT_TRUE(absl::IsInvalidArgument(metrics.OnTaskStarted("", 1)));
  EXPECT_THAT(metrics.OnTaskStarted("job-1", -1).message(),
              HasSubstr("task_index"));
  const auto samples = Samples(metrics);
  EXPECT_EQ(Value(samples, "quant_worker_busy_slots"), 1);
  EXPECT_EQ(
      Value(samples,
            "quant_worker_tasks_total{kind=\"block\",outcome=\"failed\"}"),
      0);
  EXPECT_EQ(Value(samples,
                  "quant_worker_task_duration_seconds_count{kind=\"block\"}"),
            0);
}

TEST(WorkerMetricsTest, CoreThroughputIsTheLatestMeasurement) {
  WorkerMetrics metrics;
  ASSERT_TRUE(metrics
                  .RecordCoreThroughput(WorkerCore::kHessian, 3e9,
                                        absl::Milliseconds(1500))
                  .ok());
  ASSERT_TRUE(
      metrics
          .RecordCoreThroughput(WorkerCore::kGptq, 1e6, absl::Milliseconds(1))
          .ok());
  ASSERT_TRUE(
      metrics.RecordCoreThroughput(WorkerCore::kGptq, 5e8, absl::Seconds(1))
          .ok());
  auto samples = Samples(metrics);
  EXPECT_DOUBLE_EQ(
      Value(samples, "quant_worker_core_flops_per_second{core=\"hessian\"}"),
      2e9);
  EXPECT_DOUBLE_EQ(
      Value(samples, "quant_worker_core_flops_per_second{core=\"gptq\"}"), 5e8);

  EXPECT_THAT(
      metrics.RecordCoreThroughput(WorkerCore::kGptq, -1, absl::Seconds(1))
          .message(),
      HasSubstr("flops"));
  EXPECT_TRUE(absl::IsInvalidArgument(metrics.RecordCoreThroughput(
      WorkerCore::kGptq, std::nan(""), absl::Seconds(1))));
  EXPECT_THAT(
      metrics.RecordCoreThroughput(WorkerCore::kGptq, 1e9, absl::ZeroDuration())
          .message(),
      HasSubstr("elapsed"));
  EXPECT_TRUE(absl::IsInvalidArgument(metrics.RecordCoreThroughput(
      WorkerCore::kGptq, 1e9, absl::InfiniteDuration())));
  samples = Samples(metrics);
  EXPECT_DOUBLE_EQ(
      Value(samples, "quant_worker_core_flops_per_second{core=\"gptq\"}"), 5e8);
}

}  // namespace
}  // namespace quant::metrics

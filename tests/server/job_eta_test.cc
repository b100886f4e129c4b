// The job ETA (server/job_eta.h): the fleet's median rates, the remaining
// time from a job's counted work, scaled by its finished tasks, less what
// running tasks have run, and JobEta's elapsed time and ETA on a job.
#include "server/job_eta.h"

#include <optional>
#include <vector>

#include "absl/time/time.h"
#include "core/base/clock.h"
#include "gtest/gtest.h"
#include "server/task_plan.h"

namespace quant::server {
namespace {

WorkRates Rates(double forward, double hessian, double gptq) {
  WorkRates r;
  r.forward_flops_per_second = forward;
  r.hessian_flops_per_second = hessian;
  r.gptq_flops_per_second = gptq;
  return r;
}

// Two blocks of 10 s each at 1 flop/s per kind (4 forward, 3 Hessian,
// 3 GPTQ) and a finalize of 5 s.
JobWork TwoBlocks() {
  JobWork work;
  TaskWork block;
  block.forward_flops = 4;
  block.hessian_flops = 3;
  block.gptq_flops = 3;
  work.blocks = {block, block};
  work.finalize.forward_flops = 5;
  return work;
}

store::Task Task(int index, store::TaskKind kind, int block,
                 store::TaskState state) {
  store::Task t;
  t.job_id = "job-1";
  t.index = index;
  t.kind = kind;
  t.block = block;
  t.state = state;
  return t;
}

std::vector<store::Task> Tasks(store::TaskState b0, store::TaskState b1,
                               store::TaskState finalize) {
  return {Task(0, store::TaskKind::kBlock, 0, b0),
          Task(1, store::TaskKind::kBlock, 1, b1),
          Task(2, store::TaskKind::kFinalize, -1, finalize)};
}

constexpr store::TaskState kPending = store::TaskState::kPending;
constexpr store::TaskState kLeased = store::TaskState::kLeased;
constexpr store::TaskState kDone = store::TaskState::kDone;

FleetRates OneFlopPerSecond(int workers) {
  FleetRates fleet;
  fleet.rates = Rates(1, 1, 1);
  fleet.workers = workers;
  return fleet;
}

TEST(MedianRatesTest, MedianOfEachKindOverWorkersThatMeasured) {
  const FleetRates fleet = MedianRates(
      {Rates(1, 10, 100), Rates(3, 30, 300), Rates(2, 20, 200), WorkRates(),
       Rates(5, 0, 500)});  // Unknown and half-known ones do not count.
  EXPECT_EQ(fleet.workers, 3);
  EXPECT_DOUBLE_EQ(fleet.rates.forward_flops_per_second, 2);
  EXPECT_DOUBLE_EQ(fleet.rates.hessian_flops_per_second, 20);
  EXPECT_DOUBLE_EQ(fleet.rates.gptq_flops_per_second, 200);
  const FleetRates even = MedianRates({Rates(1, 1, 1), Rates(3, 5, 7)});
  EXPECT_DOUBLE_EQ(even.rates.forward_flops_per_second, 2);
  EXPECT_DOUBLE_EQ(even.rates.gptq_flops_per_second, 4);
  EXPECT_EQ(MedianRates({}).workers, 0);
  EXPECT_FALSE(MedianRates({WorkRates()}).rates.known());
}

TEST(PredictRemainingSecondsTest, EveryTaskLeftAtTheFleetsRates) {
  const auto eta = PredictRemainingSeconds(
      TwoBlocks(), Propagation::kSequential,
      Tasks(kPending, kPending, kPending), {}, OneFlopPerSecond(1));
  ASSERT_TRUE(eta.has_value());
  EXPECT_DOUBLE_EQ(*eta, 10 + 10 + 5);
}

TEST(PredictRemainingSecondsTest, FinishedTasksScaleThePrediction) {
  TaskTimes times;
  times.finished_seconds[0] = 20;  // Predicted 10: everything takes twice.
  const auto eta = PredictRemainingSeconds(
      TwoBlocks(), Propagation::kSequential, Tasks(kDone, kPending, kPending),
      times, OneFlopPerSecond(1));
  ASSERT_TRUE(eta.has_value());
  EXPECT_DOUBLE_EQ(*eta, 2 * (10 + 5));
}

TEST(PredictRemainingSecondsTest, RunningTasksCountWhatIsLeftOfThem) {
  TaskTimes times;
  times.running_seconds[1] = 4;
  auto eta = PredictRemainingSeconds(TwoBlocks(), Propagation::kSequential,
                                     Tasks(kDone, kLeased, kPending), times,
                                     OneFlopPerSecond(1));
  ASSERT_TRUE(eta.has_value());
  EXPECT_DOUBLE_EQ(*eta, (10 - 4) + 5);
  // Overdue: nothing left of it, not a negative time.
  times.running_seconds[1] = 60;
  eta = PredictRemainingSeconds(TwoBlocks(), Propagation::kSequential,
                                Tasks(kDone, kLeased, kPending), times,
                                OneFlopPerSecond(1));
  ASSERT_TRUE(eta.has_value());
  EXPECT_DOUBLE_EQ(*eta, 5);
}

TEST(PredictRemainingSecondsTest, IndependentBlocksRunSideBySide) {
  auto eta = PredictRemainingSeconds(TwoBlocks(), Propagation::kIndependent,
                                     Tasks(kPending, kPending, kPending), {},
                                     OneFlopPerSecond(4));
  ASSERT_TRUE(eta.has_value());
  EXPECT_DOUBLE_EQ(*eta, 10 + 5);  // Two blocks at once, then finalize.
  // Sequential ones cannot, whatever the fleet.
  eta = PredictRemainingSeconds(TwoBlocks(), Propagation::kSequential,
                                Tasks(kPending, kPending, kPending), {},
                                OneFlopPerSecond(4));
  EXPECT_DOUBLE_EQ(*eta, 25);
}

TEST(PredictRemainingSecondsTest, RoundTasksShareTheirBlocksWork) {
  // Each block as rounds of 2 calibration and 1 held-out shard: a round
  // task is an equal share of its block, a round's 3 shard tasks run side
  // by side.
  std::vector<store::Task> tasks;
  for (const store::TaskSpec& spec :
       PlanRoundTasks(2, RoundShardCounts{2, 1})) {
    store::Task t = Task(spec.index, spec.kind, spec.block, kPending);
    t.group = spec.group;
    t.split = spec.split;
    t.shard = spec.shard;
    tasks.push_back(t);
  }
  auto eta = PredictRemainingSeconds(TwoBlocks(), Propagation::kSequential,
                                     tasks, {}, OneFlopPerSecond(1));
  ASSERT_TRUE(eta.has_value());
  EXPECT_NEAR(*eta, 10 + 10 + 5, 1e-9);
  eta = PredictRemainingSeconds(TwoBlocks(), Propagation::kSequential, tasks,
                                {}, OneFlopPerSecond(8));
  ASSERT_TRUE(eta.has_value());
  EXPECT_NEAR(*eta, (10 + 10) / 3.0 + 5, 1e-9);
  // A finished round task that took twice its share doubles the rest.
  TaskTimes times;
  // Block 0 has 19 round tasks (4 x 3 shards, 4 reduces, 3 outputs).
  times.finished_seconds[0] = 2 * 10.0 / 19;
  tasks[0].state = kDone;
  eta = PredictRemainingSeconds(TwoBlocks(), Propagation::kSequential, tasks,
                                times, OneFlopPerSecond(1));
  ASSERT_TRUE(eta.has_value());
  EXPECT_NEAR(*eta, 2 * (10 - 10.0 / 19 + 10 + 5), 1e-9);
}

TEST(PredictRemainingSecondsTest, GatePartsShareTheFinalizesWork) {
  // The 5 s finalize as 4 parts of 1.25 s, side by side on 2 workers;
  // the pack and the completion are not counted.
  std::vector<store::TaskSpec> plan = PlanJobTasks(2, Propagation::kSequential);
  SplitFinalize(4, &plan);
  std::vector<store::Task> tasks;
  for (const store::TaskSpec& spec : plan) {
    store::Task t = Task(spec.index, spec.kind, spec.block, kPending);
    t.shard = spec.shard;
    tasks.push_back(t);
  }
  auto eta = PredictRemainingSeconds(TwoBlocks(), Propagation::kSequential,
                                     tasks, {}, OneFlopPerSecond(2));
  ASSERT_TRUE(eta.has_value());
  EXPECT_NEAR(*eta, 20 + 5 / 2.0, 1e-9);
  // One part done: three left, two at a time.
  tasks[3].state = kDone;
  eta = PredictRemainingSeconds(TwoBlocks(), Propagation::kSequential, tasks,
                                {}, OneFlopPerSecond(2));
  ASSERT_TRUE(eta.has_value());
  EXPECT_NEAR(*eta, 20 + 3 * 1.25 / 2, 1e-9);
}

TEST(PredictRemainingSecondsTest, WithoutRatesOnlyFinishedTasksGiveATime) {
  EXPECT_FALSE(PredictRemainingSeconds(TwoBlocks(), Propagation::kSequential,
                                       Tasks(kPending, kPending, kPending), {},
                                       FleetRates())
                   .has_value());
  TaskTimes times;
  times.finished_seconds[0] = 3;  // A block takes 3 s here.
  const auto eta = PredictRemainingSeconds(
      TwoBlocks(), Propagation::kSequential, Tasks(kDone, kPending, kPending),
      times, FleetRates());
  ASSERT_TRUE(eta.has_value());
  EXPECT_DOUBLE_EQ(*eta, 3 + 1.5);  // The finalize is half a block's work.
  EXPECT_DOUBLE_EQ(
      *PredictRemainingSeconds(TwoBlocks(), Propagation::kSequential,
                               Tasks(kDone, kDone, kDone), times, FleetRates()),
      0.0);
}

store::Job Job(store::JobState state, int64_t created_ms, int64_t updated_ms) {
  store::Job job;
  job.id = "job-1";
  job.state = state;
  job.created_ms = created_ms;
  job.updated_ms = updated_ms;
  return job;
}

TEST(JobEtaTest, ElapsedAndEtaOfAJobAsItsTasksRun) {
  FakeClock clock(1'000'000);
  JobEta eta(&clock, [] { return OneFlopPerSecond(1); });
  JobSpec spec;
  spec.work = TwoBlocks();
  const store::Job running = Job(store::JobState::kRunning, 1'000'000, 0);

  v1::Progress progress;
  eta.Fill(running, spec, Tasks(kPending, kPending, kPending), &progress);
  EXPECT_DOUBLE_EQ(progress.elapsed_seconds(), 0);
  ASSERT_TRUE(progress.has_eta_seconds());
  EXPECT_DOUBLE_EQ(progress.eta_seconds(), 25);

  // Block 0 leased, 4 s pass.
  eta.OnTaskLeased(Task(0, store::TaskKind::kBlock, 0, kLeased));
  clock.AdvanceMs(4'000);
  progress.Clear();
  eta.Fill(running, spec, Tasks(kLeased, kPending, kPending), &progress);
  EXPECT_DOUBLE_EQ(progress.elapsed_seconds(), 4);
  EXPECT_DOUBLE_EQ(progress.eta_seconds(), 21);

  // It finished after 5 s (half the predicted 10): the rest goes at that
  // pace.
  clock.AdvanceMs(1'000);
  eta.OnTaskCompleted(Task(0, store::TaskKind::kBlock, 0, kDone),
                      absl::Seconds(5));
  progress.Clear();
  eta.Fill(running, spec, Tasks(kDone, kPending, kPending), &progress);
  EXPECT_DOUBLE_EQ(progress.eta_seconds(), 0.5 * (10 + 5));

  // A job from before estimates: elapsed, no ETA.
  progress.Clear();
  eta.Fill(running, JobSpec(), Tasks(kDone, kPending, kPending), &progress);
  EXPECT_DOUBLE_EQ(progress.elapsed_seconds(), 5);
  EXPECT_FALSE(progress.has_eta_seconds());
}

TEST(JobEtaTest, EndedJobs) {
  FakeClock clock(1'000'000);
  JobEta eta(&clock, [] { return OneFlopPerSecond(1); });
  JobSpec spec;
  spec.work = TwoBlocks();
  clock.AdvanceMs(60'000);
  v1::Progress progress;
  // Elapsed stops at the end; nothing is left of a succeeded job.
  eta.Fill(Job(store::JobState::kSucceeded, 1'000'000, 1'030'000), spec,
           Tasks(kDone, kDone, kDone), &progress);
  EXPECT_DOUBLE_EQ(progress.elapsed_seconds(), 30);
  ASSERT_TRUE(progress.has_eta_seconds());
  EXPECT_DOUBLE_EQ(progress.eta_seconds(), 0);
  // A failed or cancelled one has no ETA.
  for (store::JobState state :
       {store::JobState::kFailed, store::JobState::kCancelled}) {
    progress.Clear();
    eta.Fill(Job(state, 1'000'000, 1'010'000), spec,
             Tasks(kDone, kPending, kPending), &progress);
    EXPECT_DOUBLE_EQ(progress.elapsed_seconds(), 10);
    EXPECT_FALSE(progress.has_eta_seconds());
  }
}

}  // namespace
}  // namespace quant::server

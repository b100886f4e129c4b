// SqliteJobStore on real database files in a temporary folder, driven by a
// FakeClock: idempotent creation, pagination, the task DAG, the lease
// protocol (expiry, late completions, bounded attempts), cancellation,
// retrying a failed job, events, restart from the same file, schema
// migration, bad files, and two connections leasing concurrently.
#include <atomic>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/store/sqlite_db.h"
#include "server/store/sqlite_job_store.h"
#include "tests/support/test_env.h"

namespace quant::store {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kSpec[] = R"({"model": "m", "recipe": {"bits": 4}})";
constexpr int64_t kLeaseMs = 10'000;

std::string Message(const absl::Status& status) {
  return std::string(status.message());
}

// `blocks` block tasks then a finalize task depending on all of them; with
// `sequential`, block i also depends on block i - 1.
std::vector<TaskSpec> Plan(int blocks, bool sequential) {
  std::vector<TaskSpec> tasks;
  for (int b = 0; b < blocks; ++b) {
    TaskSpec task;
    task.index = b;
    task.kind = TaskKind::kBlock;
    task.block = b;
    if (sequential && b > 0) task.depends_on = {b - 1};
    tasks.push_back(task);
  }
  TaskSpec finalize;
  finalize.index = blocks;
  finalize.kind = TaskKind::kFinalize;
  for (int b = 0; b < blocks; ++b) finalize.depends_on.push_back(b);
  tasks.push_back(finalize);
  return tasks;
}

class JobStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = quant::testing::MakeTempDir() + "/quantd.db";
    Reopen();
  }

  void Reopen(SqliteJobStoreOptions options = SqliteJobStoreOptions()) {
    store_.reset();
    auto store = SqliteJobStore::Open(path_, &clock_, options);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
  }

  // Creates a job with a plan; returns its id.
  std::string NewPlannedJob(const std::string& request_id, int blocks,
                            bool sequential) {
    auto created = store_->CreateJob(request_id, kSpec, {});
    EXPECT_TRUE(created.ok()) << created.status();
    if (!created.ok()) return "";
    const absl::Status planned =
        store_->PlanTasks(created->job.id, Plan(blocks, sequential));
    EXPECT_TRUE(planned.ok()) << planned;
    return created->job.id;
  }

  Lease MustLease(const std::string& worker = "w1", int64_t ms = kLeaseMs) {
    auto lease = store_->LeaseTask(worker, ms);
    EXPECT_TRUE(lease.ok()) << lease.status();
    if (!lease.ok() || !lease->has_value()) {
      ADD_FAILURE() << "no task to lease";
      return Lease();
    }
    return **lease;
  }

  bool NothingToLease() {
    auto lease = store_->LeaseTask("w-idle", kLeaseMs);
    EXPECT_TRUE(lease.ok()) << lease.status();
    return lease.ok() && !lease->has_value();
  }

  FakeClock clock_;
  std::string path_;
  std::unique_ptr<SqliteJobStore> store_;
};

TEST_F(JobStoreTest, CreateJobIsIdempotentByRequestId) {
  auto first = store_->CreateJob("req-1", kSpec, {{"team", "a"}});
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(first->created);
  EXPECT_EQ(first->job.id, "job-000001");
  EXPECT_EQ(first->job.state, JobState::kQueued);
  EXPECT_EQ(first->job.labels.at("team"), "a");
  EXPECT_EQ(first->job.created_ms, clock_.NowMs());

  // Same spec written differently: the same job, not a new one.
  auto again = store_->CreateJob(
      "req-1", R"({"recipe":{"bits":4},   "model":"m"})", {{"team", "a"}});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE(again->created);
  EXPECT_EQ(again->job.id, first->job.id);

  auto conflict = store_->CreateJob("req-1", R"({"model": "other"})", {});
  EXPECT_EQ(conflict.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(Message(conflict.status()), HasSubstr("req-1"));
  EXPECT_THAT(Message(conflict.status()), HasSubstr("job-000001"));

  auto second = store_->CreateJob("req-2", kSpec, {});
  ASSERT_TRUE(second.ok());
  EXPECT_TRUE(second->created);
  EXPECT_EQ(second->job.id, "job-000002");

  auto bad = store_->CreateJob("req-3", "{not json", {});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(bad.status()), HasSubstr("spec_json"));

  auto missing = store_->GetJob("job-000099");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Message(missing.status()), HasSubstr("job job-000099"));
}

TEST_F(JobStoreTest, ListJobsPaginatesAcrossPagesWithFilter) {
  std::vector<std::string> team_a;  // oldest first
  for (int i = 0; i < 9; ++i) {
    const std::string team = i % 3 == 0 ? "b" : "a";
    auto job =
        store_->CreateJob(absl::StrCat("req-", i), kSpec, {{"team", team}});
    ASSERT_TRUE(job.ok()) << job.status();
    if (team == "a") team_a.push_back(job->job.id);
  }
  ASSERT_EQ(team_a.size(), 6u);

  JobFilter filter;
  filter.label = std::make_pair(std::string("team"), std::string("a"));
  std::vector<std::string> seen;
  std::string token;
  int pages = 0;
  do {
    auto page = store_->ListJobs(4, token, filter);
    ASSERT_TRUE(page.ok()) << page.status();
    for (const Job& job : page->jobs) {
      EXPECT_EQ(job.labels.at("team"), "a");
      seen.push_back(job.id);
    }
    token = page->next_page_token;
    ++pages;
    if (pages == 1) {
      // A job created between pages is newer than every listed one: it
      // must not shift or repeat the later pages.
      ASSERT_TRUE(store_->CreateJob("req-late", kSpec, {{"team", "a"}}).ok());
    }
  } while (!token.empty() && pages < 10);
  EXPECT_EQ(pages, 2);
  const std::vector<std::string> newest_first(team_a.rbegin(), team_a.rend());
  EXPECT_EQ(seen, newest_first);

  // State filter.
  ASSERT_TRUE(store_->CancelJob(team_a[0]).ok());
  JobFilter cancelled;
  cancelled.state = JobState::kCancelled;
  auto page = store_->ListJobs(0, "", cancelled);
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->jobs.size(), 1u);
  EXPECT_EQ(page->jobs[0].id, team_a[0]);
  EXPECT_TRUE(page->next_page_token.empty());

  auto bad_token = store_->ListJobs(4, "not-a-token", filter);
  EXPECT_EQ(bad_token.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(bad_token.status()), HasSubstr("page_token"));
  auto bad_size = store_->ListJobs(1001, "", {});
  EXPECT_EQ(bad_size.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(bad_size.status()), HasSubstr("page_size"));
}

TEST_F(JobStoreTest, SequentialBlocksRunInOrderThenFinalize) {
  const std::string job = NewPlannedJob("req", 3, /*sequential=*/true);
  for (int b = 0; b < 3; ++b) {
    const Lease lease = MustLease();
    EXPECT_EQ(lease.task.job_id, job);
    EXPECT_EQ(lease.task.index, b);
    EXPECT_EQ(lease.task.kind, TaskKind::kBlock);
    EXPECT_EQ(lease.task.block, b);
    EXPECT_EQ(lease.task.attempts, 1);
    EXPECT_THAT(lease.job_spec_json, HasSubstr("\"bits\":4"));
    // Only the first lease starts the job.
    EXPECT_EQ(lease.job_started, b == 0);
    // Block b + 1 waits for block b.
    EXPECT_TRUE(NothingToLease());
    auto job_now = store_->GetJob(job);
    ASSERT_TRUE(job_now.ok());
    EXPECT_EQ(job_now->state, JobState::kRunning);
    auto done = store_->CompleteTask(lease.lease_id, absl::StrCat("out/", b),
                                     std::string(64, 'a' + b));
    ASSERT_TRUE(done.ok()) << done.status();
    EXPECT_EQ(done->task.state, TaskState::kDone);
    EXPECT_FALSE(done->all_tasks_done);
  }
  // What each completion verified is kept with its task.
  auto blocks_done = store_->ListTasks(job);
  ASSERT_TRUE(blocks_done.ok());
  for (int b = 0; b < 3; ++b) {
    EXPECT_EQ((*blocks_done)[b].output_sha256, std::string(64, 'a' + b));
  }
  auto before_finish = store_->FinishJob(job, Verdict::kPass, "art", {});
  EXPECT_EQ(before_finish.status().code(),
            absl::StatusCode::kFailedPrecondition);
  const Lease finalize = MustLease();
  EXPECT_EQ(finalize.task.kind, TaskKind::kFinalize);
  EXPECT_THAT(finalize.task.depends_on, ElementsAre(0, 1, 2));
  auto done = store_->CompleteTask(finalize.lease_id, "out/final");
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_TRUE(done->all_tasks_done);
  auto finished = store_->FinishJob(job, Verdict::kPass, "file:///art", {});
  ASSERT_TRUE(finished.ok()) << finished.status();
  EXPECT_EQ(finished->state, JobState::kSucceeded);
  EXPECT_EQ(finished->verdict, Verdict::kPass);
  EXPECT_EQ(finished->artifact_uri, "file:///art");
  EXPECT_DOUBLE_EQ(finished->progress, 1.0);
  EXPECT_TRUE(NothingToLease());
}

TEST_F(JobStoreTest, IndependentBlocksLeaseTogetherAndPlanIsValidated) {
  const std::string job = NewPlannedJob("req", 3, /*sequential=*/false);
  std::vector<Lease> leases;
  for (int b = 0; b < 3; ++b) leases.push_back(MustLease());
  EXPECT_EQ(leases[2].task.index, 2);
  EXPECT_TRUE(NothingToLease());  // finalize waits for all three
  for (const Lease& lease : leases) {
    ASSERT_TRUE(store_->Heartbeat(lease.lease_id, 0.5).ok());
  }
  auto half = store_->GetJob(job);
  ASSERT_TRUE(half.ok());
  EXPECT_NEAR(half->progress, 1.5 / 4, 1e-9);

  auto again = store_->PlanTasks(job, Plan(3, false));
  EXPECT_EQ(again.code(), absl::StatusCode::kFailedPrecondition);
  auto other = store_->CreateJob("req-2", kSpec, {});
  ASSERT_TRUE(other.ok());
  std::vector<TaskSpec> forward_dep = Plan(2, false);
  forward_dep[0].depends_on = {1};
  const absl::Status bad = store_->PlanTasks(other->job.id, forward_dep);
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(bad), HasSubstr("tasks[0].depends_on"));
}

TEST_F(JobStoreTest, ExpiredLeaseIsRequeuedAndLateCompletionRefused) {
  const std::string job = NewPlannedJob("req", 1, true);
  const Lease first = MustLease("w1", 1000);
  clock_.AdvanceMs(600);
  auto beat = store_->Heartbeat(first.lease_id, 0.25);
  ASSERT_TRUE(beat.ok()) << beat.status();
  EXPECT_EQ(beat->expires_ms, clock_.NowMs() + 1000);
  EXPECT_FALSE(beat->job_cancelled);
  clock_.AdvanceMs(600);  // still inside the renewed lease
  EXPECT_EQ(store_->ExpireLeases()->expired, 0);
  clock_.AdvanceMs(400);  // now past it
  auto expired = store_->ExpireLeases();
  ASSERT_TRUE(expired.ok());
  EXPECT_EQ(expired->expired, 1);
  EXPECT_EQ(*store_->LeaseExpiryCount(), 1);
  auto tasks = store_->ListTasks(job);
  ASSERT_TRUE(tasks.ok());
  EXPECT_EQ((*tasks)[0].state, TaskState::kPending);

  auto late = store_->CompleteTask(first.lease_id, "out/late");
  EXPECT_EQ(late.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(Message(late.status()), HasSubstr(first.lease_id));
  EXPECT_EQ(store_->Heartbeat(first.lease_id, 0.5).status().code(),
            absl::StatusCode::kFailedPrecondition);

  const Lease second = MustLease("w2", 1000);
  EXPECT_EQ(second.task.index, 0);
  EXPECT_EQ(second.task.attempts, 2);
  EXPECT_NE(second.lease_id, first.lease_id);
  // The superseded lease stays refused.
  EXPECT_EQ(store_->CompleteTask(first.lease_id, "x").status().code(),
            absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(store_->CompleteTask(second.lease_id, "out/0").ok());
  // First completion wins: the same lease cannot complete twice.
  EXPECT_EQ(store_->CompleteTask(second.lease_id, "out/again").status().code(),
            absl::StatusCode::kFailedPrecondition);
  tasks = store_->ListTasks(job);
  ASSERT_TRUE(tasks.ok());
  EXPECT_EQ((*tasks)[0].output_uri, "out/0");

  // A lease past its expiry is refused even before ExpireLeases runs.
  const Lease finalize = MustLease("w2", 1000);
  clock_.AdvanceMs(1000);
  EXPECT_EQ(store_->CompleteTask(finalize.lease_id, "x").status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(JobStoreTest, BoundedAttemptsFailTheJob) {
  SqliteJobStoreOptions options;
  options.max_attempts = 2;
  Reopen(options);
  const std::string job = NewPlannedJob("req", 2, true);
  const Lease first = MustLease();
  auto failed = store_->FailTask(first.lease_id, "out of memory");
  ASSERT_TRUE(failed.ok()) << failed.status();
  EXPECT_TRUE(failed->requeued);
  EXPECT_FALSE(failed->job_failed);
  EXPECT_EQ(failed->task.state, TaskState::kPending);
  const Lease second = MustLease();
  EXPECT_EQ(second.task.attempts, 2);
  failed = store_->FailTask(second.lease_id, "out of memory again");
  ASSERT_TRUE(failed.ok()) << failed.status();
  EXPECT_FALSE(failed->requeued);
  EXPECT_TRUE(failed->job_failed);
  EXPECT_EQ(failed->task.state, TaskState::kFailed);
  auto after = store_->GetJob(job);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->state, JobState::kFailed);
  EXPECT_THAT(after->error, HasSubstr("task 0 (block 0)"));
  EXPECT_THAT(after->error, HasSubstr("out of memory again"));
  EXPECT_TRUE(NothingToLease());

  // Running out of attempts by expiry fails a job too.
  const std::string other = NewPlannedJob("req-2", 1, true);
  MustLease("w1", 100);
  clock_.AdvanceMs(100);
  MustLease("w2", 100);  // requeued by the expiry, second attempt
  clock_.AdvanceMs(100);
  // A lease leaves the exhausted task to ExpireLeases, whose caller records
  // the job's failure.
  EXPECT_TRUE(NothingToLease());
  auto unchanged = store_->GetJob(other);
  ASSERT_TRUE(unchanged.ok());
  EXPECT_EQ(unchanged->state, JobState::kRunning);
  auto expiry = store_->ExpireLeases();
  ASSERT_TRUE(expiry.ok()) << expiry.status();
  EXPECT_EQ(expiry->expired, 1);
  EXPECT_THAT(expiry->failed_jobs, ElementsAre(other));
  auto expired_job = store_->GetJob(other);
  ASSERT_TRUE(expired_job.ok());
  EXPECT_EQ(expired_job->state, JobState::kFailed);
  EXPECT_THAT(expired_job->error, HasSubstr("expired"));
  EXPECT_EQ(*store_->LeaseExpiryCount(), 2);
}

TEST_F(JobStoreTest, RetryRunsAFailedJobAgainKeepingFinishedTasks) {
  SqliteJobStoreOptions options;
  options.max_attempts = 2;
  Reopen(options);
  const std::string job = NewPlannedJob("req", 2, true);
  // Block 0 succeeds; block 1 fails twice, which fails the job.
  const Lease block0 = MustLease();
  ASSERT_TRUE(store_->CompleteTask(block0.lease_id, "file:///b0").ok());
  for (int attempt = 1; attempt <= 2; ++attempt) {
    const Lease block1 = MustLease();
    ASSERT_EQ(block1.task.index, 1);
    ASSERT_TRUE(store_->FailTask(block1.lease_id, "disk full").ok());
  }
  auto failed = store_->GetJob(job);
  ASSERT_TRUE(failed.ok());
  ASSERT_EQ(failed->state, JobState::kFailed);
  EXPECT_TRUE(NothingToLease());

  clock_.AdvanceMs(5);
  auto retried = store_->RetryJob(job);
  ASSERT_TRUE(retried.ok()) << retried.status();
  EXPECT_EQ(retried->job.state, JobState::kQueued);
  EXPECT_EQ(retried->job.error, "");
  EXPECT_EQ(retried->job.updated_ms, clock_.NowMs());
  EXPECT_THAT(retried->previous_error, HasSubstr("disk full"));
  EXPECT_EQ(retried->tasks_requeued, 2);  // Block 1 and finalize.
  auto tasks = store_->ListTasks(job);
  ASSERT_TRUE(tasks.ok());
  ASSERT_EQ(tasks->size(), 3u);
  EXPECT_EQ((*tasks)[0].state, TaskState::kDone);  // Kept, not rerun.
  EXPECT_EQ((*tasks)[0].attempts, 1);
  EXPECT_EQ((*tasks)[0].output_uri, "file:///b0");
  EXPECT_EQ((*tasks)[1].state, TaskState::kPending);
  EXPECT_EQ((*tasks)[1].error, "");
  EXPECT_EQ((*tasks)[1].attempts, 2);  // Attempt numbers go on...
  EXPECT_EQ((*tasks)[1].budget_start, 2);
  EXPECT_DOUBLE_EQ(retried->job.progress, 1.0 / 3);

  // ... and the budget is fresh: two more attempts, numbered 3 and 4.
  const Lease third = MustLease();
  EXPECT_EQ(third.task.index, 1);
  EXPECT_EQ(third.task.attempts, 3);
  EXPECT_TRUE(third.job_started);
  auto again = store_->FailTask(third.lease_id, "flaky");
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->requeued);
  const Lease fourth = MustLease();
  EXPECT_EQ(fourth.task.attempts, 4);
  ASSERT_TRUE(store_->CompleteTask(fourth.lease_id, "file:///b1").ok());
  const Lease finalize = MustLease();
  EXPECT_EQ(finalize.task.kind, TaskKind::kFinalize);
  EXPECT_EQ(finalize.task.attempts, 1);
  auto done = store_->CompleteTask(finalize.lease_id, "file:///ckpt");
  ASSERT_TRUE(done.ok());
  EXPECT_TRUE(done->all_tasks_done);
  auto finished = store_->FinishJob(job, Verdict::kPass, "file:///ckpt", {});
  ASSERT_TRUE(finished.ok()) << finished.status();
  EXPECT_EQ(finished->state, JobState::kSucceeded);
}

// A job runs at the kernel level of the worker that leased its first task;
// its other tasks go only to workers that can run that level, at any time,
// also after a reopen.
TEST_F(JobStoreTest, AJobsTasksRunAtTheLevelOfItsFirstLease) {
  const std::vector<std::string> v4_worker = {"v2", "v3", "v4"};
  const std::vector<std::string> v3_worker = {"v2", "v3"};
  const std::string job = NewPlannedJob("req-a", 2, false);

  auto first = store_->LeaseTask("w-v4", kLeaseMs, v4_worker);
  ASSERT_TRUE(first.ok() && first->has_value()) << first.status();
  EXPECT_EQ((*first)->job_isa, "v4");
  EXPECT_TRUE((*first)->isa_chosen);
  EXPECT_EQ(store_->GetJob(job)->isa, "v4");

  // Block 1 is runnable, but not on a v3-only worker.
  auto v3 = store_->LeaseTask("w-v3", kLeaseMs, v3_worker);
  ASSERT_TRUE(v3.ok()) << v3.status();
  EXPECT_FALSE(v3->has_value());
  // A job submitted later has no level yet: the v3 worker takes it, at v3.
  const std::string other = NewPlannedJob("req-b", 1, false);
  auto other_lease = store_->LeaseTask("w-v3", kLeaseMs, v3_worker);
  ASSERT_TRUE(other_lease.ok() && other_lease->has_value());
  EXPECT_EQ((*other_lease)->task.job_id, other);
  EXPECT_EQ((*other_lease)->job_isa, "v3");

  Reopen();
  EXPECT_EQ(store_->GetJob(job)->isa, "v4");
  auto still = store_->LeaseTask("w-v3", kLeaseMs, v3_worker);
  ASSERT_TRUE(still.ok());
  EXPECT_FALSE(still->has_value());
  // A v4 worker gets block 1 at the job's level; a worker that says
  // nothing (older) gets any task and changes no level.
  auto second = store_->LeaseTask("w-v4b", kLeaseMs, v4_worker);
  ASSERT_TRUE(second.ok() && second->has_value());
  EXPECT_EQ((*second)->task.job_id, job);
  EXPECT_EQ((*second)->task.index, 1);
  EXPECT_EQ((*second)->job_isa, "v4");
  EXPECT_FALSE((*second)->isa_chosen);
  // The v3 job's finalize is not runnable yet; the v4 one's neither.
  EXPECT_TRUE(NothingToLease());

  // A v4-capable worker takes the v3 job's work and runs it at v3.
  ASSERT_TRUE(
      store_->CompleteTask((*other_lease)->lease_id, "file:///b0").ok());
  auto finalize = store_->LeaseTask("w-v4", kLeaseMs, v4_worker);
  ASSERT_TRUE(finalize.ok() && finalize->has_value());
  EXPECT_EQ((*finalize)->task.job_id, other);
  EXPECT_EQ((*finalize)->job_isa, "v3");
  EXPECT_EQ(store_->GetJob(other)->isa, "v3");
}

TEST_F(JobStoreTest, RetryForgetsTheLevelOnlyWhenNoTaskIsDone) {
  SqliteJobStoreOptions options;
  options.max_attempts = 1;
  Reopen(options);
  const std::vector<std::string> v4_worker = {"v2", "v3", "v4"};
  const std::string fresh = NewPlannedJob("req-a", 1, false);
  auto lease = store_->LeaseTask("w", kLeaseMs, v4_worker);
  ASSERT_TRUE(lease.ok() && lease->has_value());
  ASSERT_TRUE(store_->FailTask((*lease)->lease_id, "bad").ok());
  ASSERT_EQ(store_->GetJob(fresh)->state, JobState::kFailed);
  auto retried = store_->RetryJob(fresh);
  ASSERT_TRUE(retried.ok()) << retried.status();
  EXPECT_EQ(retried->job.isa, "");  // nothing computed binds it to v4

  // The retried job, at no level, takes the level of the worker that
  // leases it; finish it.
  auto again = store_->LeaseTask("w", kLeaseMs, {"v2", "v3"});
  ASSERT_TRUE(again.ok() && again->has_value());
  EXPECT_EQ((*again)->task.job_id, fresh);
  EXPECT_EQ((*again)->job_isa, "v3");
  ASSERT_TRUE(store_->CompleteTask((*again)->lease_id, "file:///b").ok());
  auto fin = store_->LeaseTask("w", kLeaseMs, {"v2", "v3"});
  ASSERT_TRUE(fin.ok() && fin->has_value());
  ASSERT_TRUE(store_->CompleteTask((*fin)->lease_id, "file:///c").ok());

  const std::string half = NewPlannedJob("req-b", 2, true);
  auto b0 = store_->LeaseTask("w", kLeaseMs, v4_worker);
  ASSERT_TRUE(b0.ok() && b0->has_value());
  EXPECT_EQ((*b0)->task.job_id, half);
  ASSERT_TRUE(store_->CompleteTask((*b0)->lease_id, "file:///b0").ok());
  auto b1 = store_->LeaseTask("w", kLeaseMs, v4_worker);
  ASSERT_TRUE(b1.ok() && b1->has_value());
  ASSERT_TRUE(store_->FailTask((*b1)->lease_id, "bad").ok());
  auto kept = store_->RetryJob(half);
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ(kept->job.isa, "v4");  // block 0 was computed at v4
}

TEST_F(JobStoreTest, JobsTakeTurnsSoALargeJobDoesNotStarveASmallOne) {
  // A large job of 6 independent blocks, then a small one of 2: leases
  // alternate between them while both have runnable tasks.
  const std::string large = NewPlannedJob("large", 6, false);
  const std::string small = NewPlannedJob("small", 2, false);
  std::vector<std::string> order;
  std::vector<Lease> leases;
  for (int i = 0; i < 6; ++i) {
    leases.push_back(MustLease(absl::StrCat("w", i)));
    order.push_back(leases.back().task.job_id);
  }
  EXPECT_EQ(order, (std::vector<std::string>{large, small, large, small, large,
                                             large}));
}

TEST_F(JobStoreTest, RoundTasksKeepTheirShardsAndPreferTheirWorker) {
  auto created = store_->CreateJob("rounds", kSpec, {});
  ASSERT_TRUE(created.ok()) << created.status();
  const std::string id = created->job.id;
  // Two shard tasks of group 0, their reduce, then two shard tasks of group
  // 1 after it.
  std::vector<TaskSpec> plan(6);
  for (int i = 0; i < 6; ++i) {
    plan[i].index = i;
    plan[i].block = 0;
  }
  for (const int i : {0, 1, 3, 4}) {
    plan[i].kind = TaskKind::kShardStats;
    plan[i].group = i < 3 ? 0 : 1;
    plan[i].split = TaskSplit::kCalibration;
    plan[i].shard = i % 3;
  }
  plan[2].kind = TaskKind::kReduce;
  plan[2].group = 0;
  plan[2].depends_on = {0, 1};
  plan[3].depends_on = {2};
  plan[4].depends_on = {2};
  plan[5].kind = TaskKind::kFinalize;
  plan[5].block = -1;
  plan[5].depends_on = {3, 4};
  // What a plan must say of each kind is checked.
  std::vector<TaskSpec> bad = plan;
  bad[2].group = -1;
  EXPECT_TRUE(absl::IsInvalidArgument(store_->PlanTasks(id, bad)));
  bad = plan;
  bad[0].split = TaskSplit::kNone;
  EXPECT_TRUE(absl::IsInvalidArgument(store_->PlanTasks(id, bad)));
  bad = plan;
  bad[5].shard = 0;
  EXPECT_TRUE(absl::IsInvalidArgument(store_->PlanTasks(id, bad)));
  ASSERT_TRUE(store_->PlanTasks(id, plan).ok());

  auto tasks = store_->ListTasks(id);
  ASSERT_TRUE(tasks.ok()) << tasks.status();
  ASSERT_EQ(tasks->size(), 6u);
  EXPECT_EQ((*tasks)[1].kind, TaskKind::kShardStats);
  EXPECT_EQ((*tasks)[1].block, 0);
  EXPECT_EQ((*tasks)[1].group, 0);
  EXPECT_EQ((*tasks)[1].split, TaskSplit::kCalibration);
  EXPECT_EQ((*tasks)[1].shard, 1);
  EXPECT_EQ((*tasks)[2].kind, TaskKind::kReduce);
  EXPECT_EQ((*tasks)[2].shard, -1);
  EXPECT_EQ(DescribeTaskWork((*tasks)[1]),
            "block 0 group 0: calibration shard 1");

  // Worker "b" runs shard 1, "a" shard 0; in the next round each gets its
  // own shard back although plan order would give "b" shard 0.
  Lease a = MustLease("a");
  Lease b = MustLease("b");
  EXPECT_EQ(a.task.shard, 0);
  EXPECT_EQ(b.task.shard, 1);
  ASSERT_TRUE(store_->CompleteTask(a.lease_id, "file:///s0").ok());
  ASSERT_TRUE(store_->CompleteTask(b.lease_id, "file:///s1").ok());
  Lease reduce = MustLease("a");
  EXPECT_EQ(reduce.task.kind, TaskKind::kReduce);
  ASSERT_TRUE(store_->CompleteTask(reduce.lease_id, "file:///r").ok());
  Lease b_next = MustLease("b");
  EXPECT_EQ(b_next.task.group, 1);
  EXPECT_EQ(b_next.task.shard, 1);
  Lease a_next = MustLease("a");
  EXPECT_EQ(a_next.task.shard, 0);
}

// A finalize in parts: a pack, numbered gate parts without a split, and
// the finalize; stored and read back as planned.
TEST_F(JobStoreTest, GatePartsKeepTheirNumbers) {
  auto created = store_->CreateJob("parts", kSpec, {});
  ASSERT_TRUE(created.ok()) << created.status();
  const std::string id = created->job.id;
  std::vector<TaskSpec> plan(5);
  for (int i = 0; i < 5; ++i) plan[i].index = i;
  plan[0].block = 0;
  plan[1].kind = TaskKind::kFinalizePack;
  plan[1].depends_on = {0};
  for (const int i : {2, 3}) {
    plan[i].kind = TaskKind::kGatePart;
    plan[i].shard = i - 2;
    plan[i].depends_on = {1};
  }
  plan[4].kind = TaskKind::kFinalize;
  plan[4].depends_on = {2, 3};
  std::vector<TaskSpec> bad = plan;
  bad[2].shard = -1;
  absl::Status refused = store_->PlanTasks(id, bad);
  EXPECT_TRUE(absl::IsInvalidArgument(refused)) << refused;
  EXPECT_NE(refused.message().find("gate_part task needs a shard and no split"),
            std::string::npos)
      << refused;
  bad = plan;
  bad[3].split = TaskSplit::kHeldout;
  EXPECT_TRUE(absl::IsInvalidArgument(store_->PlanTasks(id, bad)));
  ASSERT_TRUE(store_->PlanTasks(id, plan).ok());
  Reopen();
  auto tasks = store_->ListTasks(id);
  ASSERT_TRUE(tasks.ok()) << tasks.status();
  ASSERT_EQ(tasks->size(), 5u);
  EXPECT_EQ((*tasks)[1].kind, TaskKind::kFinalizePack);
  EXPECT_EQ((*tasks)[1].block, -1);
  EXPECT_EQ((*tasks)[3].kind, TaskKind::kGatePart);
  EXPECT_EQ((*tasks)[3].shard, 1);
  EXPECT_EQ((*tasks)[3].split, TaskSplit::kNone);
  EXPECT_EQ(DescribeTaskWork((*tasks)[1]), "finalize: pack");
  EXPECT_EQ(DescribeTaskWork((*tasks)[3]), "finalize: gate part 1");
}

TEST_F(JobStoreTest, FinishedJobKeepsItsAuditWarningsAcrossReopen) {
  const std::string job = NewPlannedJob("req", 1, false);
  ASSERT_TRUE(store_->CompleteTask(MustLease().lease_id, "file:///b0").ok());
  ASSERT_TRUE(store_->CompleteTask(MustLease().lease_id, "file:///ckpt").ok());
  const std::vector<std::string> warnings = {"audit: one layer",
                                             "audit: \"quoted\"\nsecond"};
  auto finished =
      store_->FinishJob(job, Verdict::kPass, "file:///ckpt", warnings);
  ASSERT_TRUE(finished.ok()) << finished.status();
  EXPECT_EQ(finished->audit_warnings, warnings);
  Reopen();
  auto stored = store_->GetJob(job);
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_EQ(stored->audit_warnings, warnings);
  auto listed = store_->ListJobs(10, "", JobFilter());
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->jobs.size(), 1u);
  EXPECT_EQ(listed->jobs[0].audit_warnings, warnings);
}

TEST_F(JobStoreTest, RetrySupersedesLeasesAndRedoesFinalizeWhenAllWereDone) {
  const std::string job = NewPlannedJob("req", 2, false);
  // Both blocks leased; the job fails while block 1 is still held.
  const Lease block0 = MustLease("w1");
  const Lease block1 = MustLease("w2");
  ASSERT_TRUE(store_->FailJob(job, "operator said so").ok());
  ASSERT_TRUE(store_->RetryJob(job).ok());
  // The old leases' results are refused; the tasks go out afresh.
  EXPECT_EQ(
      store_->CompleteTask(block1.lease_id, "file:///late").status().code(),
      absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(store_->Heartbeat(block0.lease_id, 0.5).status().code(),
            absl::StatusCode::kFailedPrecondition);
  for (int i = 0; i < 3; ++i) {
    const Lease lease = MustLease();
    ASSERT_TRUE(store_->CompleteTask(lease.lease_id, "file:///x").ok());
  }
  // Every task DONE, but finishing failed (say the checkpoint was gone):
  // a retry reruns finalize only.
  ASSERT_TRUE(store_->FailJob(job, "packed checkpoint is missing").ok());
  auto retried = store_->RetryJob(job);
  ASSERT_TRUE(retried.ok()) << retried.status();
  EXPECT_EQ(retried->tasks_requeued, 1);
  const Lease finalize = MustLease();
  EXPECT_EQ(finalize.task.kind, TaskKind::kFinalize);
  EXPECT_EQ(finalize.task.attempts, 2);
  EXPECT_TRUE(NothingToLease());
}

TEST_F(JobStoreTest, OnlyAFailedJobCanBeRetried) {
  const std::string queued = NewPlannedJob("req-1", 1, false);
  auto refused = store_->RetryJob(queued);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(Message(refused.status()), HasSubstr("QUEUED"));
  EXPECT_THAT(Message(refused.status()), HasSubstr(queued));
  ASSERT_TRUE(store_->CancelJob(queued).ok());
  refused = store_->RetryJob(queued);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(Message(refused.status()), HasSubstr("CANCELLED"));
  auto unknown = store_->RetryJob("job-000404");
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Message(unknown.status()), HasSubstr("job-000404"));
  // Refused retries change nothing.
  auto job = store_->GetJob(queued);
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->state, JobState::kCancelled);
}

TEST_F(JobStoreTest, CancelStopsLeasing) {
  const std::string job = NewPlannedJob("req-1", 2, false);
  const std::string other = NewPlannedJob("req-2", 1, false);
  const Lease lease = MustLease();
  ASSERT_EQ(lease.task.job_id, job);
  auto cancelled = store_->CancelJob(job);
  ASSERT_TRUE(cancelled.ok()) << cancelled.status();
  EXPECT_TRUE(cancelled->changed);
  EXPECT_EQ(cancelled->job.state, JobState::kCancelled);

  auto beat = store_->Heartbeat(lease.lease_id, 0.1);
  ASSERT_TRUE(beat.ok()) << beat.status();
  EXPECT_TRUE(beat->job_cancelled);
  EXPECT_EQ(store_->CompleteTask(lease.lease_id, "x").status().code(),
            absl::StatusCode::kFailedPrecondition);
  // The refusal ended the lease: the task is not left LEASED (a worker
  // that finished just as the job was cancelled).
  auto tasks = store_->ListTasks(job);
  ASSERT_TRUE(tasks.ok()) << tasks.status();
  EXPECT_EQ(tasks->at(lease.task.index).state, TaskState::kPending);
  EXPECT_EQ(store_->Heartbeat(lease.lease_id, 0.2).status().code(),
            absl::StatusCode::kFailedPrecondition);
  // Job 1's block 1 is still PENDING but not handed out: job 2 goes next.
  const Lease next = MustLease();
  EXPECT_EQ(next.task.job_id, other);

  auto twice = store_->CancelJob(job);
  ASSERT_TRUE(twice.ok());
  EXPECT_FALSE(twice->changed);
  EXPECT_EQ(twice->job.state, JobState::kCancelled);
  EXPECT_EQ(store_->FinishJob(job, Verdict::kPass, "a", {}).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(store_->FailJob(job, "boom").status().code(),
            absl::StatusCode::kFailedPrecondition);
  auto failed = store_->FailJob(other, "operator gave up");
  ASSERT_TRUE(failed.ok());
  EXPECT_EQ(failed->state, JobState::kFailed);
  EXPECT_EQ(failed->error, "operator gave up");
  auto unknown = store_->CancelJob("job-000404");
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound);
}

TEST_F(JobStoreTest, CountsJobsByStateAndRunnableTasks) {
  auto counts = store_->CountJobs();
  ASSERT_TRUE(counts.ok()) << counts.status();
  EXPECT_EQ(counts->size(), 5u);
  EXPECT_EQ(counts->at(JobState::kQueued), 0);
  const std::string chained = NewPlannedJob("req-a", 3, /*sequential=*/true);
  const std::string parallel = NewPlannedJob("req-b", 2, /*sequential=*/false);
  // Block 0 of the chain, both blocks of the other; no finalize yet.
  auto runnable = store_->CountRunnableTasks();
  ASSERT_TRUE(runnable.ok()) << runnable.status();
  EXPECT_EQ(*runnable, 3);
  const Lease lease = MustLease();
  EXPECT_EQ(lease.task.job_id, chained);
  EXPECT_EQ(*store_->CountRunnableTasks(), 2);
  counts = store_->CountJobs();
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->at(JobState::kQueued), 1);
  EXPECT_EQ(counts->at(JobState::kRunning), 1);
  ASSERT_TRUE(store_->CompleteTask(lease.lease_id, "out/0").ok());
  EXPECT_EQ(*store_->CountRunnableTasks(), 3);  // Block 1 became runnable.
  ASSERT_TRUE(store_->CancelJob(parallel).ok());
  EXPECT_EQ(*store_->CountRunnableTasks(), 1);
  counts = store_->CountJobs();
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->at(JobState::kCancelled), 1);
  EXPECT_EQ(counts->at(JobState::kRunning), 1);
  EXPECT_EQ(counts->at(JobState::kQueued), 0);
}

TEST_F(JobStoreTest, EventsAreOrderedPerJob) {
  auto a = store_->CreateJob("a", kSpec, {});
  auto b = store_->CreateJob("b", kSpec, {});
  ASSERT_TRUE(a.ok() && b.ok());
  for (int i = 1; i <= 5; ++i) {
    auto seq = store_->AppendEvent(a->job.id, absl::StrCat("type", i),
                                   absl::StrCat("{\"i\":", i, "}"));
    ASSERT_TRUE(seq.ok()) << seq.status();
    EXPECT_EQ(*seq, i);
    if (i == 2) {
      EXPECT_EQ(*store_->AppendEvent(b->job.id, "state", "{}"), 1);
    }
    clock_.AdvanceMs(1);
  }
  auto all = store_->ListEvents(a->job.id, 0, 0);
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 5u);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ((*all)[i].seq, i + 1);
    EXPECT_EQ((*all)[i].type, absl::StrCat("type", i + 1));
    EXPECT_EQ((*all)[i].payload_json, absl::StrCat("{\"i\":", i + 1, "}"));
  }
  EXPECT_LT((*all)[0].time_ms, (*all)[4].time_ms);
  auto tail = store_->ListEvents(a->job.id, 3, 1);
  ASSERT_TRUE(tail.ok());
  ASSERT_EQ(tail->size(), 1u);
  EXPECT_EQ((*tail)[0].seq, 4);
  EXPECT_EQ(store_->ListEvents("job-000404", 0, 0).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->AppendEvent(a->job.id, "t", "{oops").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(JobStoreTest, CalibrationSetsAreContentAddressed) {
  const std::string hash(64, 'a');
  auto put = store_->PutCalibrationSet(hash, 1234, "/data/calib.txt");
  ASSERT_TRUE(put.ok()) << put.status();
  auto again = store_->PutCalibrationSet(hash, 1234, "/data/other.txt");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->path, "/data/calib.txt");
  EXPECT_EQ(store_->PutCalibrationSet(hash, 99, "/x").status().code(),
            absl::StatusCode::kFailedPrecondition);
  auto got = store_->GetCalibrationSet(hash);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->size_bytes, 1234);
  auto missing = store_->GetCalibrationSet(std::string(64, 'b'));
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  auto bad = store_->PutCalibrationSet("ABC", 1, "/x");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(bad.status()), HasSubstr("sha256"));
}

TEST_F(JobStoreTest, RestartResumesUnfinishedJobs) {
  const std::string hash(64, 'c');
  ASSERT_TRUE(store_->PutCalibrationSet(hash, 10, "/c").ok());
  const std::string done_job = NewPlannedJob("done", 1, true);
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(store_->CompleteTask(MustLease().lease_id, "o").ok());
  }
  ASSERT_TRUE(store_->FinishJob(done_job, Verdict::kFail, "art", {}).ok());
  const std::string job = NewPlannedJob("req", 3, true);
  ASSERT_TRUE(store_->CompleteTask(MustLease().lease_id, "out/block0").ok());
  const Lease in_flight = MustLease("w1", 1000);
  EXPECT_EQ(in_flight.task.index, 1);
  ASSERT_TRUE(store_->AppendEvent(job, "progress", "{}").ok());

  // The coordinator goes down; the lease expires meanwhile.
  store_.reset();
  clock_.AdvanceMs(5000);
  Reopen();

  auto unfinished = store_->UnfinishedJobs();
  ASSERT_TRUE(unfinished.ok());
  ASSERT_EQ(unfinished->size(), 1u);
  EXPECT_EQ((*unfinished)[0].id, job);
  EXPECT_EQ((*unfinished)[0].state, JobState::kRunning);
  auto finished = store_->GetJob(done_job);
  ASSERT_TRUE(finished.ok());
  EXPECT_EQ(finished->state, JobState::kSucceeded);
  EXPECT_EQ(finished->verdict, Verdict::kFail);

  auto tasks = store_->ListTasks(job);
  ASSERT_TRUE(tasks.ok());
  ASSERT_EQ(tasks->size(), 4u);
  EXPECT_EQ((*tasks)[0].state, TaskState::kDone);
  EXPECT_EQ((*tasks)[0].output_uri, "out/block0");
  EXPECT_EQ((*tasks)[1].state, TaskState::kLeased);
  EXPECT_EQ(store_->ExpireLeases()->expired, 1);
  tasks = store_->ListTasks(job);
  ASSERT_TRUE(tasks.ok());
  EXPECT_EQ((*tasks)[1].state, TaskState::kPending);
  EXPECT_EQ((*tasks)[0].state, TaskState::kDone);

  // Work resumes at block 1, not block 0.
  const Lease resumed = MustLease("w2");
  EXPECT_EQ(resumed.task.job_id, job);
  EXPECT_EQ(resumed.task.index, 1);
  EXPECT_EQ(resumed.task.attempts, 2);
  EXPECT_EQ(store_->CompleteTask(in_flight.lease_id, "x").status().code(),
            absl::StatusCode::kFailedPrecondition);
  auto events = store_->ListEvents(job, 0, 0);
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 1u);
  EXPECT_EQ(*store_->AppendEvent(job, "resumed", "{}"), 2);
  EXPECT_TRUE(store_->GetCalibrationSet(hash).ok());
  auto duplicate = store_->CreateJob("req", kSpec, {});
  ASSERT_TRUE(duplicate.ok());
  EXPECT_FALSE(duplicate->created);
  EXPECT_EQ(duplicate->job.id, job);
}

TEST(JobStoreFileTest, RejectsNonSqliteFile) {
  FakeClock clock;
  const std::string path = quant::testing::MakeTempDir() + "/garbage.db";
  {
    std::ofstream out(path, std::ios::binary);
    for (int i = 0; i < 512; ++i) out << "this is not an sqlite database. ";
  }
  auto store = SqliteJobStore::Open(path, &clock);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(Message(store.status()), HasSubstr(path));
  EXPECT_THAT(Message(store.status()), HasSubstr("not a database"));
}

TEST(JobStoreFileTest, RejectsNewerSchemaVersion) {
  FakeClock clock;
  const std::string path = quant::testing::MakeTempDir() + "/future.db";
  ASSERT_TRUE(SqliteJobStore::Open(path, &clock).ok());
  {
    auto db = Database::Open(path, 1000);
    ASSERT_TRUE(db.ok()) << db.status();
    ASSERT_TRUE((*db)
                    ->Exec("UPDATE meta SET value = 99 WHERE key = "
                           "'schema_version'")
                    .ok());
  }
  auto store = SqliteJobStore::Open(path, &clock);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(Message(store.status()), HasSubstr("schema version 99"));
}

TEST(JobStoreFileTest, MigratesAVersion1Database) {
  FakeClock clock;
  const std::string path = quant::testing::MakeTempDir() + "/v1.db";
  std::string job_id;
  {
    auto store = SqliteJobStore::Open(path, &clock);
    ASSERT_TRUE(store.ok()) << store.status();
    auto created = (*store)->CreateJob("", kSpec, {});
    ASSERT_TRUE(created.ok());
    job_id = created->job.id;
    ASSERT_TRUE((*store)->PlanTasks(job_id, Plan(1, false)).ok());
  }
  {
    // Back to what a version 1 store wrote.
    auto db = Database::Open(path, 1000);
    ASSERT_TRUE(db.ok()) << db.status();
    ASSERT_TRUE((*db)->Exec("ALTER TABLE tasks DROP COLUMN budget_start").ok());
    ASSERT_TRUE(
        (*db)->Exec("ALTER TABLE jobs DROP COLUMN audit_warnings").ok());
    ASSERT_TRUE((*db)->Exec("ALTER TABLE jobs DROP COLUMN isa").ok());
    ASSERT_TRUE(
        (*db)->Exec("ALTER TABLE tasks DROP COLUMN output_sha256").ok());
    for (const char* column : {"grp", "split", "shard", "layer"}) {
      ASSERT_TRUE(
          (*db)
              ->Exec(absl::StrCat("ALTER TABLE tasks DROP COLUMN ", column))
              .ok());
    }
    ASSERT_TRUE((*db)->Exec("ALTER TABLE jobs DROP COLUMN lease_turn").ok());
    ASSERT_TRUE((*db)
                    ->Exec("UPDATE meta SET value = 1 WHERE key = "
                           "'schema_version'")
                    .ok());
  }
  auto store = SqliteJobStore::Open(path, &clock);
  ASSERT_TRUE(store.ok()) << store.status();
  auto tasks = (*store)->ListTasks(job_id);
  ASSERT_TRUE(tasks.ok()) << tasks.status();
  ASSERT_EQ(tasks->size(), 2u);
  EXPECT_EQ((*tasks)[0].budget_start, 0);
  EXPECT_EQ((*tasks)[0].output_sha256, "");
  // Tasks from before rounds: block and finalize, no group, split or shard.
  EXPECT_EQ((*tasks)[0].group, -1);
  EXPECT_EQ((*tasks)[0].split, TaskSplit::kNone);
  EXPECT_EQ((*tasks)[0].shard, -1);
  auto job = (*store)->GetJob(job_id);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_TRUE(job->audit_warnings.empty());
  EXPECT_EQ(job->isa, "");
  ASSERT_TRUE((*store)->FailJob(job_id, "boom").ok());
  EXPECT_TRUE((*store)->RetryJob(job_id).ok());
}

TEST(JobStoreConcurrencyTest, TwoConnectionsNeverLeaseTheSameTaskTwice) {
  FakeClock clock;
  const std::string path = quant::testing::MakeTempDir() + "/shared.db";
  auto a = SqliteJobStore::Open(path, &clock);
  auto b = SqliteJobStore::Open(path, &clock);
  ASSERT_TRUE(a.ok() && b.ok());
  constexpr int kJobs = 4;
  constexpr int kBlocks = 24;  // + finalize
  for (int j = 0; j < kJobs; ++j) {
    auto job = (*a)->CreateJob(absl::StrCat("req-", j), kSpec, {});
    ASSERT_TRUE(job.ok());
    ASSERT_TRUE((*b)->PlanTasks(job->job.id, Plan(kBlocks, false)).ok());
  }
  struct Result {
    std::vector<std::string> leased;
    absl::Status error;
  };
  // The two connections lease in rounds: both call LeaseTask at once, and
  // neither starts its next round before the other has finished this one.
  // Free-running loops let one connection starve the other (SQLite's busy
  // handler sleeps in growing steps and can miss every short gap between the
  // other's transactions on a loaded machine), which tests nothing and can
  // exhaust the busy timeout.
  std::atomic<int> rounds_done[2] = {0, 0};
  std::atomic<bool> finished[2] = {false, false};
  auto worker = [&rounds_done, &finished](SqliteJobStore* store, int me,
                                          Result* result) {
    const int other = 1 - me;
    const std::string name = me == 0 ? "a" : "b";
    for (int round = 0; round < 1000; ++round) {
      while (rounds_done[other].load() < round && !finished[other].load()) {
        std::this_thread::yield();
      }
      auto lease = store->LeaseTask(name, 600'000);
      if (!lease.ok()) {
        result->error = lease.status();
        break;
      }
      if (!lease->has_value()) break;
      const Lease& got = **lease;
      result->leased.push_back(
          absl::StrCat(got.task.job_id, "/", got.task.index));
      const absl::Status done =
          store->CompleteTask(got.lease_id, "out").status();
      if (!done.ok()) {
        result->error = done;
        break;
      }
      rounds_done[me].store(round + 1);
    }
    finished[me].store(true);
  };
  Result ra, rb;
  std::thread ta(worker, a->get(), 0, &ra);
  std::thread tb(worker, b->get(), 1, &rb);
  ta.join();
  tb.join();
  ASSERT_TRUE(ra.error.ok()) << ra.error;
  ASSERT_TRUE(rb.error.ok()) << rb.error;
  std::set<std::string> unique(ra.leased.begin(), ra.leased.end());
  unique.insert(rb.leased.begin(), rb.leased.end());
  EXPECT_EQ(ra.leased.size() + rb.leased.size(), unique.size());
  // Both connections took part (else nothing was tested).
  EXPECT_GT(ra.leased.size(), 0u);
  EXPECT_GT(rb.leased.size(), 0u);
  EXPECT_EQ(unique.size(), static_cast<size_t>(kJobs * (kBlocks + 1)));
  auto left = (*a)->UnfinishedJobs();
  ASSERT_TRUE(left.ok());
  EXPECT_EQ(left->size(), static_cast<size_t>(kJobs));  // none finished yet
  for (const Job& job : *left) {
    auto tasks = (*b)->ListTasks(job.id);
    ASSERT_TRUE(tasks.ok());
    for (const Task& task : *tasks) {
      EXPECT_EQ(task.state, TaskState::kDone) << job.id << "/" << task.index;
      EXPECT_EQ(task.attempts, 1);
    }
  }
}

}  // namespace
}  // namespace quant::store

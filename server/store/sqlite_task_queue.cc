// SqliteJobStore: task plans and the lease protocol (lease, heartbeat,
// complete, fail, expire). Jobs, calibration sets and events are in
// sqlite_job_store.cc.
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "server/store/sqlite_job_store.h"
#include "server/store/store_rows.h"

namespace quant::store {
namespace {

// "job job-000001 task 3 (block 3)" / "... task 5 (finalize)".
std::string DescribeTask(const Task& task) {
  return absl::StrCat("job ", task.job_id, " task ", task.index, " (",
                      DescribeTaskWork(task), ")");
}

absl::Status ValidatePlan(const std::string& job_id,
                          const std::vector<TaskSpec>& tasks) {
  if (tasks.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("job ", job_id, ": the plan has no tasks"));
  }
  const int n = static_cast<int>(tasks.size());
  std::vector<bool> seen(tasks.size(), false);
  for (int i = 0; i < n; ++i) {
    const TaskSpec& task = tasks[i];
    const std::string where = absl::StrCat("job ", job_id, ": tasks[", i, "]");
    if (task.index < 0 || task.index >= n) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ".index is ", task.index, ", outside 0..", n - 1));
    }
    if (seen[task.index]) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ".index ", task.index, " is used twice"));
    }
    seen[task.index] = true;
    const bool round = IsRoundTaskKind(task.kind);
    if ((task.kind == TaskKind::kBlock || round) && task.block < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ".block is ", task.block, "; a ",
                       TaskKindName(task.kind), " task needs a block"));
    }
    const bool grouped =
        task.kind == TaskKind::kShardStats || task.kind == TaskKind::kReduce;
    const bool sharded = task.kind == TaskKind::kShardStats ||
                         task.kind == TaskKind::kShardOutput;
    // A gate part's number is its shard; it has no split.
    const bool numbered = sharded || task.kind == TaskKind::kGatePart;
    if (grouped != (task.group >= 0)) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ".group is ", task.group, "; a ", TaskKindName(task.kind),
          grouped ? " task needs a layer group" : " task has none"));
    }
    if (numbered != (task.shard >= 0) ||
        sharded != (task.split != TaskSplit::kNone)) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": shard ", task.shard, " of split \"",
          TaskSplitName(task.split), "\"; a ", TaskKindName(task.kind),
          sharded    ? " task needs both"
          : numbered ? " task needs a shard and no split"
                     : " task has neither"));
    }
    if (!task.layer.empty() && task.kind != TaskKind::kReduce) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ".layer is \"", task.layer, "\"; a ",
                       TaskKindName(task.kind), " task has none"));
    }
    std::vector<bool> dep_seen(tasks.size(), false);
    for (int dep : task.depends_on) {
      if (dep < 0 || dep >= task.index) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, ".depends_on has ", dep,
            "; dependencies must name a lower index than ", task.index));
      }
      if (dep_seen[dep]) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ".depends_on has ", dep, " twice"));
      }
      dep_seen[dep] = true;
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status SqliteJobStore::PlanTasks(const std::string& job_id,
                                       const std::vector<TaskSpec>& tasks) {
  QUANT_RETURN_IF_ERROR(ValidatePlan(job_id, tasks));
  std::vector<TaskSpec> sorted(tasks.size());
  for (const TaskSpec& task : tasks) sorted[task.index] = task;
  MutexLock lock(&mu_);
  QUANT_ASSIGN_OR_RETURN(auto txn, Transaction::Begin(db_.get()));
  QUANT_ASSIGN_OR_RETURN(JobRow job, FindJob(job_id));
  if (job.planned) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", job_id, " already has a task plan"));
  }
  if (IsTerminal(job.job.state)) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", job_id, " is ", JobStateName(job.job.state),
                     "; it takes no plan"));
  }
  const int64_t now = clock_->NowMs();
  QUANT_ASSIGN_OR_RETURN(
      Statement insert_task,
      db_->Prepare("INSERT INTO tasks(job_seq, idx, kind, block, depends_on, "
                   "state, updated_ms, grp, split, shard, layer) VALUES (?1, "
                   "?2, ?3, ?4, ?5, 'PENDING', ?6, ?7, ?8, ?9, ?10)"));
  QUANT_ASSIGN_OR_RETURN(
      Statement insert_dep,
      db_->Prepare("INSERT INTO task_deps(job_seq, idx, dep_idx) "
                   "VALUES (?1, ?2, ?3)"));
  for (const TaskSpec& task : sorted) {
    insert_task.Reset();
    const int block = task.kind == TaskKind::kFinalize ? -1 : task.block;
    QUANT_RETURN_IF_ERROR(
        insert_task
            .BindAll(job.seq, task.index, TaskKindName(task.kind), block,
                     DependsOnJson(task.depends_on), now, task.group,
                     TaskSplitName(task.split), task.shard, task.layer)
            .Run());
    for (int dep : task.depends_on) {
      insert_dep.Reset();
      QUANT_RETURN_IF_ERROR(insert_dep.BindAll(job.seq, task.index, dep).Run());
    }
  }
  QUANT_ASSIGN_OR_RETURN(
      Statement mark,
      db_->Prepare("UPDATE jobs SET planned = 1, updated_ms = ?2 "
                   "WHERE seq = ?1"));
  QUANT_RETURN_IF_ERROR(mark.BindAll(job.seq, now).Run());
  return txn->Commit();
}

absl::StatusOr<std::vector<Task>> SqliteJobStore::ListTasks(
    const std::string& job_id) {
  MutexLock lock(&mu_);
  QUANT_ASSIGN_OR_RETURN(JobRow job, FindJob(job_id));
  QUANT_ASSIGN_OR_RETURN(Statement stmt,
                         db_->Prepare(absl::StrCat(
                             "SELECT ", kTaskColumns,
                             " FROM tasks t JOIN jobs j ON j.seq = t.job_seq "
                             "WHERE t.job_seq = ?1 ORDER BY t.idx")));
  stmt.BindAll(job.seq);
  std::vector<Task> tasks;
  while (true) {
    QUANT_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) return tasks;
    QUANT_ASSIGN_OR_RETURN(TaskRow task, ReadTaskRow(stmt));
    tasks.push_back(std::move(task.task));
  }
}

absl::StatusOr<TaskRow> SqliteJobStore::TaskAt(int64_t job_seq, int index) {
  QUANT_ASSIGN_OR_RETURN(Statement stmt,
                         db_->Prepare(absl::StrCat(
                             "SELECT ", kTaskColumns,
                             " FROM tasks t JOIN jobs j ON j.seq = t.job_seq "
                             "WHERE t.job_seq = ?1 AND t.idx = ?2")));
  QUANT_ASSIGN_OR_RETURN(bool row, stmt.BindAll(job_seq, index).Step());
  if (!row) {
    return absl::NotFoundError(
        absl::StrCat("task ", index, " of job row ", job_seq));
  }
  return ReadTaskRow(stmt);
}

absl::StatusOr<TaskRow> SqliteJobStore::FindCurrentLease(
    const std::string& lease_id, int64_t now) {
  if (lease_id.empty()) return absl::InvalidArgumentError("lease_id is empty");
  QUANT_ASSIGN_OR_RETURN(
      Statement stmt,
      db_->Prepare(absl::StrCat("SELECT ", kTaskColumns,
                                " FROM tasks t JOIN jobs j ON j.seq = "
                                "t.job_seq WHERE t.lease_id = ?1")));
  QUANT_ASSIGN_OR_RETURN(bool found, stmt.BindAll(lease_id).Step());
  if (!found) {
    return absl::FailedPreconditionError(absl::StrCat(
        "lease ", lease_id, " is unknown or was superseded by a newer lease"));
  }
  QUANT_ASSIGN_OR_RETURN(TaskRow row, ReadTaskRow(stmt));
  if (row.task.state != TaskState::kLeased) {
    return absl::FailedPreconditionError(absl::StrCat(
        "lease ", lease_id, " on ", DescribeTask(row.task),
        " is no longer current: the task is ", TaskStateName(row.task.state)));
  }
  if (row.task.lease_expires_ms <= now) {
    return absl::FailedPreconditionError(absl::StrCat(
        "lease ", lease_id, " on ", DescribeTask(row.task), " expired at ",
        row.task.lease_expires_ms, " ms (now ", now, " ms)"));
  }
  return row;
}

absl::Status SqliteJobStore::RecomputeProgress(int64_t job_seq, int64_t now) {
  QUANT_ASSIGN_OR_RETURN(
      Statement stmt,
      db_->Prepare("UPDATE jobs SET updated_ms = ?2, progress = COALESCE(("
                   "SELECT AVG(CASE state WHEN 'DONE' THEN 1.0 WHEN 'LEASED' "
                   "THEN progress ELSE 0.0 END) FROM tasks WHERE job_seq = ?1"
                   "), 0) WHERE seq = ?1 AND state IN ('QUEUED', 'RUNNING')"));
  return stmt.BindAll(job_seq, now).Run();
}

absl::StatusOr<ExpiredLeases> SqliteJobStore::ExpireLeasesLocked(
    int64_t now, bool fail_exhausted) {
  QUANT_ASSIGN_OR_RETURN(
      Statement select,
      db_->Prepare(absl::StrCat(
          "SELECT ", kTaskColumns,
          " FROM tasks t JOIN jobs j ON j.seq = t.job_seq WHERE t.state = "
          "'LEASED' AND t.lease_expires_ms <= ?1 ORDER BY t.job_seq, t.idx")));
  select.BindAll(now);
  std::vector<TaskRow> expired;
  while (true) {
    QUANT_ASSIGN_OR_RETURN(bool row, select.Step());
    if (!row) break;
    QUANT_ASSIGN_OR_RETURN(TaskRow task, ReadTaskRow(select));
    const int attempt = task.task.attempts - task.task.budget_start;
    if (!fail_exhausted && attempt >= options_.max_attempts) continue;
    expired.push_back(std::move(task));
  }
  ExpiredLeases result;
  for (const TaskRow& row : expired) {
    const Task& task = row.task;
    const int attempt = task.attempts - task.budget_start;
    const bool out_of_attempts = attempt >= options_.max_attempts;
    const std::string error = absl::StrCat(
        "lease ", task.lease_id, " of worker ", task.worker_id,
        " expired (attempt ", attempt, " of ", options_.max_attempts, ")");
    QUANT_ASSIGN_OR_RETURN(
        Statement update,
        db_->Prepare("UPDATE tasks SET state = ?3, progress = 0, error = ?4, "
                     "updated_ms = ?5 WHERE job_seq = ?1 AND idx = ?2"));
    QUANT_RETURN_IF_ERROR(update
                              .BindAll(row.job_seq, task.index,
                                       out_of_attempts ? "FAILED" : "PENDING",
                                       error, now)
                              .Run());
    if (out_of_attempts) {
      QUANT_RETURN_IF_ERROR(SetJobFailed(
          row.job_seq, absl::StrCat(DescribeTask(task), ": ", error), now));
      if (result.failed_jobs.empty() ||
          result.failed_jobs.back() != task.job_id) {
        result.failed_jobs.push_back(task.job_id);  // rows come by job
      }
    }
    QUANT_RETURN_IF_ERROR(RecomputeProgress(row.job_seq, now));
  }
  if (!expired.empty()) {
    QUANT_ASSIGN_OR_RETURN(Statement count,
                           db_->Prepare("UPDATE meta SET value = value + ?1 "
                                        "WHERE key = 'lease_expiries_total'"));
    QUANT_RETURN_IF_ERROR(
        count.BindAll(static_cast<int64_t>(expired.size())).Run());
  }
  result.expired = static_cast<int>(expired.size());
  return result;
}

absl::StatusOr<ExpiredLeases> SqliteJobStore::ExpireLeases() {
  MutexLock lock(&mu_);
  QUANT_ASSIGN_OR_RETURN(auto txn, Transaction::Begin(db_.get()));
  QUANT_ASSIGN_OR_RETURN(
      ExpiredLeases expired,
      ExpireLeasesLocked(clock_->NowMs(), /*fail_exhausted=*/true));
  QUANT_RETURN_IF_ERROR(txn->Commit());
  return expired;
}

absl::StatusOr<int64_t> SqliteJobStore::LeaseExpiryCount() {
  MutexLock lock(&mu_);
  QUANT_ASSIGN_OR_RETURN(Statement stmt,
                         db_->Prepare("SELECT value FROM meta WHERE key = "
                                      "'lease_expiries_total'"));
  QUANT_ASSIGN_OR_RETURN(bool row, stmt.Step());
  if (!row) return absl::DataLossError("meta has no lease_expiries_total row");
  return stmt.ColumnInt64(0);
}

absl::StatusOr<std::map<JobState, int64_t>> SqliteJobStore::CountJobs() {
  MutexLock lock(&mu_);
  std::map<JobState, int64_t> counts;
  for (JobState state :
       {JobState::kQueued, JobState::kRunning, JobState::kSucceeded,
        JobState::kFailed, JobState::kCancelled}) {
    counts[state] = 0;
  }
  QUANT_ASSIGN_OR_RETURN(
      Statement stmt,
      db_->Prepare("SELECT state, COUNT(*) FROM jobs GROUP BY state"));
  while (true) {
    QUANT_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) break;
    QUANT_ASSIGN_OR_RETURN(JobState state, ParseJobState(stmt.ColumnText(0)));
    counts[state] = stmt.ColumnInt64(1);
  }
  return counts;
}

absl::StatusOr<int64_t> SqliteJobStore::CountRunnableTasks() {
  MutexLock lock(&mu_);
  QUANT_ASSIGN_OR_RETURN(
      Statement stmt,
      db_->Prepare(
          "SELECT COUNT(*) FROM tasks t JOIN jobs j ON j.seq = t.job_seq "
          "WHERE t.state = 'PENDING' AND j.state IN ('QUEUED', 'RUNNING') "
          "AND NOT EXISTS (SELECT 1 FROM task_deps d JOIN tasks u ON "
          "u.job_seq = d.job_seq AND u.idx = d.dep_idx WHERE d.job_seq = "
          "t.job_seq AND d.idx = t.idx AND u.state != 'DONE')"));
  QUANT_ASSIGN_OR_RETURN(bool row, stmt.Step());
  if (!row) return absl::InternalError("COUNT(*) returned no row");
  return stmt.ColumnInt64(0);
}

absl::StatusOr<std::optional<Lease>> SqliteJobStore::LeaseTask(
    const std::string& worker_id, int64_t lease_ms,
    const std::vector<std::string>& worker_levels) {
  if (worker_id.empty())
    return absl::InvalidArgumentError("worker_id is empty");
  if (lease_ms <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("lease_ms must be positive, got ", lease_ms));
  }
  MutexLock lock(&mu_);
  QUANT_ASSIGN_OR_RETURN(auto txn, Transaction::Begin(db_.get()));
  const int64_t now = clock_->NowMs();
  QUANT_RETURN_IF_ERROR(
      ExpireLeasesLocked(now, /*fail_exhausted=*/false).status());
  // Runnable: PENDING, job QUEUED/RUNNING, no dependency that is not DONE,
  // and the job's kernel level one the worker runs (or not chosen yet).
  // Jobs take turns (the one whose last lease is oldest first), so one
  // job's many shard tasks do not starve another job; inside a job, plan
  // order, except that a shard task whose shard this worker ran before
  // comes first (its inputs may still be in the worker's page cache).
  QUANT_ASSIGN_OR_RETURN(
      Statement next,
      db_->Prepare(
          "SELECT t.job_seq, t.idx FROM tasks t JOIN jobs j ON j.seq = "
          "t.job_seq WHERE t.state = 'PENDING' AND j.state IN ('QUEUED', "
          "'RUNNING') AND NOT EXISTS (SELECT 1 FROM task_deps d JOIN tasks u "
          "ON u.job_seq = d.job_seq AND u.idx = d.dep_idx WHERE d.job_seq = "
          "t.job_seq AND d.idx = t.idx AND u.state != 'DONE') AND (?1 = 0 OR "
          "j.isa = '' OR j.isa IN (SELECT value FROM json_each(?2))) "
          "ORDER BY j.lease_turn, t.job_seq, (t.shard >= 0 AND EXISTS "
          "(SELECT 1 FROM tasks p WHERE p.job_seq = t.job_seq AND p.split = "
          "t.split AND p.shard = t.shard AND p.block >= t.block - 1 AND "
          "p.worker_id = ?3 AND p.state = 'DONE')) DESC, t.idx LIMIT 1"));
  next.BindAll(worker_levels.empty() ? 0 : 1, WarningsToJson(worker_levels),
               worker_id);
  QUANT_ASSIGN_OR_RETURN(bool found, next.Step());
  if (!found) {
    QUANT_RETURN_IF_ERROR(txn->Commit());
    return std::optional<Lease>();
  }
  const int64_t job_seq = next.ColumnInt64(0);
  const int index = static_cast<int>(next.ColumnInt64(1));
  const std::string lease_id = NewLeaseId();
  QUANT_ASSIGN_OR_RETURN(
      Statement take,
      db_->Prepare("UPDATE tasks SET state = 'LEASED', attempts = attempts + "
                   "1, lease_id = ?3, worker_id = ?4, lease_ms = ?5, "
                   "lease_expires_ms = ?6, progress = 0, updated_ms = ?7 "
                   "WHERE job_seq = ?1 AND idx = ?2"));
  QUANT_RETURN_IF_ERROR(take.BindAll(job_seq, index, lease_id, worker_id,
                                     lease_ms, now + lease_ms, now)
                            .Run());
  QUANT_ASSIGN_OR_RETURN(
      Statement turn,
      db_->Prepare("UPDATE jobs SET lease_turn = (SELECT MAX(lease_turn) + 1 "
                   "FROM jobs) WHERE seq = ?1"));
  QUANT_RETURN_IF_ERROR(turn.BindAll(job_seq).Run());
  QUANT_ASSIGN_OR_RETURN(JobRow before, FindJobBySeq(job_seq));
  std::string job_isa = before.job.isa;
  const bool isa_chosen = job_isa.empty() && !worker_levels.empty();
  if (isa_chosen) {
    job_isa = worker_levels.back();
    QUANT_ASSIGN_OR_RETURN(
        Statement choose,
        db_->Prepare("UPDATE jobs SET isa = ?2 WHERE seq = ?1 AND isa = ''"));
    QUANT_RETURN_IF_ERROR(choose.BindAll(job_seq, job_isa).Run());
  }
  QUANT_ASSIGN_OR_RETURN(
      Statement start,
      db_->Prepare("UPDATE jobs SET state = 'RUNNING', updated_ms = ?2 "
                   "WHERE seq = ?1 AND state = 'QUEUED'"));
  QUANT_RETURN_IF_ERROR(start.BindAll(job_seq, now).Run());
  QUANT_ASSIGN_OR_RETURN(TaskRow row, TaskAt(job_seq, index));
  QUANT_RETURN_IF_ERROR(txn->Commit());
  return Lease{lease_id,
               now + lease_ms,
               std::move(row.task),
               std::move(before.job.spec_json),
               before.job.state == JobState::kQueued,
               std::move(job_isa),
               isa_chosen};
}

absl::StatusOr<Task> SqliteJobStore::CurrentLease(const std::string& lease_id) {
  MutexLock lock(&mu_);
  QUANT_ASSIGN_OR_RETURN(TaskRow row,
                         FindCurrentLease(lease_id, clock_->NowMs()));
  return std::move(row.task);
}

absl::StatusOr<HeartbeatResult> SqliteJobStore::Heartbeat(
    const std::string& lease_id, double progress) {
  if (!std::isfinite(progress) || progress < 0 || progress > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "lease ", lease_id, ": progress must be in [0, 1], got ", progress));
  }
  MutexLock lock(&mu_);
  QUANT_ASSIGN_OR_RETURN(auto txn, Transaction::Begin(db_.get()));
  const int64_t now = clock_->NowMs();
  QUANT_ASSIGN_OR_RETURN(TaskRow row, FindCurrentLease(lease_id, now));
  const int64_t expires = now + row.lease_ms;
  QUANT_ASSIGN_OR_RETURN(
      Statement renew,
      db_->Prepare("UPDATE tasks SET lease_expires_ms = ?3, progress = ?4, "
                   "updated_ms = ?5 WHERE job_seq = ?1 AND idx = ?2"));
  QUANT_RETURN_IF_ERROR(
      renew.BindAll(row.job_seq, row.task.index, expires, progress, now).Run());
  QUANT_RETURN_IF_ERROR(RecomputeProgress(row.job_seq, now));
  QUANT_RETURN_IF_ERROR(txn->Commit());
  row.task.lease_expires_ms = expires;
  row.task.progress = progress;
  return HeartbeatResult{expires, row.job_state,
                         row.job_state == JobState::kCancelled,
                         std::move(row.task)};
}

absl::StatusOr<CompleteTaskResult> SqliteJobStore::CompleteTask(
    const std::string& lease_id, const std::string& output_uri,
    const std::string& output_sha256) {
  if (output_uri.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("lease ", lease_id, ": output_uri is empty"));
  }
  MutexLock lock(&mu_);
  QUANT_ASSIGN_OR_RETURN(auto txn, Transaction::Begin(db_.get()));
  const int64_t now = clock_->NowMs();
  QUANT_ASSIGN_OR_RETURN(TaskRow row, FindCurrentLease(lease_id, now));
  if (IsTerminal(row.job_state)) {
    // The lease ends with the refusal (the task goes back to PENDING, as a
    // cancelled task's FailTask would put it), so no task of a finished job
    // stays LEASED until its lease expires.
    QUANT_ASSIGN_OR_RETURN(
        Statement release,
        db_->Prepare("UPDATE tasks SET state = 'PENDING', progress = 0, "
                     "updated_ms = ?3 WHERE job_seq = ?1 AND idx = ?2"));
    QUANT_RETURN_IF_ERROR(
        release.BindAll(row.job_seq, row.task.index, now).Run());
    QUANT_RETURN_IF_ERROR(txn->Commit());
    return absl::FailedPreconditionError(absl::StrCat(
        "job ", row.task.job_id, " is ", JobStateName(row.job_state),
        "; the result of lease ", lease_id, " is refused"));
  }
  QUANT_ASSIGN_OR_RETURN(
      Statement done,
      db_->Prepare("UPDATE tasks SET state = 'DONE', output_uri = ?3, "
                   "output_sha256 = ?5, progress = 1, updated_ms = ?4 "
                   "WHERE job_seq = ?1 AND idx = ?2"));
  QUANT_RETURN_IF_ERROR(
      done.BindAll(row.job_seq, row.task.index, output_uri, now, output_sha256)
          .Run());
  QUANT_RETURN_IF_ERROR(RecomputeProgress(row.job_seq, now));
  QUANT_ASSIGN_OR_RETURN(
      Statement open_tasks,
      db_->Prepare("SELECT COUNT(*) FROM tasks WHERE job_seq = ?1 AND "
                   "state != 'DONE'"));
  QUANT_ASSIGN_OR_RETURN(bool counted, open_tasks.BindAll(row.job_seq).Step());
  const bool all_done = counted && open_tasks.ColumnInt64(0) == 0;
  QUANT_ASSIGN_OR_RETURN(TaskRow updated, TaskAt(row.job_seq, row.task.index));
  QUANT_RETURN_IF_ERROR(txn->Commit());
  return CompleteTaskResult{std::move(updated.task), all_done};
}

absl::StatusOr<FailTaskResult> SqliteJobStore::FailTask(
    const std::string& lease_id, const std::string& error,
    const std::vector<int>& rerun) {
  if (error.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("lease ", lease_id, ": error is empty"));
  }
  MutexLock lock(&mu_);
  QUANT_ASSIGN_OR_RETURN(auto txn, Transaction::Begin(db_.get()));
  const int64_t now = clock_->NowMs();
  QUANT_ASSIGN_OR_RETURN(TaskRow row, FindCurrentLease(lease_id, now));
  // Before anything changes: every task to rerun is a DONE one of this job.
  for (const int index : rerun) {
    QUANT_ASSIGN_OR_RETURN(TaskRow producer, TaskAt(row.job_seq, index));
    if (producer.task.state != TaskState::kDone || index == row.task.index) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rerun: task ", index, " of job ", row.task.job_id,
          " is not a finished task that ", DescribeTask(row.task), " reads"));
    }
  }
  const int attempts = row.task.attempts - row.task.budget_start;
  const bool requeue = attempts < options_.max_attempts;
  QUANT_ASSIGN_OR_RETURN(
      Statement update,
      db_->Prepare("UPDATE tasks SET state = ?3, progress = 0, error = ?4, "
                   "updated_ms = ?5 WHERE job_seq = ?1 AND idx = ?2"));
  QUANT_RETURN_IF_ERROR(update
                            .BindAll(row.job_seq, row.task.index,
                                     requeue ? "PENDING" : "FAILED", error, now)
                            .Run());
  const bool job_failed = !requeue && !IsTerminal(row.job_state);
  if (job_failed) {
    QUANT_RETURN_IF_ERROR(
        SetJobFailed(row.job_seq,
                     absl::StrCat(DescribeTask(row.task), " failed after ",
                                  attempts, " attempts: ", error),
                     now));
  }
  std::vector<int> rerun_done;
  if (!job_failed) {
    QUANT_ASSIGN_OR_RETURN(
        Statement reopen,
        db_->Prepare(
            "UPDATE tasks SET state = 'PENDING', progress = 0, "
            "output_uri = '', output_sha256 = '', lease_expires_ms = 0, "
            "error = ?3, "
            "updated_ms = ?4 WHERE job_seq = ?1 AND idx = ?2 AND "
            "state = 'DONE'"));
    for (const int index : rerun) {
      QUANT_RETURN_IF_ERROR(
          reopen
              .BindAll(row.job_seq, index,
                       absl::StrCat("rerun: ", DescribeTask(row.task),
                                    " found its output changed on disk"),
                       now)
              .Run());
      reopen.Reset();
      rerun_done.push_back(index);
    }
  }
  QUANT_RETURN_IF_ERROR(RecomputeProgress(row.job_seq, now));
  QUANT_ASSIGN_OR_RETURN(TaskRow updated, TaskAt(row.job_seq, row.task.index));
  QUANT_RETURN_IF_ERROR(txn->Commit());
  return FailTaskResult{std::move(updated.task), requeue, job_failed,
                        std::move(rerun_done)};
}

}  // namespace quant::store

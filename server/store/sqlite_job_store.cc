// SqliteJobStore: opening, calibration sets, jobs and their terminal
// transitions, events. Plans and leases are in sqlite_task_queue.cc.
#include "server/store/sqlite_job_store.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "core/base/sha256.h"
#include "core/base/status_macros.h"
#include "core/base/strict_json.h"
#include "nlohmann/json.hpp"
#include "server/store/schema.h"
#include "server/store/store_rows.h"

namespace quant::store {
namespace {

constexpr int kDefaultPageSize = 50;
constexpr int kMaxPageSize = 1000;
constexpr int kDefaultEventLimit = 100;
constexpr int kMaxEventLimit = 1000;

// The JSON text re-serialized (sorted keys, no spaces), or InvalidArgument
// naming `field`.
absl::StatusOr<std::string> CanonicalJson(const std::string& text,
                                          absl::string_view field) {
  const nlohmann::json json = ParseJsonOrDiscarded(text);
  if (json.is_discarded()) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, " is not valid JSON: ", text.substr(0, 80)));
  }
  return json.dump();
}

absl::Status CheckSha256(const std::string& sha256) {
  if (IsSha256Hex(sha256)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("sha256 \"", sha256, "\" is not 64 lowercase hex digits"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<SqliteJobStore>> SqliteJobStore::Open(
    const std::string& path, Clock* clock,
    const SqliteJobStoreOptions& options) {
  if (options.max_attempts < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_attempts must be at least 1, got ", options.max_attempts));
  }
  QUANT_ASSIGN_OR_RETURN(std::unique_ptr<Database> db,
                         Database::Open(path, options.busy_timeout_ms));
  QUANT_RETURN_IF_ERROR(EnsureSchema(db.get()));
  return std::unique_ptr<SqliteJobStore>(
      new SqliteJobStore(std::move(db), clock, options));
}

// ---- Calibration sets ----

absl::StatusOr<CalibrationSet> SqliteJobStore::PutCalibrationSet(
    const std::string& sha256, int64_t size_bytes, const std::string& path) {
  QUANT_RETURN_IF_ERROR(CheckSha256(sha256));
  if (size_bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("size_bytes must not be negative, got ", size_bytes));
  }
  if (path.empty()) return absl::InvalidArgumentError("path is empty");
  MutexLock lock(&mu_);
  QUANT_ASSIGN_OR_RETURN(auto txn, Transaction::Begin(db_.get()));
  QUANT_ASSIGN_OR_RETURN(
      Statement insert,
      db_->Prepare("INSERT INTO calibration_sets(sha256, size_bytes, path, "
                   "created_ms) VALUES (?1, ?2, ?3, ?4) "
                   "ON CONFLICT(sha256) DO NOTHING"));
  QUANT_RETURN_IF_ERROR(
      insert.BindAll(sha256, size_bytes, path, clock_->NowMs()).Run());
  QUANT_ASSIGN_OR_RETURN(
      Statement select,
      db_->Prepare("SELECT size_bytes, path, created_ms FROM calibration_sets "
                   "WHERE sha256 = ?1"));
  QUANT_ASSIGN_OR_RETURN(bool row, select.BindAll(sha256).Step());
  if (!row) return absl::InternalError("calibration set vanished on insert");
  CalibrationSet set{sha256, select.ColumnInt64(0), select.ColumnText(1),
                     select.ColumnInt64(2)};
  if (set.size_bytes != size_bytes) {
    return absl::FailedPreconditionError(absl::StrCat(
        "calibration set ", sha256, " is recorded with size_bytes ",
        set.size_bytes, ", not ", size_bytes));
  }
  QUANT_RETURN_IF_ERROR(txn->Commit());
  return set;
}

absl::StatusOr<CalibrationSet> SqliteJobStore::GetCalibrationSet(
    const std::string& sha256) {
  QUANT_RETURN_IF_ERROR(CheckSha256(sha256));
  MutexLock lock(&mu_);
  QUANT_ASSIGN_OR_RETURN(
      Statement select,
      db_->Prepare("SELECT size_bytes, path, created_ms FROM calibration_sets "
                   "WHERE sha256 = ?1"));
  QUANT_ASSIGN_OR_RETURN(bool row, select.BindAll(sha256).Step());
  if (!row) {
    return absl::NotFoundError(absl::StrCat("calibration set ", sha256));
  }
  return CalibrationSet{sha256, select.ColumnInt64(0), select.ColumnText(1),
                        select.ColumnInt64(2)};
}

// ---- Jobs ----

absl::StatusOr<JobRow> SqliteJobStore::FindJob(const std::string& job_id) {
  QUANT_ASSIGN_OR_RETURN(
      Statement stmt, db_->Prepare(absl::StrCat("SELECT ", kJobColumns,
                                                " FROM jobs WHERE id = ?1")));
  QUANT_ASSIGN_OR_RETURN(bool row, stmt.BindAll(job_id).Step());
  if (!row) return absl::NotFoundError(absl::StrCat("job ", job_id));
  QUANT_ASSIGN_OR_RETURN(JobRow job, ReadJobRow(stmt));
  QUANT_RETURN_IF_ERROR(LoadLabels(job.seq, &job.job));
  return job;
}

absl::StatusOr<JobRow> SqliteJobStore::FindJobBySeq(int64_t seq) {
  QUANT_ASSIGN_OR_RETURN(
      Statement stmt, db_->Prepare(absl::StrCat("SELECT ", kJobColumns,
                                                " FROM jobs WHERE seq = ?1")));
  QUANT_ASSIGN_OR_RETURN(bool row, stmt.BindAll(seq).Step());
  if (!row) return absl::NotFoundError(absl::StrCat("job row ", seq));
  QUANT_ASSIGN_OR_RETURN(JobRow job, ReadJobRow(stmt));
  QUANT_RETURN_IF_ERROR(LoadLabels(job.seq, &job.job));
  return job;
}

absl::Status SqliteJobStore::LoadLabels(int64_t seq, Job* job) {
  QUANT_ASSIGN_OR_RETURN(
      Statement stmt,
      db_->Prepare("SELECT key, value FROM job_labels WHERE job_seq = ?1"));
  stmt.BindAll(seq);
  job->labels.clear();
  while (true) {
    QUANT_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) return absl::OkStatus();
    job->labels[stmt.ColumnText(0)] = stmt.ColumnText(1);
  }
}

absl::StatusOr<CreateJobResult> SqliteJobStore::CreateJob(
    const std::string& request_id, const std::string& spec_json,
    const std::map<std::string, std::string>& labels) {
  QUANT_ASSIGN_OR_RETURN(std::string spec,
                         CanonicalJson(spec_json, "spec_json"));
  for (const auto& [key, value] : labels) {
    if (key.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("labels: empty key (value \"", value, "\")"));
    }
  }
  MutexLock lock(&mu_);
  QUANT_ASSIGN_OR_RETURN(auto txn, Transaction::Begin(db_.get()));
  if (!request_id.empty()) {
    QUANT_ASSIGN_OR_RETURN(
        Statement find,
        db_->Prepare("SELECT seq FROM jobs WHERE request_id = ?1"));
    QUANT_ASSIGN_OR_RETURN(bool row, find.BindAll(request_id).Step());
    if (row) {
      QUANT_ASSIGN_OR_RETURN(JobRow existing,
                             FindJobBySeq(find.ColumnInt64(0)));
      if (existing.job.spec_json != spec) {
        return absl::AlreadyExistsError(absl::StrCat(
            "request_id \"", request_id, "\" was already used for job ",
            existing.job.id, " with a different spec"));
      }
      return CreateJobResult{std::move(existing.job), false};
    }
  }
  const int64_t now = clock_->NowMs();
  // The id comes from the row number, so it is set once the row exists.
  QUANT_ASSIGN_OR_RETURN(
      Statement insert,
      db_->Prepare("INSERT INTO jobs(id, request_id, spec_json, state, "
                   "created_ms, updated_ms) "
                   "VALUES (?1, ?2, ?3, 'QUEUED', ?4, ?4) RETURNING seq"));
  insert.Bind(1, absl::StrCat("new-", NewLeaseId()))
      .Bind(2, request_id.empty() ? std::nullopt
                                  : std::optional<std::string>(request_id))
      .Bind(3, spec)
      .Bind(4, now);
  QUANT_ASSIGN_OR_RETURN(bool inserted, insert.Step());
  if (!inserted) return absl::InternalError("INSERT INTO jobs returned no row");
  const int64_t seq = insert.ColumnInt64(0);
  QUANT_RETURN_IF_ERROR(insert.Run());
  QUANT_ASSIGN_OR_RETURN(
      Statement set_id,
      db_->Prepare("UPDATE jobs SET id = printf('job-%06d', seq) "
                   "WHERE seq = ?1"));
  QUANT_RETURN_IF_ERROR(set_id.BindAll(seq).Run());
  for (const auto& [key, value] : labels) {
    QUANT_ASSIGN_OR_RETURN(
        Statement label,
        db_->Prepare("INSERT INTO job_labels(job_seq, key, value) "
                     "VALUES (?1, ?2, ?3)"));
    QUANT_RETURN_IF_ERROR(label.BindAll(seq, key, value).Run());
  }
  QUANT_ASSIGN_OR_RETURN(JobRow created, FindJobBySeq(seq));
  QUANT_RETURN_IF_ERROR(txn->Commit());
  return CreateJobResult{std::move(created.job), true};
}

absl::StatusOr<Job> SqliteJobStore::GetJob(const std::string& job_id) {
  MutexLock lock(&mu_);
  QUANT_ASSIGN_OR_RETURN(JobRow row, FindJob(job_id));
  return std::move(row.job);
}

absl::StatusOr<JobPage> SqliteJobStore::ListJobs(int page_size,
                                                 const std::string& page_token,
                                                 const JobFilter& filter) {
  if (page_size < 0 || page_size > kMaxPageSize) {
    return absl::InvalidArgumentError(absl::StrCat(
        "page_size must be in 0..", kMaxPageSize, ", got ", page_size));
  }
  if (page_size == 0) page_size = kDefaultPageSize;
  int64_t before_seq = 0;
  if (!page_token.empty()) {
    QUANT_ASSIGN_OR_RETURN(before_seq, DecodePageToken(page_token));
  }
  MutexLock lock(&mu_);
  // Newest first; the token is the last row number served, so rows inserted
  // meanwhile (all newer) never shift later pages.
  QUANT_ASSIGN_OR_RETURN(
      Statement stmt,
      db_->Prepare(absl::StrCat(
          "SELECT ", kJobColumns,
          " FROM jobs WHERE (?1 = 0 OR seq < ?1) AND (?2 IS NULL OR state = "
          "?2) AND (?3 IS NULL OR EXISTS (SELECT 1 FROM job_labels l WHERE "
          "l.job_seq = jobs.seq AND l.key = ?3 AND l.value = ?4)) "
          "ORDER BY seq DESC LIMIT ?5")));
  stmt.Bind(1, before_seq);
  if (filter.state.has_value()) {
    stmt.Bind(2, JobStateName(*filter.state));
  } else {
    stmt.BindNull(2);
  }
  if (filter.label.has_value()) {
    stmt.Bind(3, filter.label->first).Bind(4, filter.label->second);
  } else {
    stmt.BindNull(3).BindNull(4);
  }
  stmt.Bind(5, page_size + 1);
  JobPage page;
  std::vector<int64_t> seqs;
  while (true) {
    QUANT_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) break;
    QUANT_ASSIGN_OR_RETURN(JobRow job, ReadJobRow(stmt));
    seqs.push_back(job.seq);
    page.jobs.push_back(std::move(job.job));
  }
  if (static_cast<int>(page.jobs.size()) > page_size) {
    page.jobs.pop_back();
    seqs.pop_back();
    page.next_page_token = EncodePageToken(seqs.back());
  }
  for (size_t i = 0; i < page.jobs.size(); ++i) {
    QUANT_RETURN_IF_ERROR(LoadLabels(seqs[i], &page.jobs[i]));
  }
  return page;
}

absl::StatusOr<std::vector<Job>> SqliteJobStore::UnfinishedJobs() {
  MutexLock lock(&mu_);
  QUANT_ASSIGN_OR_RETURN(
      Statement stmt,
      db_->Prepare(absl::StrCat("SELECT ", kJobColumns,
                                " FROM jobs WHERE state IN ('QUEUED', "
                                "'RUNNING') ORDER BY seq")));
  std::vector<Job> jobs;
  while (true) {
    QUANT_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) break;
    QUANT_ASSIGN_OR_RETURN(JobRow job, ReadJobRow(stmt));
    QUANT_RETURN_IF_ERROR(LoadLabels(job.seq, &job.job));
    jobs.push_back(std::move(job.job));
  }
  return jobs;
}

absl::Status SqliteJobStore::SetJobFailed(int64_t job_seq,
                                          const std::string& error,
                                          int64_t now) {
  QUANT_ASSIGN_OR_RETURN(
      Statement stmt,
      db_->Prepare("UPDATE jobs SET state = 'FAILED', error = ?2, "
                   "updated_ms = ?3 WHERE seq = ?1 AND state IN ('QUEUED', "
                   "'RUNNING')"));
  return stmt.BindAll(job_seq, error, now).Run();
}

absl::StatusOr<JobChange> SqliteJobStore::CancelJob(const std::string& job_id) {
  MutexLock lock(&mu_);
  QUANT_ASSIGN_OR_RETURN(auto txn, Transaction::Begin(db_.get()));
  QUANT_ASSIGN_OR_RETURN(JobRow row, FindJob(job_id));
  if (IsTerminal(row.job.state)) {
    QUANT_RETURN_IF_ERROR(txn->Commit());
    return JobChange{std::move(row.job), false};
  }
  QUANT_ASSIGN_OR_RETURN(
      Statement stmt,
      db_->Prepare("UPDATE jobs SET state = 'CANCELLED', updated_ms = ?2 "
                   "WHERE seq = ?1"));
  QUANT_RETURN_IF_ERROR(stmt.BindAll(row.seq, clock_->NowMs()).Run());
  QUANT_ASSIGN_OR_RETURN(row, FindJobBySeq(row.seq));
  QUANT_RETURN_IF_ERROR(txn->Commit());
  return JobChange{std::move(row.job), true};
}

absl::StatusOr<JobRow> SqliteJobStore::FindOpenJob(const std::string& job_id) {
  QUANT_ASSIGN_OR_RETURN(JobRow row, FindJob(job_id));
  if (IsTerminal(row.job.state)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job ", job_id, " is already ", JobStateName(row.job.state)));
  }
  return row;
}

absl::StatusOr<Job> SqliteJobStore::FinishJob(
    const std::string& job_id, Verdict verdict, const std::string& artifact_uri,
    const std::vector<std::string>& audit_warnings) {
  if (verdict == Verdict::kNone) {
    return absl::InvalidArgumentError(
        absl::StrCat("job ", job_id, ": verdict must be PASS or FAIL"));
  }
  MutexLock lock(&mu_);
  QUANT_ASSIGN_OR_RETURN(auto txn, Transaction::Begin(db_.get()));
  QUANT_ASSIGN_OR_RETURN(JobRow row, FindOpenJob(job_id));
  QUANT_ASSIGN_OR_RETURN(
      Statement open_tasks,
      db_->Prepare("SELECT COUNT(*) FROM tasks WHERE job_seq = ?1 AND "
                   "state != 'DONE'"));
  QUANT_ASSIGN_OR_RETURN(bool counted, open_tasks.BindAll(row.seq).Step());
  const int64_t unfinished = counted ? open_tasks.ColumnInt64(0) : 0;
  if (!row.planned || unfinished > 0) {
    return absl::FailedPreconditionError(
        row.planned ? absl::StrCat("job ", job_id, " has ", unfinished,
                                   " unfinished tasks")
                    : absl::StrCat("job ", job_id, " has no task plan"));
  }
  QUANT_ASSIGN_OR_RETURN(
      Statement stmt,
      db_->Prepare("UPDATE jobs SET state = 'SUCCEEDED', verdict = ?2, "
                   "artifact_uri = ?3, progress = 1, updated_ms = ?4, "
                   "audit_warnings = ?5 WHERE seq = ?1"));
  QUANT_RETURN_IF_ERROR(stmt.BindAll(row.seq, VerdictName(verdict),
                                     artifact_uri, clock_->NowMs(),
                                     WarningsToJson(audit_warnings))
                            .Run());
  QUANT_ASSIGN_OR_RETURN(row, FindJobBySeq(row.seq));
  QUANT_RETURN_IF_ERROR(txn->Commit());
  return std::move(row.job);
}

absl::StatusOr<Job> SqliteJobStore::FailJob(const std::string& job_id,
                                            const std::string& error) {
  if (error.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("job ", job_id, ": error is empty"));
  }
  MutexLock lock(&mu_);
  QUANT_ASSIGN_OR_RETURN(auto txn, Transaction::Begin(db_.get()));
  QUANT_ASSIGN_OR_RETURN(JobRow row, FindOpenJob(job_id));
  QUANT_RETURN_IF_ERROR(SetJobFailed(row.seq, error, clock_->NowMs()));
  QUANT_ASSIGN_OR_RETURN(row, FindJobBySeq(row.seq));
  QUANT_RETURN_IF_ERROR(txn->Commit());
  return std::move(row.job);
}

absl::StatusOr<RetryJobResult> SqliteJobStore::RetryJob(
    const std::string& job_id) {
  MutexLock lock(&mu_);
  QUANT_ASSIGN_OR_RETURN(auto txn, Transaction::Begin(db_.get()));
  QUANT_ASSIGN_OR_RETURN(JobRow row, FindJob(job_id));
  if (row.job.state != JobState::kFailed) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", job_id, " is ", JobStateName(row.job.state),
                     "; only a FAILED job can be retried"));
  }
  const int64_t now = clock_->NowMs();
  QUANT_ASSIGN_OR_RETURN(
      Statement open_tasks,
      db_->Prepare("SELECT COUNT(*) FROM tasks WHERE job_seq = ?1 AND "
                   "state != 'DONE'"));
  QUANT_ASSIGN_OR_RETURN(bool counted, open_tasks.BindAll(row.seq).Step());
  const bool all_done = counted && open_tasks.ColumnInt64(0) == 0;
  // A job that failed with every task DONE failed while being finished
  // (its checkpoint was missing or unreadable): only finalize can mend it.
  QUANT_ASSIGN_OR_RETURN(
      Statement requeue,
      db_->Prepare("UPDATE tasks SET state = 'PENDING', budget_start = "
                   "attempts, progress = 0, error = '', lease_expires_ms = 0, "
                   "updated_ms = ?2 WHERE job_seq = ?1 AND (state != 'DONE' "
                   "OR (?3 AND kind = 'finalize')) RETURNING idx"));
  requeue.BindAll(row.seq, now, static_cast<int64_t>(all_done));
  int requeued = 0;
  while (true) {
    QUANT_ASSIGN_OR_RETURN(bool more, requeue.Step());
    if (!more) break;
    ++requeued;
  }
  QUANT_ASSIGN_OR_RETURN(
      Statement reopen,
      db_->Prepare("UPDATE jobs SET state = 'QUEUED', verdict = '', "
                   "artifact_uri = '', error = '', audit_warnings = '[]', "
                   "updated_ms = ?2, isa = CASE WHEN EXISTS (SELECT 1 FROM "
                   "tasks WHERE job_seq = ?1 AND state = 'DONE') THEN isa "
                   "ELSE '' END WHERE seq = ?1"));
  QUANT_RETURN_IF_ERROR(reopen.BindAll(row.seq, now).Run());
  QUANT_RETURN_IF_ERROR(RecomputeProgress(row.seq, now));
  RetryJobResult result;
  result.previous_error = row.job.error;
  result.tasks_requeued = requeued;
  QUANT_ASSIGN_OR_RETURN(row, FindJobBySeq(row.seq));
  QUANT_RETURN_IF_ERROR(txn->Commit());
  result.job = std::move(row.job);
  return result;
}

// ---- Events ----

absl::StatusOr<int64_t> SqliteJobStore::AppendEvent(
    const std::string& job_id, const std::string& type,
    const std::string& payload_json) {
  if (type.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("job ", job_id, ": event type is empty"));
  }
  QUANT_ASSIGN_OR_RETURN(
      std::string payload,
      CanonicalJson(payload_json.empty() ? "{}" : payload_json,
                    "payload_json"));
  MutexLock lock(&mu_);
  QUANT_ASSIGN_OR_RETURN(auto txn, Transaction::Begin(db_.get()));
  QUANT_ASSIGN_OR_RETURN(JobRow row, FindJob(job_id));
  QUANT_ASSIGN_OR_RETURN(
      Statement insert,
      db_->Prepare("INSERT INTO events(job_seq, seq, type, payload_json, "
                   "time_ms) VALUES (?1, (SELECT COALESCE(MAX(seq), 0) + 1 "
                   "FROM events WHERE job_seq = ?1), ?2, ?3, ?4) "
                   "RETURNING seq"));
  QUANT_ASSIGN_OR_RETURN(
      bool inserted,
      insert.BindAll(row.seq, type, payload, clock_->NowMs()).Step());
  if (!inserted)
    return absl::InternalError("INSERT INTO events returned no row");
  const int64_t seq = insert.ColumnInt64(0);
  QUANT_RETURN_IF_ERROR(insert.Run());
  QUANT_RETURN_IF_ERROR(txn->Commit());
  return seq;
}

absl::StatusOr<std::vector<Event>> SqliteJobStore::ListEvents(
    const std::string& job_id, int64_t after_seq, int limit) {
  if (after_seq < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("after_seq must not be negative, got ", after_seq));
  }
  if (limit < 0 || limit > kMaxEventLimit) {
    return absl::InvalidArgumentError(
        absl::StrCat("limit must be in 0..", kMaxEventLimit, ", got ", limit));
  }
  if (limit == 0) limit = kDefaultEventLimit;
  MutexLock lock(&mu_);
  QUANT_ASSIGN_OR_RETURN(JobRow row, FindJob(job_id));
  QUANT_ASSIGN_OR_RETURN(
      Statement stmt,
      db_->Prepare("SELECT seq, type, payload_json, time_ms FROM events "
                   "WHERE job_seq = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3"));
  stmt.BindAll(row.seq, after_seq, limit);
  std::vector<Event> events;
  while (true) {
    QUANT_ASSIGN_OR_RETURN(bool more, stmt.Step());
    if (!more) return events;
    events.push_back(Event{job_id, stmt.ColumnInt64(0), stmt.ColumnText(1),
                           stmt.ColumnText(2), stmt.ColumnInt64(3)});
  }
}

}  // namespace quant::store

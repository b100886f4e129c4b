// JobStore on an SQLite database file (WAL mode, foreign keys on, a busy
// timeout). Several SqliteJobStore objects, in one process or several, may
// open the same file: every change runs in a BEGIN IMMEDIATE transaction, so
// no task is leased twice. One object is safe to share between threads.
#ifndef QUANT_SERVER_STORE_SQLITE_JOB_STORE_H_
#define QUANT_SERVER_STORE_SQLITE_JOB_STORE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/base/clock.h"
#include "core/base/mutex.h"
#include "server/store/job_store.h"
#include "server/store/sqlite_db.h"

namespace quant::store {

struct JobRow;   // store_rows.h
struct TaskRow;  // store_rows.h

struct SqliteJobStoreOptions {
  // Leases a task may get; the last failure or expiry fails task and job.
  int max_attempts = 3;
  // How long a call waits for another connection's write lock.
  int busy_timeout_ms = 5000;
};

class SqliteJobStore : public JobStore {
 public:
  // Opens or creates the database at `path`, creating or migrating the
  // schema. `clock` must outlive the store. FailedPrecondition for a database
  // written by a newer schema version; DataLoss for a file that is not an
  // SQLite database.
  static absl::StatusOr<std::unique_ptr<SqliteJobStore>> Open(
      const std::string& path, Clock* clock,
      const SqliteJobStoreOptions& options = SqliteJobStoreOptions());

  absl::StatusOr<CalibrationSet> PutCalibrationSet(
      const std::string& sha256, int64_t size_bytes,
      const std::string& path) override;
  absl::StatusOr<CalibrationSet> GetCalibrationSet(
      const std::string& sha256) override;

  absl::StatusOr<CreateJobResult> CreateJob(
      const std::string& request_id, const std::string& spec_json,
      const std::map<std::string, std::string>& labels) override;
  absl::StatusOr<Job> GetJob(const std::string& job_id) override;
  absl::StatusOr<JobPage> ListJobs(int page_size, const std::string& page_token,
                                   const JobFilter& filter) override;
  absl::StatusOr<std::vector<Job>> UnfinishedJobs() override;

  absl::Status PlanTasks(const std::string& job_id,
                         const std::vector<TaskSpec>& tasks) override;
  absl::StatusOr<std::vector<Task>> ListTasks(
      const std::string& job_id) override;

  absl::StatusOr<std::optional<Lease>> LeaseTask(
      const std::string& worker_id, int64_t lease_ms,
      const std::vector<std::string>& worker_levels = {}) override;
  absl::StatusOr<Task> CurrentLease(const std::string& lease_id) override;
  absl::StatusOr<HeartbeatResult> Heartbeat(const std::string& lease_id,
                                            double progress) override;
  absl::StatusOr<CompleteTaskResult> CompleteTask(
      const std::string& lease_id, const std::string& output_uri,
      const std::string& output_sha256 = "") override;
  absl::StatusOr<FailTaskResult> FailTask(
      const std::string& lease_id, const std::string& error,
      const std::vector<int>& rerun = {}) override;
  absl::StatusOr<ExpiredLeases> ExpireLeases() override;
  absl::StatusOr<int64_t> LeaseExpiryCount() override;
  absl::StatusOr<std::map<JobState, int64_t>> CountJobs() override;
  absl::StatusOr<int64_t> CountRunnableTasks() override;

  absl::StatusOr<JobChange> CancelJob(const std::string& job_id) override;
  absl::StatusOr<Job> FinishJob(
      const std::string& job_id, Verdict verdict,
      const std::string& artifact_uri,
      const std::vector<std::string>& audit_warnings) override;
  absl::StatusOr<Job> FailJob(const std::string& job_id,
                              const std::string& error) override;
  absl::StatusOr<RetryJobResult> RetryJob(const std::string& job_id) override;

  absl::StatusOr<int64_t> AppendEvent(const std::string& job_id,
                                      const std::string& type,
                                      const std::string& payload_json) override;
  absl::StatusOr<std::vector<Event>> ListEvents(const std::string& job_id,
                                                int64_t after_seq,
                                                int limit) override;

 private:
  SqliteJobStore(std::unique_ptr<Database> db, Clock* clock,
                 const SqliteJobStoreOptions& options)
      : db_(std::move(db)), clock_(clock), options_(options) {}

  // Helpers run with mu_ held (inside a transaction where they write).
  // Jobs, calibration sets and events are in sqlite_job_store.cc; plans and
  // leases in sqlite_task_queue.cc.
  absl::StatusOr<JobRow> FindJob(const std::string& job_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // FindJob, FailedPrecondition when the job has already ended.
  absl::StatusOr<JobRow> FindOpenJob(const std::string& job_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<JobRow> FindJobBySeq(int64_t seq)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status LoadLabels(int64_t seq, Job* job)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<TaskRow> TaskAt(int64_t job_seq, int index)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<TaskRow> FindCurrentLease(const std::string& lease_id,
                                           int64_t now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `fail_exhausted` false (LeaseTask's pass) requeues only the leases
  // with attempts left: failing a job is left to ExpireLeases, whose caller
  // learns which jobs failed and records it.
  absl::StatusOr<ExpiredLeases> ExpireLeasesLocked(int64_t now,
                                                   bool fail_exhausted)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status RecomputeProgress(int64_t job_seq, int64_t now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status SetJobFailed(int64_t job_seq, const std::string& error,
                            int64_t now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Mutex mu_;
  std::unique_ptr<Database> db_ ABSL_GUARDED_BY(mu_);
  Clock* clock_;
  SqliteJobStoreOptions options_;
};

}  // namespace quant::store

#endif  // QUANT_SERVER_STORE_SQLITE_JOB_STORE_H_

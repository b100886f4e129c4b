// JobStore: the coordinator's durable state. Calibration sets, jobs, the
// tasks each job is split into (one per decoder block plus a finalize task),
// worker leases on those tasks, and per-job event logs for Watch streams.
//
// A restarted coordinator reopens the same store and resumes every
// unfinished job: finished tasks stay finished, leases that expired while it
// was down go back to the queue on the next ExpireLeases() or LeaseTask().
//
// Lease protocol: LeaseTask hands out one runnable task with a fresh
// lease_id; Heartbeat renews it; CompleteTask / FailTask end it. Only the
// current, unexpired lease of a task is accepted: a late or superseded
// lease is refused with FailedPrecondition (first completion wins).
//
// Errors: InvalidArgument for a bad argument, NotFound "job <id>" / "lease
// <id>", FailedPrecondition for a state that forbids the call,
// AlreadyExists for a request_id reused with another spec.
#ifndef QUANT_SERVER_STORE_JOB_STORE_H_
#define QUANT_SERVER_STORE_JOB_STORE_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace quant::store {

enum class JobState { kQueued, kRunning, kSucceeded, kFailed, kCancelled };
enum class TaskState { kPending, kLeased, kDone, kFailed };
// kShardStats, kReduce and kShardOutput: a sequential dense block run as
// rounds of small tasks (core/pipeline/round_job_tasks.h).
// kFinalizePack, kGatePart: a finalize whose held-out evaluation runs in
// parts (the spec's gate_parts): the packed checkpoint staged, then one
// part of the evaluation per task (its number in `shard`), then kFinalize
// completes on them.
enum class TaskKind {
  kBlock,
  kFinalize,
  kShardStats,
  kReduce,
  kShardOutput,
  kFinalizePack,
  kGatePart,
};
// The split a shard task covers.
enum class TaskSplit { kNone, kCalibration, kHeldout };
enum class Verdict { kNone, kPass, kFail };

// "QUEUED", "PENDING", "block", "PASS" ("" for kNone), ...
const char* JobStateName(JobState state);
const char* TaskStateName(TaskState state);
const char* TaskKindName(TaskKind kind);
// kShardStats, kReduce and kShardOutput: a part of a block run as rounds.
bool IsRoundTaskKind(TaskKind kind);
const char* TaskSplitName(TaskSplit split);  // "", "calibration", "heldout"
const char* VerdictName(Verdict verdict);
absl::StatusOr<JobState> ParseJobState(absl::string_view name);
absl::StatusOr<TaskState> ParseTaskState(absl::string_view name);
absl::StatusOr<TaskKind> ParseTaskKind(absl::string_view name);
absl::StatusOr<TaskSplit> ParseTaskSplit(absl::string_view name);
absl::StatusOr<Verdict> ParseVerdict(absl::string_view name);
// SUCCEEDED, FAILED or CANCELLED.
bool IsTerminal(JobState state);

struct CalibrationSet {
  std::string sha256;  // lowercase hex, 64 characters
  int64_t size_bytes = 0;
  std::string path;
  int64_t created_ms = 0;
};

struct Job {
  std::string id;  // "job-000001", ...
  std::string request_id;
  std::string spec_json;  // canonical form (keys sorted, no spaces)
  std::map<std::string, std::string> labels;
  JobState state = JobState::kQueued;
  Verdict verdict = Verdict::kNone;
  std::string artifact_uri;
  std::string error;
  double progress = 0;  // fraction of task work done, 0..1
  // What the audit showed that the submitter should know (layers whose
  // calibration had fewer tokens than inputs); set when the job succeeds.
  std::vector<std::string> audit_warnings;
  // The kernel level (core/kernels/isa.h name: "v2", "v3", "v4") every task
  // of the job runs at: the level of the worker that leased its first task,
  // "" before that. Results differ in the last bits between levels, so a
  // job's tasks never mix them.
  std::string isa;
  int64_t created_ms = 0;
  int64_t updated_ms = 0;
};

struct CreateJobResult {
  Job job;
  bool created = false;  // false: request_id seen before with the same spec
};

struct JobFilter {
  std::optional<JobState> state;
  // Only jobs whose label `key` has this value.
  std::optional<std::pair<std::string, std::string>> label;
};

struct JobPage {
  std::vector<Job> jobs;        // newest first
  std::string next_page_token;  // empty on the last page
};

// One task of a job's plan, as the scheduler gives it.
struct TaskSpec {
  int index = 0;
  TaskKind kind = TaskKind::kBlock;
  int block = -1;  // decoder block; -1 for finalize
  // Round tasks: the layer group (shard statistics, reduce), the split and
  // the shard (shard statistics and output); -1 / kNone otherwise.
  int group = -1;
  TaskSplit split = TaskSplit::kNone;
  int shard = -1;
  // A reduce that quantizes one layer of its group: its type name
  // ("q_proj"); "" for the whole group and for every other task.
  std::string layer;
  std::vector<int> depends_on;  // lower indices of the same job
};

struct Task {
  std::string job_id;
  int index = 0;
  TaskKind kind = TaskKind::kBlock;
  int block = -1;
  int group = -1;  // As in TaskSpec.
  TaskSplit split = TaskSplit::kNone;
  int shard = -1;
  std::string layer;  // As in TaskSpec.
  std::vector<int> depends_on;
  TaskState state = TaskState::kPending;
  int attempts = 0;  // leases handed out so far
  // `attempts` when the job was last retried: the attempt budget counts
  // from here, while attempt numbers (which name an attempt's files) go on.
  int budget_start = 0;
  std::string lease_id;  // latest lease ("" before the first)
  std::string worker_id;
  int64_t lease_expires_ms = 0;
  double progress = 0;
  std::string output_uri;
  // Of the published marker file (CompleteTask's output_sha256); "" until
  // DONE, or when the coordinator recorded none.
  std::string output_sha256;
  std::string error;  // latest failure
};

// What a task computes, for people: "block 3", "finalize", "block 3 group
// 1: calibration shard 2", "block 3 group 1: reduce", "block 3 group 0:
// reduce q_proj", "block 3: held-out shard 0 output", "finalize: pack",
// "finalize: gate part 2".
std::string DescribeTaskWork(TaskKind kind, int block, int group,
                             TaskSplit split, int shard,
                             const std::string& layer = "");
inline std::string DescribeTaskWork(const Task& task) {
  return DescribeTaskWork(task.kind, task.block, task.group, task.split,
                          task.shard, task.layer);
}

struct Lease {
  std::string lease_id;
  int64_t expires_ms = 0;
  Task task;
  std::string job_spec_json;
  bool job_started = false;  // This lease moved the job QUEUED -> RUNNING.
  std::string job_isa;       // The level the task must run at.
  bool isa_chosen = false;   // This lease set the job's level.
};

struct ExpiredLeases {
  int expired = 0;
  // Jobs this expiry moved to FAILED (a task out of attempts), by id.
  std::vector<std::string> failed_jobs;
};

struct HeartbeatResult {
  int64_t expires_ms = 0;
  JobState job_state = JobState::kRunning;
  bool job_cancelled = false;  // the worker should stop
  Task task;                   // the leased task, renewed
};

struct CompleteTaskResult {
  Task task;
  bool all_tasks_done = false;  // the job's plan is finished
};

struct FailTaskResult {
  Task task;
  bool requeued = false;    // back to PENDING for another attempt
  bool job_failed = false;  // out of attempts: task and job FAILED
  // The DONE tasks (by index) returned to PENDING to be recomputed.
  std::vector<int> rerun;
};

struct JobChange {
  Job job;
  bool changed = false;  // false: the job was already terminal
};

struct RetryJobResult {
  Job job;                     // QUEUED again
  std::string previous_error;  // why the run before failed
  int tasks_requeued = 0;      // tasks put back to PENDING
};

struct Event {
  std::string job_id;
  int64_t seq = 0;  // 1, 2, ... per job
  std::string type;
  std::string payload_json;
  int64_t time_ms = 0;
};

class JobStore {
 public:
  virtual ~JobStore() = default;

  // Calibration sets, content-addressed by sha256. Recording the same hash
  // again with the same size keeps the first record; another size is
  // FailedPrecondition.
  virtual absl::StatusOr<CalibrationSet> PutCalibrationSet(
      const std::string& sha256, int64_t size_bytes,
      const std::string& path) = 0;
  virtual absl::StatusOr<CalibrationSet> GetCalibrationSet(
      const std::string& sha256) = 0;

  // Creates a QUEUED job. Idempotent by request_id (empty: no idempotency).
  virtual absl::StatusOr<CreateJobResult> CreateJob(
      const std::string& request_id, const std::string& spec_json,
      const std::map<std::string, std::string>& labels) = 0;
  virtual absl::StatusOr<Job> GetJob(const std::string& job_id) = 0;
  // page_size 0 means 50; at most 1000. page_token "" starts at the newest.
  virtual absl::StatusOr<JobPage> ListJobs(int page_size,
                                           const std::string& page_token,
                                           const JobFilter& filter) = 0;
  // QUEUED and RUNNING jobs, oldest first.
  virtual absl::StatusOr<std::vector<Job>> UnfinishedJobs() = 0;

  // Sets the job's tasks, once. Indices are 0..n-1 in any order; every
  // dependency names a lower index of the same job.
  virtual absl::Status PlanTasks(const std::string& job_id,
                                 const std::vector<TaskSpec>& tasks) = 0;
  // The job's tasks by index.
  virtual absl::StatusOr<std::vector<Task>> ListTasks(
      const std::string& job_id) = 0;

  // The next runnable task (PENDING, every dependency DONE, job QUEUED or
  // RUNNING) that the worker can run, oldest job first, lowest index first;
  // nullopt when none. Expired leases with attempts left are requeued
  // first; one out of attempts waits for ExpireLeases, which fails its job
  // and says so.
  //
  // `worker_levels` are the kernel levels the worker runs, lowest first,
  // the last its own choice: it gets tasks of jobs whose level is one of
  // them or not chosen yet, and leasing a job's first task sets the job's
  // level to the last. Empty: a worker that does not say (older ones);
  // it gets any task and sets no level.
  virtual absl::StatusOr<std::optional<Lease>> LeaseTask(
      const std::string& worker_id, int64_t lease_ms,
      const std::vector<std::string>& worker_levels = {}) = 0;
  // The task a current (unexpired, not superseded) lease holds, with the
  // worker that took it; FailedPrecondition like Heartbeat otherwise.
  virtual absl::StatusOr<Task> CurrentLease(const std::string& lease_id) = 0;
  virtual absl::StatusOr<HeartbeatResult> Heartbeat(const std::string& lease_id,
                                                    double progress) = 0;
  // `output_sha256`: of the output's marker file, kept with the task so
  // that the tasks reading the output can check it.
  virtual absl::StatusOr<CompleteTaskResult> CompleteTask(
      const std::string& lease_id, const std::string& output_uri,
      const std::string& output_sha256 = "") = 0;
  // Ends the lease with `error`: the task goes back to PENDING while it has
  // attempts left, else it and its job fail. `rerun` names DONE tasks of
  // the same job whose published outputs this task found changed on disk:
  // unless the job fails, they go back to PENDING within their attempt
  // budget (so the failing task, which depends on them, runs again after
  // they have; a file that keeps changing runs the budgets out). An index
  // that is not another DONE task of the job is InvalidArgument, and
  // nothing changes.
  virtual absl::StatusOr<FailTaskResult> FailTask(
      const std::string& lease_id, const std::string& error,
      const std::vector<int>& rerun = {}) = 0;
  // Requeues (or, out of attempts, fails) every lease past its expiry.
  // Returns how many expired and the jobs that failed for it, so the caller
  // records exactly those state changes.
  virtual absl::StatusOr<ExpiredLeases> ExpireLeases() = 0;
  // Lease expiries over the store's lifetime (survives restarts).
  virtual absl::StatusOr<int64_t> LeaseExpiryCount() = 0;
  // Jobs in each state (every state present, 0 when none).
  virtual absl::StatusOr<std::map<JobState, int64_t>> CountJobs() = 0;
  // Tasks LeaseTask could hand out now: PENDING, every dependency DONE, job
  // QUEUED or RUNNING.
  virtual absl::StatusOr<int64_t> CountRunnableTasks() = 0;

  virtual absl::StatusOr<JobChange> CancelJob(const std::string& job_id) = 0;
  // RUNNING/QUEUED -> SUCCEEDED once every task is DONE, with the audit's
  // verdict and warnings.
  virtual absl::StatusOr<Job> FinishJob(
      const std::string& job_id, Verdict verdict,
      const std::string& artifact_uri,
      const std::vector<std::string>& audit_warnings) = 0;
  virtual absl::StatusOr<Job> FailJob(const std::string& job_id,
                                      const std::string& error) = 0;
  // FAILED -> QUEUED, in one transaction: error, verdict and artifact_uri
  // cleared (and the kernel level when no task is DONE, since no result
  // binds the job to it); every task not DONE goes back to PENDING with a fresh
  // attempt budget (a lease still held on one is superseded, so its result is
  // refused); DONE tasks are kept. When every task is DONE (the job failed
  // while being finished), the finalize task runs again. FailedPrecondition
  // naming the state for a job that is not FAILED.
  virtual absl::StatusOr<RetryJobResult> RetryJob(
      const std::string& job_id) = 0;

  // Appends to the job's event log; returns the event's sequence number.
  virtual absl::StatusOr<int64_t> AppendEvent(
      const std::string& job_id, const std::string& type,
      const std::string& payload_json) = 0;
  // Events with seq > after_seq, oldest first; limit 0 means 100, at most
  // 1000.
  virtual absl::StatusOr<std::vector<Event>> ListEvents(
      const std::string& job_id, int64_t after_seq, int limit) = 0;
};

}  // namespace quant::store

#endif  // QUANT_SERVER_STORE_JOB_STORE_H_

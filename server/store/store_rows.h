// Row mapping for the SQLite job store: the column lists its queries select,
// readers turning a result row into Job / Task, the opaque page token, lease
// ids. Internal to server/store.
#ifndef QUANT_SERVER_STORE_STORE_ROWS_H_
#define QUANT_SERVER_STORE_STORE_ROWS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/store/job_store.h"
#include "server/store/sqlite_statement.h"

namespace quant::store {

// A job with its row number (the key tasks, labels and events refer to).
struct JobRow {
  int64_t seq = 0;
  bool planned = false;
  Job job;  // labels filled separately
};

// A task with its job's row number and state and its lease length.
struct TaskRow {
  int64_t job_seq = 0;
  JobState job_state = JobState::kQueued;
  int64_t lease_ms = 0;
  Task task;
};

// Selected from `jobs`, in the order ReadJobRow expects.
inline constexpr char kJobColumns[] =
    "seq, id, request_id, spec_json, state, verdict, artifact_uri, error, "
    "progress, created_ms, updated_ms, planned, audit_warnings, isa";
absl::StatusOr<JobRow> ReadJobRow(const Statement& stmt);

// jobs.audit_warnings: a JSON array of strings.
std::string WarningsToJson(const std::vector<std::string>& warnings);

// Selected from `tasks t JOIN jobs j ON j.seq = t.job_seq`.
inline constexpr char kTaskColumns[] =
    "t.job_seq, j.id, t.idx, t.kind, t.block, t.depends_on, t.state, "
    "t.attempts, t.lease_id, t.worker_id, t.lease_expires_ms, t.progress, "
    "t.output_uri, t.error, t.lease_ms, j.state, t.budget_start, "
    "t.output_sha256, t.grp, t.split, t.shard, t.layer";
absl::StatusOr<TaskRow> ReadTaskRow(const Statement& stmt);

// depends_on as a JSON array, e.g. "[0,1]".
std::string DependsOnJson(const std::vector<int>& depends_on);

// The opaque ListJobs token resuming after the job with this row number.
std::string EncodePageToken(int64_t after_seq);
// InvalidArgument "page_token ..." for anything EncodePageToken did not make.
absl::StatusOr<int64_t> DecodePageToken(const std::string& token);

// "lease-" and 32 random hex digits.
std::string NewLeaseId();

}  // namespace quant::store

#endif  // QUANT_SERVER_STORE_STORE_ROWS_H_

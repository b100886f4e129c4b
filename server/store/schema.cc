// Schema creation and migration.
#include "server/store/schema.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"

namespace quant::store {
namespace {

// kMigrations[i] takes the schema from version i to i + 1.
constexpr const char* kMigrations[] = {
    // 0 -> 1: the initial schema.
    R"sql(
CREATE TABLE calibration_sets (
  sha256 TEXT PRIMARY KEY,
  size_bytes INTEGER NOT NULL,
  path TEXT NOT NULL,
  created_ms INTEGER NOT NULL
);
CREATE TABLE jobs (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT NOT NULL UNIQUE,
  request_id TEXT UNIQUE,
  spec_json TEXT NOT NULL,
  state TEXT NOT NULL,
  verdict TEXT NOT NULL DEFAULT '',
  artifact_uri TEXT NOT NULL DEFAULT '',
  error TEXT NOT NULL DEFAULT '',
  progress REAL NOT NULL DEFAULT 0,
  planned INTEGER NOT NULL DEFAULT 0,
  created_ms INTEGER NOT NULL,
  updated_ms INTEGER NOT NULL
);
CREATE INDEX jobs_by_state ON jobs(state, seq);
CREATE TABLE job_labels (
  job_seq INTEGER NOT NULL REFERENCES jobs(seq) ON DELETE CASCADE,
  key TEXT NOT NULL,
  value TEXT NOT NULL,
  PRIMARY KEY (job_seq, key)
);
CREATE INDEX job_labels_by_pair ON job_labels(key, value, job_seq);
CREATE TABLE tasks (
  job_seq INTEGER NOT NULL REFERENCES jobs(seq) ON DELETE CASCADE,
  idx INTEGER NOT NULL,
  kind TEXT NOT NULL,
  block INTEGER NOT NULL,
  depends_on TEXT NOT NULL,
  state TEXT NOT NULL,
  attempts INTEGER NOT NULL DEFAULT 0,
  lease_id TEXT,
  worker_id TEXT NOT NULL DEFAULT '',
  lease_ms INTEGER NOT NULL DEFAULT 0,
  lease_expires_ms INTEGER NOT NULL DEFAULT 0,
  progress REAL NOT NULL DEFAULT 0,
  output_uri TEXT NOT NULL DEFAULT '',
  error TEXT NOT NULL DEFAULT '',
  updated_ms INTEGER NOT NULL,
  PRIMARY KEY (job_seq, idx)
);
CREATE INDEX tasks_by_state ON tasks(state, job_seq, idx);
CREATE UNIQUE INDEX tasks_by_lease ON tasks(lease_id);
CREATE TABLE task_deps (
  job_seq INTEGER NOT NULL,
  idx INTEGER NOT NULL,
  dep_idx INTEGER NOT NULL,
  PRIMARY KEY (job_seq, idx, dep_idx),
  FOREIGN KEY (job_seq, idx) REFERENCES tasks(job_seq, idx) ON DELETE CASCADE,
  FOREIGN KEY (job_seq, dep_idx) REFERENCES tasks(job_seq, idx)
);
CREATE TABLE events (
  job_seq INTEGER NOT NULL REFERENCES jobs(seq) ON DELETE CASCADE,
  seq INTEGER NOT NULL,
  type TEXT NOT NULL,
  payload_json TEXT NOT NULL,
  time_ms INTEGER NOT NULL,
  PRIMARY KEY (job_seq, seq)
);
INSERT INTO meta(key, value) VALUES ('lease_expiries_total', 0);
)sql",
    // 1 -> 2: RetryJob's fresh attempt budget (tasks.attempts keeps counting:
    // attempt numbers name the attempt's private area).
    R"sql(
ALTER TABLE tasks ADD COLUMN budget_start INTEGER NOT NULL DEFAULT 0;
)sql",
    // 2 -> 3: warnings learned when the job finished (from its audit), kept
    // apart from spec_json, which stays as submitted for request-id
    // idempotency. A JSON array of strings.
    R"sql(
ALTER TABLE jobs ADD COLUMN audit_warnings TEXT NOT NULL DEFAULT '[]';
)sql",
    // 3 -> 4: the kernel level a job's tasks run at ('' until its first
    // task is leased).
    R"sql(
ALTER TABLE jobs ADD COLUMN isa TEXT NOT NULL DEFAULT '';
)sql",
    // 4 -> 5: the sha256 of a finished task's published marker file (a
    // block's layers.json, which lists its other files' hashes; the
    // finalize's manifest.json), checked by every task that reads it.
    R"sql(
ALTER TABLE tasks ADD COLUMN output_sha256 TEXT NOT NULL DEFAULT '';
)sql",
    // 5 -> 6: round tasks of a block (docs/DATA_PARALLEL.md): the layer
    // group, the split and the shard a task covers (-1 / '' for block and
    // finalize tasks, which is what every earlier task is); and the jobs'
    // turns for fair leasing.
    R"sql(
ALTER TABLE tasks ADD COLUMN grp INTEGER NOT NULL DEFAULT -1;
ALTER TABLE tasks ADD COLUMN split TEXT NOT NULL DEFAULT '';
ALTER TABLE tasks ADD COLUMN shard INTEGER NOT NULL DEFAULT -1;
-- The order in which jobs last had a task leased (larger: more recent), so
-- leases go round the jobs with runnable tasks.
ALTER TABLE jobs ADD COLUMN lease_turn INTEGER NOT NULL DEFAULT 0;
)sql",
    // 6 -> 7: a reduce that quantizes one layer of its group (its type name,
    // "q_proj"); '' for every other task and for a whole group's reduce,
    // which is what every earlier reduce is.
    R"sql(
ALTER TABLE tasks ADD COLUMN layer TEXT NOT NULL DEFAULT '';
)sql",
    // 7 -> 8: tasks of kinds 'finalize_pack' and 'gate_part' (a gate part's
    // number in shard, with no split). The tables hold them as they are; the
    // version keeps an older quantd, which cannot read these kinds, from
    // opening the database and failing on its first such task.
    R"sql(
UPDATE meta SET value = value WHERE key = 'schema_version';
)sql",
};
static_assert(sizeof(kMigrations) / sizeof(kMigrations[0]) == kSchemaVersion,
              "one migration per schema version");

absl::StatusOr<int> ReadVersion(Database* db) {
  QUANT_ASSIGN_OR_RETURN(
      Statement stmt,
      db->Prepare("SELECT value FROM meta WHERE key = 'schema_version'"));
  QUANT_ASSIGN_OR_RETURN(bool row, stmt.Step());
  if (!row) return 0;
  return static_cast<int>(stmt.ColumnInt64(0));
}

}  // namespace

absl::Status EnsureSchema(Database* db) {
  QUANT_ASSIGN_OR_RETURN(std::unique_ptr<Transaction> txn,
                         Transaction::Begin(db));
  QUANT_RETURN_IF_ERROR(
      db->Exec("CREATE TABLE IF NOT EXISTS meta ("
               "key TEXT PRIMARY KEY, value INTEGER NOT NULL)"));
  QUANT_ASSIGN_OR_RETURN(int version, ReadVersion(db));
  if (version > kSchemaVersion) {
    return absl::FailedPreconditionError(
        absl::StrCat("database ", db->path(), " has schema version ", version,
                     ", newer than this build's ", kSchemaVersion,
                     "; upgrade quantd to open it"));
  }
  if (version < 0) {
    return absl::DataLossError(absl::StrCat(
        "database ", db->path(), " has a negative schema version ", version));
  }
  if (version == kSchemaVersion) return txn->Commit();
  for (int v = version; v < kSchemaVersion; ++v) {
    absl::Status status = db->Exec(kMigrations[v]);
    if (!status.ok()) {
      return absl::Status(
          status.code(),
          absl::StrCat("migrating database ", db->path(), " to schema version ",
                       v + 1, ": ", status.message()));
    }
  }
  QUANT_ASSIGN_OR_RETURN(
      Statement stmt,
      db->Prepare("INSERT INTO meta(key, value) VALUES ('schema_version', ?1) "
                  "ON CONFLICT(key) DO UPDATE SET value = excluded.value"));
  QUANT_RETURN_IF_ERROR(stmt.BindAll(kSchemaVersion).Run());
  return txn->Commit();
}

}  // namespace quant::store

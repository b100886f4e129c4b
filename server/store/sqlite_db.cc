// SQLite connections and transactions.
#include "server/store/sqlite_db.h"

#include <sqlite3.h>

#include <utility>

#include "absl/strings/str_cat.h"

namespace quant::store {

absl::StatusOr<std::unique_ptr<Database>> Database::Open(
    const std::string& path, int busy_timeout_ms) {
  sqlite3* raw = nullptr;
  const int rc = sqlite3_open_v2(
      path.c_str(), &raw,
      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
      nullptr);
  if (rc != SQLITE_OK) {
    absl::Status status =
        SqliteError(raw, rc, absl::StrCat("cannot open database ", path));
    sqlite3_close(raw);
    return status;
  }
  std::unique_ptr<Database> db(new Database(raw, path));
  sqlite3_busy_timeout(raw, busy_timeout_ms);
  sqlite3_extended_result_codes(raw, 1);
  // The first read of the file happens here: a file that is not a database
  // fails with SQLITE_NOTADB.
  absl::Status status = db->Exec("PRAGMA journal_mode=WAL");
  if (!status.ok()) {
    return absl::Status(status.code(),
                        absl::StrCat("database ", path,
                                     " cannot be used (is it an SQLite "
                                     "database?): ",
                                     status.message()));
  }
  status = db->Exec("PRAGMA foreign_keys=ON; PRAGMA synchronous=NORMAL");
  if (!status.ok()) return status;
  return db;
}

Database::~Database() { sqlite3_close_v2(db_); }

absl::Status Database::Exec(absl::string_view sql) {
  const std::string text(sql);
  char* error = nullptr;
  const int rc = sqlite3_exec(db_, text.c_str(), nullptr, nullptr, &error);
  sqlite3_free(error);
  if (rc != SQLITE_OK) {
    return SqliteError(db_, rc,
                       absl::StrCat("database ", path_, ": `", sql, "`"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Transaction>> Transaction::Begin(Database* db) {
  absl::Status status = db->Exec("BEGIN IMMEDIATE");
  if (!status.ok()) return status;
  return std::unique_ptr<Transaction>(new Transaction(db));
}

Transaction::~Transaction() {
  if (!done_) db_->Exec("ROLLBACK").IgnoreError();
}

absl::Status Transaction::Commit() {
  absl::Status status = db_->Exec("COMMIT");
  if (status.ok()) done_ = true;
  return status;
}

}  // namespace quant::store

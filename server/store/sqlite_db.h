// RAII SQLite connection and transaction. Open() sets WAL journaling,
// foreign keys and a busy timeout, and fails clearly on a file that is not
// an SQLite database.
#ifndef QUANT_SERVER_STORE_SQLITE_DB_H_
#define QUANT_SERVER_STORE_SQLITE_DB_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/store/sqlite_statement.h"

struct sqlite3;

namespace quant::store {

class Database {
 public:
  // Opens (creating if absent) the database file at `path`.
  static absl::StatusOr<std::unique_ptr<Database>> Open(const std::string& path,
                                                        int busy_timeout_ms);
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;
  ~Database();

  // Runs one or more statements that take no parameters.
  absl::Status Exec(absl::string_view sql);
  absl::StatusOr<Statement> Prepare(absl::string_view sql) {
    return Statement::Prepare(db_, sql);
  }
  const std::string& path() const { return path_; }

 private:
  Database(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}

  sqlite3* db_;
  std::string path_;
};

// A write transaction (BEGIN IMMEDIATE: takes the write lock at once, so a
// read-then-write sequence cannot interleave with another connection's).
// Rolled back on destruction unless committed.
class Transaction {
 public:
  static absl::StatusOr<std::unique_ptr<Transaction>> Begin(Database* db);
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  ~Transaction();

  absl::Status Commit();

 private:
  explicit Transaction(Database* db) : db_(db) {}

  Database* db_;
  bool done_ = false;
};

}  // namespace quant::store

#endif  // QUANT_SERVER_STORE_SQLITE_DB_H_

// RAII wrapper of one prepared SQLite statement: bind, step, read columns,
// finalized on destruction. Errors carry the statement's purpose and SQLite's
// message.
#ifndef QUANT_SERVER_STORE_SQLITE_STATEMENT_H_
#define QUANT_SERVER_STORE_SQLITE_STATEMENT_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

struct sqlite3;
struct sqlite3_stmt;

namespace quant::store {

// Maps an SQLite result code to a Status: BUSY/LOCKED -> Unavailable,
// NOTADB/CORRUPT -> DataLoss, CONSTRAINT -> AlreadyExists, else Internal.
// `what` says what was being done.
absl::Status SqliteError(sqlite3* db, int code, absl::string_view what);

class Statement {
 public:
  // Compiles `sql` on `db`. Parameters are numbered from 1.
  static absl::StatusOr<Statement> Prepare(sqlite3* db, absl::string_view sql);

  Statement(Statement&& other) noexcept;
  Statement& operator=(Statement&& other) noexcept;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  ~Statement();

  Statement& Bind(int index, int64_t value);
  Statement& Bind(int index, int value) {
    return Bind(index, static_cast<int64_t>(value));
  }
  Statement& Bind(int index, double value);
  Statement& Bind(int index, absl::string_view value);
  Statement& Bind(int index, const std::string& value) {
    return Bind(index, absl::string_view(value));
  }
  Statement& Bind(int index, const char* value) {
    return Bind(index, absl::string_view(value));
  }
  Statement& BindNull(int index);
  // Binds the value, or NULL when empty.
  template <typename T>
  Statement& Bind(int index, const std::optional<T>& value) {
    return value.has_value() ? Bind(index, *value) : BindNull(index);
  }

  // Binds the arguments to parameters 1, 2, ... in order.
  template <typename... Args>
  Statement& BindAll(const Args&... args) {
    int index = 0;
    (Bind(++index, args), ...);
    return *this;
  }

  // Makes the statement ready to run again with new bindings.
  void Reset();

  // Runs one step: true when a row is ready, false when done. A failed bind
  // surfaces here.
  absl::StatusOr<bool> Step();
  // Runs to completion, ignoring rows.
  absl::Status Run();

  int64_t ColumnInt64(int column) const;
  double ColumnDouble(int column) const;
  std::string ColumnText(int column) const;
  bool ColumnIsNull(int column) const;

 private:
  Statement(sqlite3* db, sqlite3_stmt* stmt) : db_(db), stmt_(stmt) {}
  void NoteBind(int rc, int index);

  sqlite3* db_ = nullptr;
  sqlite3_stmt* stmt_ = nullptr;
  absl::Status bind_status_;
};

}  // namespace quant::store

#endif  // QUANT_SERVER_STORE_SQLITE_STATEMENT_H_

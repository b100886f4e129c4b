// The store's SQLite schema and its migrations. The version lives in the
// `meta` table (key 'schema_version'); a database written by a newer store
// is refused rather than misread.
#ifndef QUANT_SERVER_STORE_SCHEMA_H_
#define QUANT_SERVER_STORE_SCHEMA_H_

#include "absl/status/status.h"
#include "server/store/sqlite_db.h"

namespace quant::store {

// The schema version this build writes.
inline constexpr int kSchemaVersion = 8;

// Creates the schema in an empty database or migrates an older one to
// kSchemaVersion, in one transaction. FailedPrecondition when the database's
// version is newer than kSchemaVersion.
absl::Status EnsureSchema(Database* db);

}  // namespace quant::store

#endif  // QUANT_SERVER_STORE_SCHEMA_H_

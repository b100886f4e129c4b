// Row readers, page tokens and lease ids for the SQLite job store.
#include "server/store/store_rows.h"

#include <optional>
#include <random>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "core/base/status_macros.h"
#include "core/base/strict_json.h"
#include "nlohmann/json.hpp"

namespace quant::store {
namespace {

constexpr absl::string_view kTokenPrefix = "jobs.v1:";

// A column holding a JSON array whose items all satisfy `is_item`; nullopt
// for any other text.
template <typename T, typename IsItem>
std::optional<std::vector<T>> ParseJsonArray(const std::string& text,
                                             IsItem is_item) {
  const nlohmann::json json = ParseJsonOrDiscarded(text);
  if (!json.is_array()) return std::nullopt;
  std::vector<T> out;
  for (const nlohmann::json& item : json) {
    if (!is_item(item)) return std::nullopt;
    out.push_back(item.get<T>());
  }
  return out;
}

absl::StatusOr<std::vector<int>> ParseDependsOn(const std::string& text,
                                                const std::string& job_id,
                                                int index) {
  std::optional<std::vector<int>> out = ParseJsonArray<int>(
      text,
      [](const nlohmann::json& item) { return item.is_number_integer(); });
  if (out.has_value()) return *std::move(out);
  return absl::DataLossError(absl::StrCat("job ", job_id, " task ", index,
                                          ": depends_on is not an integer "
                                          "array: ",
                                          text));
}

absl::StatusOr<std::vector<std::string>> ParseWarnings(
    const std::string& text, const std::string& job_id) {
  std::optional<std::vector<std::string>> out = ParseJsonArray<std::string>(
      text, [](const nlohmann::json& item) { return item.is_string(); });
  if (out.has_value()) return *std::move(out);
  return absl::DataLossError(absl::StrCat(
      "job ", job_id, ": audit_warnings is not a string array: ", text));
}

}  // namespace

std::string WarningsToJson(const std::vector<std::string>& warnings) {
  return nlohmann::json(warnings).dump(
      -1, ' ', false, nlohmann::json::error_handler_t::replace);
}

absl::StatusOr<JobRow> ReadJobRow(const Statement& stmt) {
  JobRow row;
  row.seq = stmt.ColumnInt64(0);
  Job& job = row.job;
  job.id = stmt.ColumnText(1);
  job.request_id = stmt.ColumnText(2);
  job.spec_json = stmt.ColumnText(3);
  QUANT_ASSIGN_OR_RETURN(job.state, ParseJobState(stmt.ColumnText(4)));
  QUANT_ASSIGN_OR_RETURN(job.verdict, ParseVerdict(stmt.ColumnText(5)));
  job.artifact_uri = stmt.ColumnText(6);
  job.error = stmt.ColumnText(7);
  job.progress = stmt.ColumnDouble(8);
  job.created_ms = stmt.ColumnInt64(9);
  job.updated_ms = stmt.ColumnInt64(10);
  row.planned = stmt.ColumnInt64(11) != 0;
  QUANT_ASSIGN_OR_RETURN(job.audit_warnings,
                         ParseWarnings(stmt.ColumnText(12), job.id));
  job.isa = stmt.ColumnText(13);
  return row;
}

absl::StatusOr<TaskRow> ReadTaskRow(const Statement& stmt) {
  TaskRow row;
  row.job_seq = stmt.ColumnInt64(0);
  Task& task = row.task;
  task.job_id = stmt.ColumnText(1);
  task.index = static_cast<int>(stmt.ColumnInt64(2));
  QUANT_ASSIGN_OR_RETURN(task.kind, ParseTaskKind(stmt.ColumnText(3)));
  task.block = static_cast<int>(stmt.ColumnInt64(4));
  QUANT_ASSIGN_OR_RETURN(
      task.depends_on,
      ParseDependsOn(stmt.ColumnText(5), task.job_id, task.index));
  QUANT_ASSIGN_OR_RETURN(task.state, ParseTaskState(stmt.ColumnText(6)));
  task.attempts = static_cast<int>(stmt.ColumnInt64(7));
  task.lease_id = stmt.ColumnText(8);
  task.worker_id = stmt.ColumnText(9);
  task.lease_expires_ms = stmt.ColumnInt64(10);
  task.progress = stmt.ColumnDouble(11);
  task.output_uri = stmt.ColumnText(12);
  task.error = stmt.ColumnText(13);
  row.lease_ms = stmt.ColumnInt64(14);
  QUANT_ASSIGN_OR_RETURN(row.job_state, ParseJobState(stmt.ColumnText(15)));
  task.budget_start = static_cast<int>(stmt.ColumnInt64(16));
  task.output_sha256 = stmt.ColumnText(17);
  task.group = static_cast<int>(stmt.ColumnInt64(18));
  QUANT_ASSIGN_OR_RETURN(task.split, ParseTaskSplit(stmt.ColumnText(19)));
  task.shard = static_cast<int>(stmt.ColumnInt64(20));
  task.layer = stmt.ColumnText(21);
  return row;
}

std::string DependsOnJson(const std::vector<int>& depends_on) {
  return nlohmann::json(depends_on).dump();
}

std::string EncodePageToken(int64_t after_seq) {
  return absl::WebSafeBase64Escape(absl::StrCat(kTokenPrefix, after_seq));
}

absl::StatusOr<int64_t> DecodePageToken(const std::string& token) {
  std::string raw;
  int64_t seq = 0;
  absl::string_view body;
  if (absl::WebSafeBase64Unescape(token, &raw)) {
    body = raw;
    if (absl::ConsumePrefix(&body, kTokenPrefix) &&
        absl::SimpleAtoi(body, &seq) && seq > 0) {
      return seq;
    }
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "page_token \"", token, "\" is not a token this service returned"));
}

std::string NewLeaseId() {
  static thread_local std::mt19937_64 engine([] {
    std::random_device device;
    std::seed_seq seed{device(), device(), device(), device()};
    return std::mt19937_64(seed);
  }());
  return absl::StrFormat("lease-%016x%016x", engine(), engine());
}

}  // namespace quant::store

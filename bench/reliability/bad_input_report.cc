// FormatMarkdown and FormatJson.
#include "bench/reliability/bad_input_report.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "nlohmann/json.hpp"

namespace quant::reliability {
namespace {

constexpr size_t kMaxCell = 240;

// One table cell: no line breaks, '|' escaped, long text shortened.
std::string Cell(const std::string& text) {
  std::string cell = absl::StrReplaceAll(text, {{"\n", " "}, {"\r", " "}});
  if (cell.size() > kMaxCell) cell = cell.substr(0, kMaxCell - 3) + "...";
  return absl::StrReplaceAll(cell, {{"|", "\\|"}});
}

std::string Mark(bool ok, const std::string& text) {
  return ok ? text : absl::StrCat("**", text, "** (MISMATCH)");
}

}  // namespace

std::string FormatMarkdown(const BadInputReport& report) {
  std::string out =
      "| case | input | refused at | status | message | nothing created | "
      "still serving |\n"
      "|---|---|---|---|---|---|---|\n";
  int passed = 0;
  for (const BadInputRow& row : report.rows) {
    passed += row.passed() ? 1 : 0;
    absl::StrAppend(
        &out, "| ", Cell(row.name), " | ", Cell(row.input), " | ",
        Cell(row.refused_at), " | ",
        Mark(row.status_ok, Cell(row.status.empty() ? "-" : row.status)), " | ",
        Mark(row.message_ok, Cell(row.message)), " | ",
        Mark(row.nothing_created_ok, Cell(row.nothing_created)), " | ",
        Mark(row.still_serving, row.still_serving ? "yes" : "no"), " |\n");
  }
  absl::StrAppend(
      &out, "\n", passed, " of ", report.rows.size(),
      " rows as expected; quantd after the run: ", report.quantd_exit, ".\n");
  bool header = false;
  for (const BadInputRow& row : report.rows) {
    if (row.passed() && row.notes.empty()) continue;
    if (!header) {
      absl::StrAppend(&out, "\n");
      header = true;
    }
    for (const std::string& problem : row.problems) {
      absl::StrAppend(&out, "- ", row.name, ": MISMATCH: ", problem, "\n");
    }
    for (const std::string& note : row.notes) {
      absl::StrAppend(&out, "- ", row.name, ": note: ", note, "\n");
    }
  }
  if (!report.temp_dir.empty()) {
    absl::StrAppend(&out, "\nKept for inspection: ", report.temp_dir, "\n");
  }
  return out;
}

std::string FormatJson(const BadInputReport& report) {
  nlohmann::json rows = nlohmann::json::array();
  for (const BadInputRow& row : report.rows) {
    rows.push_back({
        {"case", row.name},
        {"input", row.input},
        {"expected",
         {{"stage", StageName(row.expected.stage)},
          {"status", row.expected.status},
          {"names", row.expected.names}}},
        {"refused_at", row.refused_at},
        {"stage", row.stage},
        {"status", row.status},
        {"message", row.message},
        {"full_message", row.full_message},
        {"nothing_created", row.nothing_created},
        {"status_ok", row.status_ok},
        {"message_ok", row.message_ok},
        {"nothing_created_ok", row.nothing_created_ok},
        {"still_serving", row.still_serving},
        {"passed", row.passed()},
        {"problems", row.problems},
        {"notes", row.notes},
    });
  }
  nlohmann::json out = {{"ok", report.ok()},
                        {"rows", rows},
                        {"quantd_clean_exit", report.quantd_clean_exit},
                        {"quantd_exit", report.quantd_exit},
                        {"temp_dir", report.temp_dir}};
  // Replace invalid UTF-8 (e.g. bytes quoted from a corrupt header) rather
  // than throw.
  return out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace quant::reliability

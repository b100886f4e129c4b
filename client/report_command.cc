// `quantctl report`; see report_command.h.
#include "client/report_command.h"

#include <filesystem>
#include <memory>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "client/common_flags.h"
#include "client/job_json.h"
#include "client/service_client.h"
#include "core/base/file_util.h"
#include "core/base/status_macros.h"
#include "core/base/strict_json.h"
#include "core/pipeline/audit_report.h"
#include "core/report/report_html.h"
#include "nlohmann/json.hpp"

ABSL_FLAG(std::string, html, "",
          "Also write the report page (report.html: verdict and gates, "
          "plots of the held-out error, gain, flattery and Hessian "
          "diagnostics by depth, the flagged layers, provenance, the "
          "sortable table) to this file. A finished job or a local packed "
          "checkpoint only.");

namespace quant {
namespace {

constexpr size_t kMaxDocumentBytes = size_t{256} << 20;

// Writes the page where --html says, whole or not at all.
absl::Status WriteHtml(const std::string& html) {
  const std::string path = absl::GetFlag(FLAGS_html);
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--html: ", path, " is a directory; name a file"));
  }
  absl::Status written = WriteFileAtomically(path, html);
  if (!written.ok()) {
    return absl::Status(written.code(),
                        absl::StrCat("--html: ", written.message()));
  }
  return absl::OkStatus();
}

absl::StatusOr<nlohmann::json> ReadJsonDocument(const std::string& dir,
                                                const std::string& name) {
  const std::string path = JoinPath(dir, name);
  QUANT_ASSIGN_OR_RETURN(const std::string text,
                         ReadFileToString(path, kMaxDocumentBytes));
  return ParseJsonFile(text, path);
}

// A packed checkpoint on this machine: its audit.json and manifest.json.
absl::Status ReportLocalCheckpoint(const CommandInvocation& invocation,
                                   const std::string& dir) {
  QUANT_ASSIGN_OR_RETURN(const nlohmann::json audit,
                         ReadJsonDocument(dir, "audit.json"));
  // The file is input like any other: a damaged one is an error naming the
  // field, before anything is printed or written.
  if (absl::Status fields = CheckAuditTableFields(audit); !fields.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(dir, ": ", fields.message()));
  }
  if (!absl::GetFlag(FLAGS_html).empty()) {
    QUANT_ASSIGN_OR_RETURN(const nlohmann::json manifest,
                           ReadJsonDocument(dir, "manifest.json"));
    absl::StatusOr<std::string> html =
        report::RenderReportHtml(audit, manifest);
    if (!html.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(dir, ": ", html.status().message()));
    }
    QUANT_RETURN_IF_ERROR(WriteHtml(*html));
  }
  if (absl::GetFlag(FLAGS_json)) {
    *invocation.out << audit.dump(2) << "\n";
  } else {
    *invocation.out << FormatAuditTable(audit);
  }
  if (audit["gates"]["verdict"] == "FAIL") {  // checked: a string
    return GateFailedError(
        absl::StrCat(dir, ": gate verdict FAIL; the checkpoint must not ship"));
  }
  return absl::OkStatus();
}

absl::Status RunReport(const CommandInvocation& invocation) {
  const std::string& target = invocation.args[0];
  std::error_code error;
  if (std::filesystem::is_directory(target, error)) {
    return ReportLocalCheckpoint(invocation, target);
  }
  const bool want_html = !absl::GetFlag(FLAGS_html).empty();
  QUANT_ASSIGN_OR_RETURN(std::unique_ptr<ServiceClient> client,
                         ServiceClient::FromFlags());
  QUANT_ASSIGN_OR_RETURN(const v1::JobReport report,
                         client->GetJobReport(target, want_html));
  if (want_html) QUANT_RETURN_IF_ERROR(WriteHtml(report.html()));
  if (absl::GetFlag(FLAGS_json)) {
    QUANT_ASSIGN_OR_RETURN(const nlohmann::json out, ReportToJson(report));
    *invocation.out << out.dump(2) << "\n";
  } else {
    QUANT_ASSIGN_OR_RETURN(const std::string table, FormatReport(report));
    *invocation.out << table;
  }
  if (report.verdict() == v1::VERDICT_FAIL) {
    return GateFailedError(absl::StrCat("job ", report.job().id(),
                                        ": gate verdict FAIL; the artifact "
                                        "must not ship"));
  }
  return absl::OkStatus();
}

}  // namespace

Command ReportCommand() {
  Command command;
  command.name = "report";
  command.summary = "Show a job's per-layer audit, gate values and verdict.";
  command.usage = "report JOB|DIR [--json] [--html FILE] [connection flags]";
  command.description =
      "One row per layer (method, bits, held-out relative output error of "
      "RTN and of the method, gain over RTN, flattery, flags, or why the "
      "layer was kept), then the release gates (held-out perplexity ratio, "
      "mean KL, top-1 agreement) and the verdict. JOB is a job on quantd "
      "(for an unfinished one: the layers finished so far); DIR, a packed "
      "checkpoint directory on this machine (`quantize --local`'s --out or "
      "a fetched artifact), is read without a service. --html FILE also "
      "writes the report page, the same report.html every packed "
      "checkpoint carries: one self-contained file to open in a browser. "
      "--json prints {\"job\": ..., \"verdict\": \"PASS\"|\"FAIL\"|\"\", "
      "\"artifact_uri\": ..., \"gates\": {...}, \"layers\": [...]} with "
      "each layer keyed as in the artifact's audit.json (for DIR: its "
      "audit.json). Exit codes: 0, 3 when the verdict is FAIL, 1 error.";
  command.example = "quantctl report job-000042 --html report.html";
  command.flags = {&absl::GetFlagReflectionHandle(FLAGS_json),
                   &absl::GetFlagReflectionHandle(FLAGS_html)};
  for (const absl::CommandLineFlag* flag : ServiceFlags()) {
    command.flags.push_back(flag);
  }
  command.min_args = 1;
  command.max_args = 1;
  command.run = RunReport;
  return command;
}

}  // namespace quant

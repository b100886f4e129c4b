// `quantctl report`; see report_command.h.
#include "client/report_command.h"

#include <memory>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "client/common_flags.h"
#include "client/job_json.h"
#include "client/service_client.h"
#include "core/base/status_macros.h"
#include "nlohmann/json.hpp"

namespace quant {
namespace {

absl::Status RunReport(const CommandInvocation& invocation) {
  QUANT_ASSIGN_OR_RETURN(std::unique_ptr<ServiceClient> client,
                         ServiceClient::FromFlags());
  QUANT_ASSIGN_OR_RETURN(const v1::JobReport report,
                         client->GetJobReport(invocation.args[0]));
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
  command.usage = "report JOB [--json] [connection flags]";
  command.description =
      "One row per layer (method, bits, held-out relative output error of "
      "RTN and of the method, gain over RTN, flattery, flags, or why the "
      "layer was kept), then the release gates (held-out perplexity ratio, "
      "mean KL, top-1 agreement) and the verdict. For an unfinished job: "
      "the layers finished so far. --json prints {\"job\": ..., "
      "\"verdict\": \"PASS\"|\"FAIL\"|\"\", \"artifact_uri\": ..., "
      "\"gates\": {...}, \"layers\": [...]} with each layer keyed as in "
      "the artifact's audit.json. Exit codes: 0, 3 when the verdict is "
      "FAIL, 1 error.";
  command.example = "quantctl report job-000042 --json";
  command.flags = {&absl::GetFlagReflectionHandle(FLAGS_json)};
  for (const absl::CommandLineFlag* flag : ServiceFlags()) {
    command.flags.push_back(flag);
  }
  command.min_args = 1;
  command.max_args = 1;
  command.run = RunReport;
  return command;
}

}  // namespace quant

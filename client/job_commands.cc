// `quantctl status`, `list`, `cancel`; see job_commands.h.
#include "client/job_commands.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "client/common_flags.h"
#include "client/job_json.h"
#include "client/job_print.h"
#include "client/service_client.h"
#include "core/base/status_macros.h"
#include "nlohmann/json.hpp"

ABSL_FLAG(std::string, state, "",
          "Only jobs in this state: QUEUED, RUNNING, SUCCEEDED, FAILED or "
          "CANCELLED.");
ABSL_FLAG(int32_t, page_size, 0,
          "Jobs per page, 1..1000 (0: the server's default, 50).");
ABSL_FLAG(std::string, page_token, "",
          "Continue a listing from the next_page_token a previous page gave.");
ABSL_FLAG(bool, all, false, "Follow the pages to the end, printing every job.");

namespace quant {
namespace {

std::vector<const absl::CommandLineFlag*> WithServiceFlags(
    std::vector<const absl::CommandLineFlag*> flags) {
  for (const absl::CommandLineFlag* flag : ServiceFlags()) {
    flags.push_back(flag);
  }
  return flags;
}

absl::Status RunStatus(const CommandInvocation& invocation) {
  QUANT_ASSIGN_OR_RETURN(std::unique_ptr<ServiceClient> client,
                         ServiceClient::FromFlags());
  QUANT_ASSIGN_OR_RETURN(const v1::Job job, client->GetJob(invocation.args[0]));
  PrintJob(job, absl::GetFlag(FLAGS_json), FormatJobDetails(job),
           *invocation.out);
  return absl::OkStatus();
}

absl::Status RunList(const CommandInvocation& invocation) {
  v1::ListJobsRequest request;
  const std::string state = absl::GetFlag(FLAGS_state);
  if (!state.empty()) {
    absl::StatusOr<v1::JobState> parsed = ParseJobState(state);
    if (!parsed.ok()) return UsageError(parsed.status().message());
    request.set_state(*parsed);
  }
  absl::StatusOr<std::map<std::string, std::string>> labels =
      ParseLabels(absl::GetFlag(FLAGS_label));
  if (!labels.ok()) return UsageError(labels.status().message());
  for (const auto& [key, value] : *labels) {
    (*request.mutable_labels())[key] = value;
  }
  const int32_t page_size = absl::GetFlag(FLAGS_page_size);
  if (page_size < 0 || page_size > 1000) {
    return UsageError(
        absl::StrCat("--page_size must be in 0..1000, got ", page_size));
  }
  request.set_page_size(page_size);
  request.set_page_token(absl::GetFlag(FLAGS_page_token));
  const bool all = absl::GetFlag(FLAGS_all);

  QUANT_ASSIGN_OR_RETURN(std::unique_ptr<ServiceClient> client,
                         ServiceClient::FromFlags());
  std::vector<v1::Job> jobs;
  std::string next_page_token;
  while (true) {
    QUANT_ASSIGN_OR_RETURN(const v1::ListJobsResponse page,
                           client->ListJobs(request));
    jobs.insert(jobs.end(), page.jobs().begin(), page.jobs().end());
    next_page_token = page.next_page_token();
    if (!all || next_page_token.empty()) break;
    request.set_page_token(next_page_token);
  }

  if (absl::GetFlag(FLAGS_json)) {
    nlohmann::json out = {{"jobs", nlohmann::json::array()},
                          {"next_page_token", next_page_token}};
    for (const v1::Job& job : jobs) out["jobs"].push_back(JobToJson(job));
    *invocation.out << out.dump(2) << "\n";
    return absl::OkStatus();
  }
  *invocation.out << FormatJobTable(jobs);
  if (!next_page_token.empty()) {
    *invocation.err << "more jobs: add --all, or --page_token "
                    << next_page_token << " for the next page\n";
  }
  return absl::OkStatus();
}

absl::Status RunCancel(const CommandInvocation& invocation) {
  QUANT_ASSIGN_OR_RETURN(std::unique_ptr<ServiceClient> client,
                         ServiceClient::FromFlags());
  QUANT_ASSIGN_OR_RETURN(const v1::Job job,
                         client->CancelJob(invocation.args[0]));
  PrintJobState(job, absl::GetFlag(FLAGS_json), *invocation.out);
  return absl::OkStatus();
}

// The flags, arity and runner of the commands that take one job id and
// print the job (status, cancel).
Command OneJobCommand(absl::Status (*run)(const CommandInvocation&)) {
  Command command;
  command.flags =
      WithServiceFlags({&absl::GetFlagReflectionHandle(FLAGS_json)});
  command.min_args = 1;
  command.max_args = 1;
  command.run = run;
  return command;
}

}  // namespace

Command StatusCommand() {
  Command command = OneJobCommand(RunStatus);
  command.name = "status";
  command.summary = "Show one job: state, verdict, progress, artifact.";
  command.usage = "status JOB [--json] [connection flags]";
  command.description =
      "Prints the job's state (QUEUED, RUNNING, SUCCEEDED, FAILED, "
      "CANCELLED), verdict (PASS / FAIL once the gates ran), progress in "
      "blocks, checkpoint, calibration hash, labels, artifact URI and "
      "error. --json prints a stable object with the keys id, state, "
      "verdict, checkpoint_uri, calibration_sha256, request_id, labels, "
      "progress {blocks_done, blocks_total, layers_done, layers_total, "
      "fraction, current}, "
      "artifact_uri, error, warnings, create_time, update_time, recipe.";
  command.example = "quantctl status job-000042 --json";
  return command;
}

Command ListCommand() {
  Command command;
  command.name = "list";
  command.summary = "List jobs, filtered by state and label.";
  command.usage =
      "list [--state S] [--label K=V] [--page_size N] [--page_token T] "
      "[--all] [--json] [connection flags]";
  command.description =
      "Prints one page of jobs (--all: every page). Without --all, a note on "
      "stderr says how to get the next page. --json prints {\"jobs\": [job "
      "objects as `status --json` prints them], \"next_page_token\": ...}.";
  command.example = "quantctl list --state RUNNING --label team=lm --all";
  command.flags = WithServiceFlags({
      &absl::GetFlagReflectionHandle(FLAGS_state),
      &absl::GetFlagReflectionHandle(FLAGS_label),
      &absl::GetFlagReflectionHandle(FLAGS_page_size),
      &absl::GetFlagReflectionHandle(FLAGS_page_token),
      &absl::GetFlagReflectionHandle(FLAGS_all),
      &absl::GetFlagReflectionHandle(FLAGS_json),
  });
  command.run = RunList;
  return command;
}

Command CancelCommand() {
  Command command = OneJobCommand(RunCancel);
  command.name = "cancel";
  command.summary = "Cancel a job (best effort; it ends CANCELLED).";
  command.usage = "cancel JOB [--json] [connection flags]";
  command.description =
      "Asks quantd to cancel the job; running tasks stop at their next "
      "heartbeat. Prints the job's state afterwards. Cancelling a job that "
      "already ended changes nothing and prints its final state.";
  command.example = "quantctl cancel job-000042";
  return command;
}

}  // namespace quant

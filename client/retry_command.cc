// `quantctl retry`; see retry_command.h.
#include "client/retry_command.h"

#include <memory>
#include <string>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "client/common_flags.h"
#include "client/job_print.h"
#include "client/service_client.h"
#include "client/watch_command.h"
#include "core/base/status_macros.h"

// Defined by `submit` (one definition per program); retry reads it too.
ABSL_DECLARE_FLAG(bool, wait);

namespace quant {
namespace {

absl::Status RunRetry(const CommandInvocation& invocation) {
  QUANT_ASSIGN_OR_RETURN(std::unique_ptr<ServiceClient> client,
                         ServiceClient::FromFlags());
  QUANT_ASSIGN_OR_RETURN(const v1::Job job,
                         client->RetryJob(invocation.args[0]));
  const bool json_output = absl::GetFlag(FLAGS_json);
  if (!absl::GetFlag(FLAGS_wait)) {
    PrintJobState(job, json_output, *invocation.out);
    return absl::OkStatus();
  }
  return WatchAndPrintOutcome(*client, job.id(), json_output, invocation);
}

}  // namespace

Command RetryCommand() {
  Command command;
  command.name = "retry";
  command.summary = "Run a FAILED job again, keeping its finished blocks.";
  command.usage = "retry JOB [--wait] [--json] [connection flags]";
  command.description =
      "Asks quantd to run a FAILED job again: it goes back to QUEUED with its "
      "error cleared, every task that had not succeeded gets a fresh attempt "
      "budget and finished blocks are not recomputed. Fix what failed first "
      "(`quantctl status JOB` shows the error, e.g. a full disk). Only a "
      "FAILED job can be retried; any other state is an error (exit 1). "
      "Prints the job's new state (with --json the job as a JSON object). "
      "With --wait it follows the job (progress on stderr) and exits 0 "
      "verdict PASS, 3 verdict FAIL, 1 FAILED or CANCELLED.";
  command.example = "quantctl retry job-000042 --wait";
  command.flags = {
      &absl::GetFlagReflectionHandle(FLAGS_wait),
      &absl::GetFlagReflectionHandle(FLAGS_json),
  };
  for (const absl::CommandLineFlag* flag : ServiceFlags()) {
    command.flags.push_back(flag);
  }
  command.min_args = 1;
  command.max_args = 1;
  command.run = RunRetry;
  return command;
}

}  // namespace quant

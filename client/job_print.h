// How the job commands print one job: with --json the job as a JSON object
// (JobToJson), otherwise a text the command chooses. Shared by status,
// cancel, submit, retry and the end of `--wait`, so that --json means the
// same everywhere.
#ifndef QUANT_CLIENT_JOB_PRINT_H_
#define QUANT_CLIENT_JOB_PRINT_H_

#include <ostream>

#include "absl/strings/string_view.h"
#include "quant/v1/service.pb.h"

namespace quant {

// Writes JobToJson(job) and a newline when `json_output`, else `text` as it
// is (it carries its own newline).
void PrintJob(const v1::Job& job, bool json_output, absl::string_view text,
              std::ostream& out);

// PrintJob with the text "ID: STATE\n", what cancel and retry print.
void PrintJobState(const v1::Job& job, bool json_output, std::ostream& out);

}  // namespace quant

#endif  // QUANT_CLIENT_JOB_PRINT_H_

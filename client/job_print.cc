// PrintJob and PrintJobState; see job_print.h.
#include "client/job_print.h"

#include "absl/strings/str_cat.h"
#include "client/job_json.h"

namespace quant {

void PrintJob(const v1::Job& job, bool json_output, absl::string_view text,
              std::ostream& out) {
  if (json_output) {
    out << JobToJson(job).dump(2) << "\n";
  } else {
    out << text;
  }
}

void PrintJobState(const v1::Job& job, bool json_output, std::ostream& out) {
  PrintJob(job, json_output,
           absl::StrCat(job.id(), ": ", JobStateName(job.state()), "\n"), out);
}

}  // namespace quant

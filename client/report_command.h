// `quantctl report JOB`: the job's per-layer audit table, gate values and
// verdict from GetJobReport (layers finished so far for a running job);
// --json gives the same as one object whose layers read like audit.json.
// Exits 3 when the verdict is FAIL.
#ifndef QUANT_CLIENT_REPORT_COMMAND_H_
#define QUANT_CLIENT_REPORT_COMMAND_H_

#include "client/command.h"

namespace quant {

Command ReportCommand();

}  // namespace quant

#endif  // QUANT_CLIENT_REPORT_COMMAND_H_

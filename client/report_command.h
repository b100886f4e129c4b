// `quantctl report JOB|DIR`: the job's per-layer audit table, gate values
// and verdict from GetJobReport (layers finished so far for a running job),
// or a local packed checkpoint's from its audit.json; --json gives the same
// as one object whose layers read like audit.json, --html FILE writes the
// report page (core/report). Exits 3 when the verdict is FAIL.
#ifndef QUANT_CLIENT_REPORT_COMMAND_H_
#define QUANT_CLIENT_REPORT_COMMAND_H_

#include "client/command.h"

namespace quant {

Command ReportCommand();

}  // namespace quant

#endif  // QUANT_CLIENT_REPORT_COMMAND_H_

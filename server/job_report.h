// A finished job's report from the audit.json its finalize task published:
// the per-layer audits and the gates, in the API's messages (whose field
// names are audit.json's keys, tests/proto/audit_contract_test).
#ifndef QUANT_SERVER_JOB_REPORT_H_
#define QUANT_SERVER_JOB_REPORT_H_

#include <string>

#include "absl/status/status.h"
#include "quant/v1/service.pb.h"

namespace quant::server {

// Fills report->layers, gates and verdict. DataLoss when `audit_json` is
// not an audit this tool wrote.
absl::Status AuditToReport(const std::string& audit_json,
                           v1::JobReport* report);

}  // namespace quant::server

#endif  // QUANT_SERVER_JOB_REPORT_H_

// A finished job's report from the audit.json its finalize task published:
// the per-layer audits and the gates, in the API's messages (whose field
// names are audit.json's keys, tests/proto/audit_contract_test).
#ifndef QUANT_SERVER_JOB_REPORT_H_
#define QUANT_SERVER_JOB_REPORT_H_

#include <string>

#include "absl/status/status.h"
#include "quant/v1/service.pb.h"
#include "server/audit_reader.h"

namespace quant::server {

// Fills report->layers, gates and verdict. DataLoss naming the row when a
// layer or the gates do not convert to the API's messages.
absl::Status AuditToReport(const PublishedAudit& audit, v1::JobReport* report);

}  // namespace quant::server

#endif  // QUANT_SERVER_JOB_REPORT_H_

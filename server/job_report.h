// A finished job's report from the audit.json its finalize task published:
// the per-layer audits and the gates, in the API's messages (whose field
// names are audit.json's keys, tests/proto/audit_contract_test).
#ifndef QUANT_SERVER_JOB_REPORT_H_
#define QUANT_SERVER_JOB_REPORT_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "quant/v1/service.pb.h"
#include "server/artifact_store.h"
#include "server/audit_reader.h"

namespace quant::server {

// Fills report->layers, gates and verdict. DataLoss naming the row when a
// layer or the gates do not convert to the API's messages.
absl::Status AuditToReport(const PublishedAudit& audit, v1::JobReport* report);

// The audit.json a finished job's finalize published, read and parsed
// (ParseAudit's DataLoss when it is damaged).
absl::StatusOr<PublishedAudit> ReadPublishedAudit(ArtifactStore& artifacts,
                                                  const std::string& job_id);

// report.html of a finished job, rendered from its published `audit` and the
// manifest.json its finalize published (the same bytes as the checkpoint's
// own report.html). DataLoss naming the file when the manifest is not JSON
// or either lacks what the page shows.
absl::StatusOr<std::string> RenderJobReportHtml(ArtifactStore& artifacts,
                                                const std::string& job_id,
                                                const PublishedAudit& audit);

}  // namespace quant::server

#endif  // QUANT_SERVER_JOB_REPORT_H_

// AuditToReport: a parsed audit.json -> quant.v1.JobReport.
#include "server/job_report.h"

#include "absl/strings/str_cat.h"
#include "core/base/strict_json.h"
#include "core/report/report_html.h"
#include "google/protobuf/util/json_util.h"
#include "nlohmann/json.hpp"

namespace quant::server {
namespace {

absl::Status ParseInto(const nlohmann::json& value, const std::string& what,
                       google::protobuf::Message* message) {
  google::protobuf::util::JsonParseOptions options;
  // audit.json may grow keys before the API does.
  options.ignore_unknown_fields = true;
  auto status = google::protobuf::util::JsonStringToMessage(value.dump(),
                                                            message, options);
  if (!status.ok()) {
    return absl::DataLossError(
        absl::StrCat("audit.json: ", what, ": ", status.ToString()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status AuditToReport(const PublishedAudit& audit, v1::JobReport* report) {
  report->clear_layers();
  for (size_t i = 0; i < audit.layers().size(); ++i) {
    if (absl::Status s =
            ParseInto(audit.layers()[i], absl::StrCat("layers[", i, "]"),
                      report->add_layers());
        !s.ok()) {
      return s;
    }
  }
  if (absl::Status s =
          ParseInto(audit.gates(), "gates", report->mutable_gates());
      !s.ok()) {
    return s;
  }
  if (const auto m = audit.document.find("mixed_precision");
      m != audit.document.end() && !m->is_null()) {
    if (absl::Status s =
            ParseInto(*m, "mixed_precision", report->mutable_mixed_precision());
        !s.ok()) {
      return s;
    }
  }
  report->set_verdict(audit.verdict == store::Verdict::kPass
                          ? v1::VERDICT_PASS
                          : v1::VERDICT_FAIL);
  return absl::OkStatus();
}

absl::StatusOr<PublishedAudit> ReadPublishedAudit(ArtifactStore& artifacts,
                                                  const std::string& job_id) {
  absl::StatusOr<std::string> audit = artifacts.ReadAudit(job_id);
  if (!audit.ok()) return audit.status();
  return ParseAudit(*audit);
}

absl::StatusOr<std::string> RenderJobReportHtml(ArtifactStore& artifacts,
                                                const std::string& job_id,
                                                const PublishedAudit& audit) {
  absl::StatusOr<std::string> manifest = artifacts.ReadManifest(job_id);
  if (!manifest.ok()) return manifest.status();
  const nlohmann::json manifest_json = ParseJsonOrDiscarded(*manifest);
  if (manifest_json.is_discarded()) {
    return absl::DataLossError(
        absl::StrCat("job ", job_id, ": published manifest.json is not JSON"));
  }
  absl::StatusOr<std::string> html =
      report::RenderReportHtml(audit.document, manifest_json);
  if (!html.ok()) {
    return absl::DataLossError(
        absl::StrCat("job ", job_id, ": ", html.status().message()));
  }
  return html;
}

}  // namespace quant::server

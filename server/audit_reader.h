// ParseAudit: quantd's one reader of a published audit.json. A finished
// job's verdict, its report, its gate metrics and its audit warnings all
// come from this typed value, so "PASS" is compared in one place and a
// damaged audit is refused the same way everywhere.
#ifndef QUANT_SERVER_AUDIT_READER_H_
#define QUANT_SERVER_AUDIT_READER_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "server/store/job_store.h"

namespace quant::server {

struct PublishedAudit {
  store::Verdict verdict = store::Verdict::kFail;  // PASS or FAIL, never other.
  // The release gates' measured values.
  double ppl_ratio = 0.0;
  double mean_kl = 0.0;
  double top1_agreement = 0.0;
  // The whole audit.json as written, for the report page.
  nlohmann::json document = {{"gates", nlohmann::json::object()},
                             {"layers", nlohmann::json::array()}};

  // As written (objects with the API's field names), for the report.
  const nlohmann::json& gates() const { return document.at("gates"); }
  const nlohmann::json& layers() const {  // Each an object.
    return document.at("layers");
  }
};

// DataLoss naming the field when `audit_json` is not an audit this tool
// writes: not strict JSON (nesting bounded, no duplicate keys), or without
// a verdict of "PASS" or "FAIL", a "gates" object with numeric ppl_ratio,
// mean_kl and top1_agreement, or a "layers" array of objects.
absl::StatusOr<PublishedAudit> ParseAudit(absl::string_view audit_json);

}  // namespace quant::server

#endif  // QUANT_SERVER_AUDIT_READER_H_

// ParseAudit: audit.json -> PublishedAudit.
#include "server/audit_reader.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "core/base/strict_json.h"

namespace quant::server {
namespace {

absl::Status Damaged(absl::string_view what) {
  return absl::DataLossError(absl::StrCat("audit.json: ", what));
}

absl::StatusOr<double> Gate(const nlohmann::json& gates, const char* name) {
  auto it = gates.find(name);
  if (it == gates.end() || !it->is_number()) {
    return Damaged(absl::StrCat("gates.", name, ": required, a number"));
  }
  return it->get<double>();
}

}  // namespace

absl::StatusOr<PublishedAudit> ParseAudit(absl::string_view audit_json) {
  absl::StatusOr<nlohmann::json> parsed =
      ParseJsonStrict(audit_json, "audit.json");
  if (!parsed.ok()) return absl::DataLossError(parsed.status().message());
  nlohmann::json& audit = *parsed;
  if (!audit.is_object()) return Damaged("not a JSON object");
  PublishedAudit out;
  auto verdict = audit.find("verdict");
  if (verdict == audit.end() || !verdict->is_string()) {
    return Damaged("verdict: required, \"PASS\" or \"FAIL\"");
  }
  if (*verdict == "PASS") {
    out.verdict = store::Verdict::kPass;
  } else if (*verdict == "FAIL") {
    out.verdict = store::Verdict::kFail;
  } else {
    return Damaged(absl::StrCat("verdict: unknown verdict ", verdict->dump(),
                                " (\"PASS\" or \"FAIL\")"));
  }
  auto gates = audit.find("gates");
  if (gates == audit.end() || !gates->is_object()) {
    return Damaged("gates: required, an object");
  }
  absl::StatusOr<double> ppl_ratio = Gate(*gates, "ppl_ratio");
  if (!ppl_ratio.ok()) return ppl_ratio.status();
  absl::StatusOr<double> mean_kl = Gate(*gates, "mean_kl");
  if (!mean_kl.ok()) return mean_kl.status();
  absl::StatusOr<double> top1 = Gate(*gates, "top1_agreement");
  if (!top1.ok()) return top1.status();
  out.ppl_ratio = *ppl_ratio;
  out.mean_kl = *mean_kl;
  out.top1_agreement = *top1;
  auto layers = audit.find("layers");
  if (layers == audit.end() || !layers->is_array()) {
    return Damaged("layers: required, an array");
  }
  for (size_t i = 0; i < layers->size(); ++i) {
    if (!(*layers)[i].is_object()) {
      return Damaged(absl::StrCat("layers[", i, "]: not an object"));
    }
  }
  out.document = std::move(audit);
  return out;
}

}  // namespace quant::server

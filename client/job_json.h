// Stable views of the service's jobs and reports for quantctl: JSON objects
// for --json (state names such as "SUCCEEDED", verdicts "PASS" / "FAIL" /
// "", int64 fields as JSON numbers), the text lines of status and list, the
// audit table of a report, and parsing of --state and --label values.
//
// Layers and gates use protobuf's JSON mapping with the proto field names,
// which audit.proto makes equal to audit.json's keys, so a report's layers
// read like audit.json and feed FormatAuditTable unchanged.
#ifndef QUANT_CLIENT_JOB_JSON_H_
#define QUANT_CLIENT_JOB_JSON_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/message.h"
#include "nlohmann/json.hpp"
#include "quant/v1/service.pb.h"

namespace quant {

// "QUEUED", "RUNNING", "SUCCEEDED", "FAILED", "CANCELLED"; "UNSPECIFIED".
std::string JobStateName(v1::JobState state);
// "PASS", "FAIL"; "" while undecided.
std::string VerdictName(v1::Verdict verdict);
bool IsTerminalState(v1::JobState state);
// "running", "RUNNING" or "JOB_STATE_RUNNING". InvalidArgument naming
// --state and the accepted names otherwise.
absl::StatusOr<v1::JobState> ParseJobState(absl::string_view text);
// "k=v" items; the key must be non-empty and unique. InvalidArgument naming
// --label and the bad item.
absl::StatusOr<std::map<std::string, std::string>> ParseLabels(
    const std::vector<std::string>& items);

// Any message through protobuf's JSON mapping: proto field names, fields at
// their default values printed, 64-bit integers as numbers (the mapping
// writes them as strings) and "NaN" / "Infinity" as doubles.
absl::StatusOr<nlohmann::json> MessageToJson(
    const google::protobuf::Message& message);

// {"id", "state", "verdict", "checkpoint_uri", "calibration_sha256",
//  "request_id", "labels": {...}, "progress": {"blocks_done",
//  "blocks_total", "fraction", "current"}, "artifact_uri", "error",
//  "create_time", "update_time" (RFC 3339, "" when unset), "recipe"}.
nlohmann::json JobToJson(const v1::Job& job);

// {"job": JobToJson, "verdict", "artifact_uri", "gates": {...} (empty
// object while there are none), "layers": [audit.json layer objects]}.
absl::StatusOr<nlohmann::json> ReportToJson(const v1::JobReport& report);

// The report as audit.json's shape: {"layers": [...], "gates": {...},
// "verdict"}; what FormatAuditTable reads.
absl::StatusOr<nlohmann::json> ReportToAuditJson(const v1::JobReport& report);

// The audit table of a report. A report without gates (job unfinished)
// gets its layer rows and a line saying the gates are not evaluated yet.
absl::StatusOr<std::string> FormatReport(const v1::JobReport& report);

// "2/5 blocks, 17/35 layers (48.6%)", plus " - CURRENT" when the server
// says what runs: the percentage is of the layers shown ("2/5 blocks
// (40.0%)" from a quantd that does not count layers).
std::string FormatProgress(const v1::Progress& progress);
// What FormatProgress's percentage and watch's bar show, 0..1.
double ProgressFraction(const v1::Progress& progress);
// `status`: one "key: value" line per field.
std::string FormatJobDetails(const v1::Job& job);
// `list`: a header and one row per job.
std::string FormatJobTable(const std::vector<v1::Job>& jobs);

}  // namespace quant

#endif  // QUANT_CLIENT_JOB_JSON_H_

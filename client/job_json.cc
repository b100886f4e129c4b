// JSON and text views of jobs and reports; see job_json.h.
#include "client/job_json.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/base/strict_json.h"
#include "core/estimate/plan_estimate.h"
#include "core/pipeline/audit_report.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/time_util.h"

namespace quant {
namespace {

using ::google::protobuf::Descriptor;
using ::google::protobuf::FieldDescriptor;
using json = nlohmann::json;

constexpr absl::string_view kStatePrefix = "JOB_STATE_";

// Undoes the JSON mapping's quoting of one scalar: 64-bit integers are
// strings there, and non-finite doubles are "NaN" / "Infinity".
void FixScalar(const FieldDescriptor& field, json* value);

// Walks `value` (a JSON object for a message of type `type`) and fixes
// every scalar the mapping quoted.
void FixMessage(const Descriptor& type, json* value) {
  if (!value->is_object()) return;  // Well-known types print as strings.
  for (int i = 0; i < type.field_count(); ++i) {
    const FieldDescriptor& field = *type.field(i);
    auto it = value->find(field.name());
    if (it == value->end()) continue;
    if (field.is_map()) {
      if (!it->is_object()) continue;
      const FieldDescriptor& map_value = *field.message_type()->map_value();
      for (auto& [key, item] : it->items()) {
        (void)key;
        FixScalar(map_value, &item);
      }
    } else if (field.is_repeated()) {
      if (!it->is_array()) continue;
      for (json& item : *it) FixScalar(field, &item);
    } else {
      FixScalar(field, &*it);
    }
  }
}

void FixScalar(const FieldDescriptor& field, json* value) {
  switch (field.cpp_type()) {
    case FieldDescriptor::CPPTYPE_MESSAGE:
      FixMessage(*field.message_type(), value);
      return;
    case FieldDescriptor::CPPTYPE_INT64: {
      int64_t n = 0;
      if (value->is_string() &&
          absl::SimpleAtoi(value->get<std::string>(), &n)) {
        *value = n;
      }
      return;
    }
    case FieldDescriptor::CPPTYPE_UINT64: {
      uint64_t n = 0;
      if (value->is_string() &&
          absl::SimpleAtoi(value->get<std::string>(), &n)) {
        *value = n;
      }
      return;
    }
    case FieldDescriptor::CPPTYPE_DOUBLE:
    case FieldDescriptor::CPPTYPE_FLOAT: {
      if (!value->is_string()) return;
      const std::string text = value->get<std::string>();
      if (text == "NaN") {
        *value = std::numeric_limits<double>::quiet_NaN();
      } else if (text == "Infinity") {
        *value = std::numeric_limits<double>::infinity();
      } else if (text == "-Infinity") {
        *value = -std::numeric_limits<double>::infinity();
      }
      return;
    }
    default:
      return;
  }
}

std::string TimestampText(const v1::Job& job, bool create) {
  const bool present = create ? job.has_create_time() : job.has_update_time();
  if (!present) return "";
  return google::protobuf::util::TimeUtil::ToString(create ? job.create_time()
                                                           : job.update_time());
}

std::string LabelsText(const v1::Job& job) {
  // Sorted, so the text is stable (proto maps have no order).
  const std::map<std::string, std::string> labels(job.labels().begin(),
                                                  job.labels().end());
  return absl::StrJoin(labels, ",", absl::PairFormatter("="));
}

}  // namespace

std::string JobStateName(v1::JobState state) {
  std::string name = v1::JobState_Name(state);
  if (absl::StartsWith(name, kStatePrefix)) {
    name = name.substr(kStatePrefix.size());
  }
  return name.empty() ? absl::StrCat("STATE_", static_cast<int>(state)) : name;
}

std::string VerdictName(v1::Verdict verdict) {
  switch (verdict) {
    case v1::VERDICT_PASS:
      return "PASS";
    case v1::VERDICT_FAIL:
      return "FAIL";
    default:
      return "";
  }
}

bool IsTerminalState(v1::JobState state) {
  return state == v1::JOB_STATE_SUCCEEDED || state == v1::JOB_STATE_FAILED ||
         state == v1::JOB_STATE_CANCELLED;
}

absl::StatusOr<v1::JobState> ParseJobState(absl::string_view text) {
  std::string name = absl::AsciiStrToUpper(text);
  if (!absl::StartsWith(name, kStatePrefix)) {
    name = absl::StrCat(kStatePrefix, name);
  }
  v1::JobState state = v1::JOB_STATE_UNSPECIFIED;
  if (v1::JobState_Parse(name, &state) && state != v1::JOB_STATE_UNSPECIFIED) {
    return state;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--state: unknown job state \"", text,
      "\" (one of QUEUED, RUNNING, SUCCEEDED, FAILED, CANCELLED)"));
}

absl::StatusOr<std::map<std::string, std::string>> ParseLabels(
    const std::vector<std::string>& items) {
  std::map<std::string, std::string> labels;
  for (const std::string& item : items) {
    const size_t equals = item.find('=');
    if (equals == std::string::npos || equals == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--label: \"", item, "\" is not KEY=VALUE with a non-empty key"));
    }
    const std::string key = item.substr(0, equals);
    if (!labels.emplace(key, item.substr(equals + 1)).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("--label: key \"", key, "\" given twice"));
    }
  }
  return labels;
}

absl::StatusOr<json> MessageToJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string text;
  const auto status =
      google::protobuf::util::MessageToJsonString(message, &text, options);
  if (!status.ok()) {
    return absl::InternalError(
        absl::StrCat(message.GetTypeName(), " to JSON: ", status.ToString()));
  }
  json value = ParseJsonOrDiscarded(text);
  if (value.is_discarded()) {
    return absl::InternalError(
        absl::StrCat(message.GetTypeName(), " to JSON: unparsable output"));
  }
  FixMessage(*message.GetDescriptor(), &value);
  return value;
}

json JobToJson(const v1::Job& job) {
  json labels = json::object();
  for (const auto& [key, value] : job.labels()) labels[key] = value;
  const v1::Progress& p = job.progress();
  json out = {
      {"id", job.id()},
      {"state", JobStateName(job.state())},
      {"verdict", VerdictName(job.verdict())},
      {"checkpoint_uri", job.checkpoint_uri()},
      {"calibration_sha256", job.calibration_sha256()},
      {"request_id", job.request_id()},
      {"labels", labels},
      {"progress",
       {{"blocks_done", p.blocks_done()},
        {"blocks_total", p.blocks_total()},
        {"layers_done", p.layers_done()},
        {"layers_total", p.layers_total()},
        {"fraction", p.fraction()},
        {"current", p.current()},
        {"elapsed_seconds", p.elapsed_seconds()},
        {"eta_seconds",
         p.has_eta_seconds() ? json(p.eta_seconds()) : json(nullptr)}}},
      {"artifact_uri", job.artifact_uri()},
      {"isa", job.isa()},
      {"error", job.error()},
      {"warnings",
       std::vector<std::string>(job.warnings().begin(), job.warnings().end())},
      {"create_time", TimestampText(job, true)},
      {"update_time", TimestampText(job, false)},
  };
  absl::StatusOr<json> recipe = MessageToJson(job.recipe());
  out["recipe"] = recipe.ok() ? *std::move(recipe) : json(nullptr);
  return out;
}

absl::StatusOr<json> ReportToAuditJson(const v1::JobReport& report) {
  json layers = json::array();
  for (const v1::LayerAudit& layer : report.layers()) {
    absl::StatusOr<json> value = MessageToJson(layer);
    if (!value.ok()) return value.status();
    layers.push_back(*std::move(value));
  }
  json gates = json::object();
  if (report.has_gates()) {
    absl::StatusOr<json> value = MessageToJson(report.gates());
    if (!value.ok()) return value.status();
    gates = *std::move(value);
  }
  json audit = {{"layers", std::move(layers)},
                {"gates", std::move(gates)},
                {"verdict", VerdictName(report.verdict())}};
  if (report.has_mixed_precision()) {
    absl::StatusOr<json> value = MessageToJson(report.mixed_precision());
    if (!value.ok()) return value.status();
    audit["mixed_precision"] = *std::move(value);
  }
  return audit;
}

absl::StatusOr<json> ReportToJson(const v1::JobReport& report) {
  absl::StatusOr<json> audit = ReportToAuditJson(report);
  if (!audit.ok()) return audit.status();
  return json{{"job", JobToJson(report.job())},
              {"verdict", VerdictName(report.verdict())},
              {"artifact_uri", report.artifact_uri()},
              {"gates", (*audit)["gates"]},
              {"layers", (*audit)["layers"]},
              {"mixed_precision", audit->value("mixed_precision", json())}};
}

absl::StatusOr<std::string> FormatReport(const v1::JobReport& report) {
  absl::StatusOr<json> audit = ReportToAuditJson(report);
  if (!audit.ok()) return audit.status();
  std::string out = absl::StrCat(report.job().id(), ": ",
                                 JobStateName(report.job().state()), "\n");
  if (report.layers().empty() && !report.has_gates()) {
    absl::StrAppend(&out, "no layer has finished yet\n");
    return out;
  }
  if (report.has_gates()) {
    absl::StrAppend(&out, FormatAuditTable(*audit));
  } else {
    // FormatAuditTable needs gates; give it empty ones and keep only its
    // header and one row per layer.
    (*audit)["gates"] = {
        {"perplexity", 0.0},       {"reference_perplexity", 0.0},
        {"ppl_ratio", 0.0},        {"mean_kl", 0.0},
        {"top1_agreement", 0.0},   {"tokens", 0},
        {"checks", json::array()}, {"verdict", ""}};
    const std::string table = FormatAuditTable(*audit);
    const std::vector<absl::string_view> lines = absl::StrSplit(table, '\n');
    for (size_t i = 0;
         i <= static_cast<size_t>(report.layers_size()) && i < lines.size();
         ++i) {
      absl::StrAppend(&out, lines[i], "\n");
    }
    absl::StrAppend(&out, "gates: not evaluated yet (", report.layers_size(),
                    " layers finished so far)\n");
  }
  if (!report.artifact_uri().empty()) {
    absl::StrAppend(&out, "artifact: ", report.artifact_uri(), "\n");
  }
  return out;
}

double ProgressFraction(const v1::Progress& progress) {
  if (progress.layers_total() <= 0) {
    return std::clamp(progress.fraction(), 0.0, 1.0);  // an older quantd
  }
  return std::clamp(
      static_cast<double>(progress.layers_done()) / progress.layers_total(),
      0.0, 1.0);
}

std::string FormatProgress(const v1::Progress& progress) {
  // The percentage is of the layers shown, so the counts and it agree.
  std::string text =
      progress.layers_total() <= 0
          ? absl::StrFormat("%d/%d blocks (%.1f%%)", progress.blocks_done(),
                            progress.blocks_total(),
                            100.0 * ProgressFraction(progress))
          : absl::StrFormat("%d/%d blocks, %d/%d layers (%.1f%%)",
                            progress.blocks_done(), progress.blocks_total(),
                            progress.layers_done(), progress.layers_total(),
                            100.0 * ProgressFraction(progress));
  if (progress.elapsed_seconds() > 0) {
    absl::StrAppend(&text, ", elapsed ",
                    HumanSeconds(progress.elapsed_seconds()));
  }
  if (progress.has_eta_seconds() && progress.eta_seconds() > 0) {
    absl::StrAppend(&text, ", ETA ", HumanSeconds(progress.eta_seconds()));
  }
  if (!progress.current().empty()) {
    absl::StrAppend(&text, " - ", progress.current());
  }
  return text;
}

std::string FormatJobDetails(const v1::Job& job) {
  std::vector<std::pair<std::string, std::string>> rows = {
      {"job", job.id()},
      {"state", JobStateName(job.state())},
      {"verdict",
       VerdictName(job.verdict()).empty() ? "-" : VerdictName(job.verdict())},
      {"progress", FormatProgress(job.progress())},
      {"checkpoint", job.checkpoint_uri()},
      {"calibration", job.calibration_sha256()},
      {"labels", LabelsText(job)},
      {"request_id", job.request_id()},
      {"artifact", job.artifact_uri()},
      {"kernels", job.isa()},
      {"error", job.error()},
      {"warnings", absl::StrJoin(job.warnings(), "; ")},
      {"created", TimestampText(job, true)},
      {"updated", TimestampText(job, false)},
  };
  std::string out;
  for (const auto& [key, value] : rows) {
    if (value.empty() && key != "job" && key != "state") continue;
    absl::StrAppend(&out, absl::StrFormat("%-12s %s\n", key + ":", value));
  }
  return out;
}

std::string FormatJobTable(const std::vector<v1::Job>& jobs) {
  size_t id_width = 2;
  for (const v1::Job& job : jobs) {
    id_width = std::max(id_width, job.id().size());
  }
  auto row = [id_width](std::string id, const std::string& state,
                        const std::string& verdict, const std::string& progress,
                        const std::string& created, const std::string& labels) {
    id.resize(id_width, ' ');
    return absl::StrFormat("%s %-10s %-7s %-9s %-24s %s\n", id, state, verdict,
                           progress, created, labels);
  };
  std::string out =
      row("ID", "STATE", "VERDICT", "PROGRESS", "CREATED", "LABELS");
  for (const v1::Job& job : jobs) {
    const std::string verdict = VerdictName(job.verdict());
    absl::StrAppend(&out,
                    row(job.id(), JobStateName(job.state()),
                        verdict.empty() ? "-" : verdict,
                        absl::StrFormat("%d/%d", job.progress().blocks_done(),
                                        job.progress().blocks_total()),
                        TimestampText(job, true), LabelsText(job)));
  }
  return out;
}

}  // namespace quant

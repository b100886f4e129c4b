// Job event log entries <-> JSON payloads and stream messages.
#include "server/job_events.h"

#include "absl/strings/str_cat.h"
#include "core/base/strict_json.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/time_util.h"
#include "nlohmann/json.hpp"
#include "server/job_spec.h"

namespace quant::server {
namespace {

using google::protobuf::util::JsonParseOptions;
using google::protobuf::util::JsonPrintOptions;

absl::StatusOr<std::string> ToJson(const google::protobuf::Message& message) {
  JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  std::string out;
  auto status =
      google::protobuf::util::MessageToJsonString(message, &out, options);
  if (!status.ok()) {
    return absl::InternalError(
        absl::StrCat("event payload: ", status.ToString()));
  }
  return out;
}

absl::Status FromJson(const std::string& json,
                      google::protobuf::Message* message) {
  JsonParseOptions options;
  options.ignore_unknown_fields = true;
  auto status =
      google::protobuf::util::JsonStringToMessage(json, message, options);
  if (!status.ok()) {
    return absl::InternalError(
        absl::StrCat("event payload: ", status.ToString()));
  }
  return absl::OkStatus();
}

absl::Status Append(store::JobStore& store, const std::string& job_id,
                    const char* type, const std::string& payload) {
  absl::StatusOr<int64_t> seq = store.AppendEvent(job_id, type, payload);
  return seq.status();
}

}  // namespace

absl::Status AppendStateEvent(store::JobStore& store, const std::string& job_id,
                              store::JobState state) {
  return Append(store, job_id, kJobStateEvent,
                nlohmann::json{{"state", store::JobStateName(state)}}.dump());
}

absl::Status AppendRetryEvent(store::JobStore& store, const std::string& job_id,
                              store::JobState state,
                              const std::string& previous_error) {
  return Append(store, job_id, kJobStateEvent,
                nlohmann::json{{"state", store::JobStateName(state)},
                               {"retried_after", previous_error}}
                    .dump());
}

absl::Status AppendProgressEvent(store::JobStore& store,
                                 const std::string& job_id,
                                 const v1::Progress& progress) {
  absl::StatusOr<std::string> json = ToJson(progress);
  if (!json.ok()) return json.status();
  return Append(store, job_id, kProgressEvent, *json);
}

absl::Status AppendLayerEvent(store::JobStore& store, const std::string& job_id,
                              const v1::LayerAudit& layer) {
  absl::StatusOr<std::string> json = ToJson(layer);
  if (!json.ok()) return json.status();
  return Append(store, job_id, kLayerEvent, *json);
}

absl::Status ForEachEvent(
    store::JobStore& store, const std::string& job_id, int64_t after_seq,
    const std::function<absl::Status(const store::Event&)>& fn) {
  while (true) {
    absl::StatusOr<std::vector<store::Event>> page =
        store.ListEvents(job_id, after_seq, 1000);
    if (!page.ok()) return page.status();
    if (page->empty()) return absl::OkStatus();
    for (const store::Event& event : *page) {
      after_seq = event.seq;
      if (absl::Status s = fn(event); !s.ok()) return s;
    }
  }
}

absl::StatusOr<store::JobState> EventState(const store::Event& event) {
  const nlohmann::json payload = ParseJsonOrDiscarded(event.payload_json);
  if (!payload.is_object() || !payload.contains("state") ||
      !payload["state"].is_string()) {
    return absl::InternalError(absl::StrCat("event ", event.seq, " of job ",
                                            event.job_id, ": no state"));
  }
  return store::ParseJobState(payload["state"].get<std::string>());
}

absl::StatusOr<v1::JobEvent> EventToProto(const store::Event& event,
                                          const v1::Job& job) {
  v1::JobEvent out;
  out.set_sequence(event.seq);
  *out.mutable_time() =
      google::protobuf::util::TimeUtil::MillisecondsToTimestamp(event.time_ms);
  if (event.type == kJobStateEvent) {
    absl::StatusOr<store::JobState> state = EventState(event);
    if (!state.ok()) return state.status();
    *out.mutable_job() = job;
    out.mutable_job()->set_state(JobStateToProto(*state));
    return out;
  }
  if (event.type == kProgressEvent) {
    if (absl::Status s = FromJson(event.payload_json, out.mutable_progress());
        !s.ok()) {
      return s;
    }
    return out;
  }
  if (event.type == kLayerEvent) {
    if (absl::Status s = FromJson(event.payload_json, out.mutable_layer());
        !s.ok()) {
      return s;
    }
    return out;
  }
  return absl::InternalError(
      absl::StrCat("event ", event.seq, ": unknown type \"", event.type, "\""));
}

}  // namespace quant::server

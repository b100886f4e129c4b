// The per-job event log's entries, as the store keeps them and WatchJob
// streams them:
//   "job"       {"state": "RUNNING"}             a state change; a retry of
//                                                a FAILED job adds
//                                                "retried_after": its error
//   "progress"  quant.v1.Progress in proto JSON  after each heartbeat and
//                                                completed task
//   "layer"     quant.v1.LayerAudit, proto JSON  a layer finished
#ifndef QUANT_SERVER_JOB_EVENTS_H_
#define QUANT_SERVER_JOB_EVENTS_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "quant/v1/service.pb.h"
#include "server/store/job_store.h"

namespace quant::server {

inline constexpr char kJobStateEvent[] = "job";
inline constexpr char kProgressEvent[] = "progress";
inline constexpr char kLayerEvent[] = "layer";

absl::Status AppendStateEvent(store::JobStore& store, const std::string& job_id,
                              store::JobState state);
// The state change of RetryJob (FAILED -> `state`), recording the error
// the failed run ended with: the log keeps why a retry was needed after the
// job's own error is cleared.
absl::Status AppendRetryEvent(store::JobStore& store, const std::string& job_id,
                              store::JobState state,
                              const std::string& previous_error);
absl::Status AppendProgressEvent(store::JobStore& store,
                                 const std::string& job_id,
                                 const v1::Progress& progress);
absl::Status AppendLayerEvent(store::JobStore& store, const std::string& job_id,
                              const v1::LayerAudit& layer);

// The stream message for a stored event. A state change carries `job` (the
// job as it is now) with the event's state. Internal for an entry this code
// did not write.
absl::StatusOr<v1::JobEvent> EventToProto(const store::Event& event,
                                          const v1::Job& job);

// Calls `fn` on every event of the job after `after_seq`, oldest first,
// page by page; stops at the first error.
absl::Status ForEachEvent(
    store::JobStore& store, const std::string& job_id, int64_t after_seq,
    const std::function<absl::Status(const store::Event&)>& fn);

// The state a "job" event records.
absl::StatusOr<store::JobState> EventState(const store::Event& event);

}  // namespace quant::server

#endif  // QUANT_SERVER_JOB_EVENTS_H_

// quant.v1.WorkerService: how workers pull quantd's tasks. RegisterWorker
// names a worker; LeaseTask long-polls the store for a runnable task and
// hands it out with everything the worker needs (resolved file:// paths of
// the checkpoint and calibration set, the recipe, the job's work area, an
// attempt-specific area and the artifact location); Heartbeat renews the
// lease, records progress and finished layers as job events, and answers
// with cancellation; CompleteTask / FailTask end the attempt. The last
// completed task finishes the job with the published audit's verdict.
//
// Workers are remembered in memory only: after a coordinator restart a
// worker's LeaseTask answers NOT_FOUND and it registers again, while its
// leases (in the store) stay valid.
#ifndef QUANT_SERVER_WORKER_SERVICE_H_
#define QUANT_SERVER_WORKER_SERVICE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "core/base/mutex.h"
#include "core/estimate/work_model.h"
#include "quant/v1/worker.grpc.pb.h"
#include "server/auth.h"
#include "server/job_lifecycle.h"

namespace quant::server {

struct WorkerServiceOptions {
  int64_t lease_ms = 30'000;
  int64_t heartbeat_ms = 5'000;
  int64_t max_wait_ms = 20'000;  // Longest LeaseTask long poll.
  // Sent with every task (Task.read_roots): where its files may lie.
  std::vector<std::string> read_roots;
  // The registry's bounds: a worker not heard from for this long, holding
  // no lease, is forgotten (it registers again if it comes back); beyond
  // max_workers registrations RegisterWorker answers RESOURCE_EXHAUSTED
  // (quantd --max_workers).
  int64_t forget_worker_after_ms = 10 * 60'000;
  int max_workers = 4096;
};

struct WorkerInfo {
  std::string id;
  std::string name;
  int slots = 1;
  std::string version;
  std::vector<std::string> isa_levels;  // lowest first; the last its choice
  WorkRates rates;  // As it measured them; unknown from an older worker.
  int64_t last_seen_ms = 0;
  int leased = 0;  // Tasks leased and not yet ended through this service.
};

class WorkerServiceImpl final : public v1::WorkerService::Service {
 public:
  // The pointers must outlive the service.
  WorkerServiceImpl(JobLifecycle* lifecycle, const Authenticator* auth,
                    WorkerServiceOptions options);

  grpc::Status RegisterWorker(grpc::ServerContext* context,
                              const v1::RegisterWorkerRequest* request,
                              v1::RegisterWorkerResponse* response) override;
  grpc::Status LeaseTask(grpc::ServerContext* context,
                         const v1::LeaseTaskRequest* request,
                         v1::LeaseTaskResponse* response) override;
  grpc::Status Heartbeat(grpc::ServerContext* context,
                         const v1::HeartbeatRequest* request,
                         v1::HeartbeatResponse* response) override;
  grpc::Status CompleteTask(grpc::ServerContext* context,
                            const v1::CompleteTaskRequest* request,
                            v1::CompleteTaskResponse* response) override;
  grpc::Status FailTask(grpc::ServerContext* context,
                        const v1::FailTaskRequest* request,
                        v1::FailTaskResponse* response) override;

  absl::StatusOr<v1::RegisterWorkerResponse> DoRegister(
      const v1::RegisterWorkerRequest& request);
  // `cancelled` says when the caller gave up (deadline, disconnect).
  absl::StatusOr<v1::LeaseTaskResponse> DoLeaseTask(
      const v1::LeaseTaskRequest& request,
      const std::function<bool()>& cancelled);
  absl::StatusOr<v1::HeartbeatResponse> DoHeartbeat(
      const v1::HeartbeatRequest& request);
  absl::Status DoCompleteTask(const v1::CompleteTaskRequest& request);
  absl::Status DoFailTask(const v1::FailTaskRequest& request);

  std::vector<WorkerInfo> Workers() const;

 private:
  // Whether the caller holds the worker token.
  absl::Status Allow(const grpc::ServerContext& context) const {
    return auth_->Check(context, CallerRole::kWorker);
  }
  absl::StatusOr<v1::Task> TaskProto(const store::Lease& lease);
  void Touch(const std::string& worker_id, int leased_delta);
  // Forgets the lease; how long it ran (zero when leased before a restart).
  absl::Duration EndLease(const std::string& lease_id);
  // InvalidArgument unless `output_uri` is where `task` publishes;
  // FailedPrecondition when nothing was published there; DataLoss when the
  // marker file is not what the worker reports writing (`output_sha256`,
  // when given) or a block's files do not match the hashes its layers.json
  // lists. Returns the marker's sha256. `empty_shard`: a shard task that
  // published nothing (its shard lies past the split); returns "".
  absl::StatusOr<std::string> CheckPublishedOutputs(
      const store::Task& task, const std::string& output_uri,
      const std::string& output_sha256, bool empty_shard) const;

  JobLifecycle* lifecycle_;
  const Authenticator* auth_;
  WorkerServiceOptions options_;
  mutable Mutex mu_;
  std::map<std::string, WorkerInfo> workers_ ABSL_GUARDED_BY(mu_);
  // lease -> worker
  std::map<std::string, std::string> lease_workers_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, absl::Time> lease_started_ ABSL_GUARDED_BY(mu_);
  // Layer names each current lease has reported (duplicates are dropped).
  std::map<std::string, std::set<std::string>> lease_layers_
      ABSL_GUARDED_BY(mu_);
  int next_worker_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace quant::server

#endif  // QUANT_SERVER_WORKER_SERVICE_H_

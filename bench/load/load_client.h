// One load-test client: a thread that, until told to stop, loops over a mix
// of calls on its own gRPC channel: CreateJob (new request_ids while it has
// few jobs pending, and replays of earlier ones, which must return the same
// job), GetJob, ListJobs (pages of 5), a short WatchJob (first event, then
// cancel) and GetJobReport (on finished jobs once there are some).
// Unexpected outcomes are errors in the LatencyRecorder.
#ifndef QUANT_BENCH_LOAD_LOAD_CLIENT_H_
#define QUANT_BENCH_LOAD_LOAD_CLIENT_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench/load/job_registry.h"
#include "bench/load/latency_recorder.h"
#include "grpcpp/channel.h"
#include "quant/v1/service.grpc.pb.h"

namespace quant::load {

struct ClientOptions {
  int index = 0;
  uint64_t seed = 1;
  // New jobs only while fewer of this client's jobs are pending, so the
  // queue stays bounded and most traffic is reads.
  int max_pending = 2;
  // Every job's request but request_id (set per job).
  v1::CreateJobRequest base_request;
  absl::Duration rpc_deadline = absl::Seconds(30);
};

class LoadClient {
 public:
  LoadClient(std::shared_ptr<grpc::Channel> channel, ClientOptions options,
             JobRegistry* registry, LatencyRecorder* recorder);

  // Runs calls until `stop` is set.
  void Run(const std::atomic<bool>& stop);

 private:
  void CreateNew();
  void Replay();
  void GetJob();
  void ListJobs();
  void WatchJob();
  void GetJobReport();

  // Sets the deadline on a context.
  void Prepare(grpc::ClientContext* context) const;

  std::unique_ptr<v1::QuantService::Stub> stub_;
  ClientOptions options_;
  JobRegistry* registry_;
  LatencyRecorder* recorder_;
  std::mt19937_64 rng_;
  std::vector<std::string> own_ids_;
  int64_t next_request_ = 0;
};

// The channel a client uses: its own connection (no subchannel shared with
// the other clients), as separate client processes would have.
std::shared_ptr<grpc::Channel> MakeClientChannel(const std::string& address);

}  // namespace quant::load

#endif  // QUANT_BENCH_LOAD_LOAD_CLIENT_H_

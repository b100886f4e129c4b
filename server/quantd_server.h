// quantd put together: the SQLite job store in a data directory, the
// file:// artifact store, the URI policy, the scheduler's upkeep loop, and a
// gRPC server serving quant.v1.QuantService (clients), quant.v1.WorkerService
// (workers), the standard health service and (v1alpha) reflection, with
// bearer tokens and TLS when configured; optionally local worker processes.
// Used by quantd_main.cc and by in-process tests.
#ifndef QUANT_SERVER_QUANTD_SERVER_H_
#define QUANT_SERVER_QUANTD_SERVER_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/server.h"
#include "metrics/metrics_endpoint.h"
#include "metrics/quantd_metrics.h"
#include "server/artifact_store.h"
#include "server/auth.h"
#include "server/change_signal.h"
#include "server/data_dir_lock.h"
#include "server/job_eta.h"
#include "server/job_lifecycle.h"
#include "server/job_observer_list.h"
#include "server/local_workers.h"
#include "server/quant_service.h"
#include "server/quantd_metrics_observer.h"
#include "server/scheduler.h"
#include "server/store/sqlite_job_store.h"
#include "server/uri_policy.h"
#include "server/worker_service.h"

namespace quant {
class ManifestSigner;
}  // namespace quant

namespace quant::server {

struct QuantdOptions {
  // Loopback only unless both tokens are set; port 0 = any.
  std::string listen = "127.0.0.1:50051";
  std::string data_dir;                    // Holds quantd.db.
  std::string artifact_root;               // file:///DIR
  std::vector<std::string> allowed_roots;  // For checkpoint / calibration URIs.
  int64_t max_upload_bytes = int64_t{64} << 20;
  bool round_tasks = false;         // QuantServiceOptions::round_tasks.
  bool round_layer_reduces = true;  // QuantServiceOptions' too.
  bool round_heldout_later = true;  // QuantServiceOptions' too.
  int gate_parts = 0;               // QuantServiceOptions' too.
  // Bounds on server state (quant_service.h, worker_service.h).
  int max_concurrent_uploads = 4;
  int max_watch_streams = 256;
  AuthTokens tokens;
  // PEM files; both or neither. With them quantd serves TLS only.
  std::string tls_cert_file;
  std::string tls_key_file;
  // PEM Ed25519 private key: sign every finished job's manifest.json.
  std::string signing_key_file;
  WorkerServiceOptions workers;
  std::chrono::milliseconds upkeep_interval{1000};
  // Local worker processes (binary: FindWorkerBinary) and extra flags for
  // them.
  int local_workers = 0;
  std::string worker_binary;
  std::vector<std::string> worker_args;
  // Prometheus /metrics on HOST:PORT; empty: not served (still collected).
  std::string metrics_listen;
  // How long a finished job's per-job series stay.
  absl::Duration metrics_retention = absl::Minutes(30);
};

class QuantdServer {
 public:
  // Opens the stores and starts serving. InvalidArgument for a bad option
  // (non-loopback listen address, missing root), Unavailable when the
  // address cannot be bound.
  static absl::StatusOr<std::unique_ptr<QuantdServer>> Start(
      const QuantdOptions& options);
  ~QuantdServer();

  int port() const { return port_; }  // The bound port.
  std::string address() const;        // "127.0.0.1:<port>" style.
  // The bound /metrics port; 0 when not served.
  int metrics_port() const;
  metrics::QuantdMetrics& metrics() { return *metrics_; }
  QuantServiceImpl& service() { return *service_; }
  WorkerServiceImpl& worker_service() { return *worker_service_; }
  store::JobStore& store() { return *store_; }
  JobLifecycle& lifecycle() { return *lifecycle_; }
  // Null without --local_workers.
  LocalWorkers* local_workers() { return local_workers_.get(); }

  // Graceful: reports NOT_SERVING, ends watch streams and long polls,
  // stops local workers (they release or finish their leases while the
  // server still answers), stops accepting calls and lets running ones
  // finish until the deadline, then stops the upkeep loop. State stays
  // consistent at every step (it is all in the store). Idempotent.
  void Shutdown(int grace_ms = 5000);
  // Blocks until the server has shut down.
  void Wait();

 private:
  QuantdServer() = default;

  // The steps of Start, in order.
  // --data_dir (locked), the job store, the artifact root, the allowed roots.
  absl::Status OpenState(const QuantdOptions& options);
  // The metrics registry.
  absl::Status StartMetrics(const QuantdOptions& options);
  // The metrics endpoint on --metrics_listen, with the report pages
  // (report_page.h); after BuildServices.
  absl::Status ServeMetrics(const QuantdOptions& options);
  // The job lifecycle, authentication, both gRPC services, the observer.
  void BuildServices(const QuantdOptions& options);
  // The gRPC server on --listen, with health checks and RPC metrics.
  absl::Status Listen(const QuantdOptions& options);
  // --local_workers worker processes, connected over loopback.
  absl::Status StartLocalWorkers(const QuantdOptions& options);

  std::string host_;
  int port_ = 0;
  // First member, so released last, after the stores are closed.
  std::unique_ptr<DataDirLock> data_dir_lock_;
  std::unique_ptr<store::SqliteJobStore> store_;
  std::unique_ptr<FileArtifactStore> artifacts_;
  std::unique_ptr<UriPolicy> policy_;
  ChangeSignal signal_;
  std::unique_ptr<metrics::QuantdMetrics> metrics_;
  std::unique_ptr<JobLifecycle> lifecycle_;
  std::unique_ptr<ManifestSigner> signer_;
  std::unique_ptr<Authenticator> auth_;
  std::unique_ptr<QuantServiceImpl> service_;
  std::unique_ptr<WorkerServiceImpl> worker_service_;
  std::unique_ptr<QuantdMetricsObserver> metrics_observer_;
  std::unique_ptr<JobEta> job_eta_;
  std::unique_ptr<JobObserverList> observers_;
  std::unique_ptr<metrics::MetricsEndpoint> metrics_endpoint_;
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<LocalWorkers> local_workers_;
  bool shut_down_ = false;
};

}  // namespace quant::server

#endif  // QUANT_SERVER_QUANTD_SERVER_H_

// quantd put together: the SQLite job store in a data directory, the
// file:// artifact store, the URI policy, and a gRPC server serving
// quant.v1.QuantService, the standard health service and (v1alpha)
// reflection. Used by quantd_main.cc and by in-process tests.
#ifndef QUANT_SERVER_QUANTD_SERVER_H_
#define QUANT_SERVER_QUANTD_SERVER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "grpcpp/server.h"
#include "server/artifact_store.h"
#include "server/quant_service.h"
#include "server/store/sqlite_job_store.h"
#include "server/uri_policy.h"

namespace quant::server {

struct QuantdOptions {
  std::string listen = "127.0.0.1:50051";  // Loopback only; port 0 = any.
  std::string data_dir;                    // Holds quantd.db.
  std::string artifact_root;               // file:///DIR
  std::vector<std::string> allowed_roots;  // For checkpoint / calibration URIs.
  int64_t max_upload_bytes = int64_t{64} << 20;
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
  QuantServiceImpl& service() { return *service_; }
  store::JobStore& store() { return *store_; }

  // Stops accepting calls, lets running ones finish until the deadline,
  // then cancels them. Idempotent.
  void Shutdown(int grace_ms = 5000);
  // Blocks until the server has shut down.
  void Wait();

 private:
  QuantdServer() = default;

  std::string host_;
  int port_ = 0;
  std::unique_ptr<store::SqliteJobStore> store_;
  std::unique_ptr<FileArtifactStore> artifacts_;
  std::unique_ptr<UriPolicy> policy_;
  std::unique_ptr<QuantServiceImpl> service_;
  std::unique_ptr<grpc::Server> server_;
  bool shut_down_ = false;
};

}  // namespace quant::server

#endif  // QUANT_SERVER_QUANTD_SERVER_H_

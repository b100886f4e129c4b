// QuantdServer: opens quantd's stores and runs its gRPC server.
#include "server/quantd_server.h"

#include <chrono>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/base/directory_util.h"
#include "core/base/file_util.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"
#include "server/listen_address.h"
#include "server/store/clock.h"

namespace quant::server {

absl::StatusOr<std::unique_ptr<QuantdServer>> QuantdServer::Start(
    const QuantdOptions& options) {
  if (absl::Status s = CheckLoopbackListenAddress(options.listen); !s.ok()) {
    return s;
  }
  if (options.data_dir.empty()) {
    return absl::InvalidArgumentError("--data_dir: required");
  }
  if (options.artifact_root.empty()) {
    return absl::InvalidArgumentError("--artifact_root: required");
  }
  if (options.allowed_roots.empty()) {
    return absl::InvalidArgumentError("--allowed_roots: required");
  }
  if (options.max_upload_bytes <= 0) {
    return absl::InvalidArgumentError("--max_upload_mb: must be positive");
  }
  std::unique_ptr<QuantdServer> server(new QuantdServer());
  if (!IsDirectory(options.data_dir)) {
    if (absl::Status s = MakeDirectory(options.data_dir); !s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--data_dir: ", s.message()));
    }
  }
  auto store = store::SqliteJobStore::Open(
      JoinPath(options.data_dir, "quantd.db"), store::SystemClock::Default());
  if (!store.ok()) return store.status();
  server->store_ = *std::move(store);
  auto artifacts =
      FileArtifactStore::Open(options.artifact_root, options.max_upload_bytes);
  if (!artifacts.ok()) {
    return absl::Status(
        artifacts.status().code(),
        absl::StrCat("--artifact_root: ", artifacts.status().message()));
  }
  server->artifacts_ = *std::move(artifacts);
  auto policy = UriPolicy::Create(options.allowed_roots);
  if (!policy.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--allowed_roots: ", policy.status().message()));
  }
  server->policy_ = std::make_unique<UriPolicy>(*std::move(policy));
  QuantServiceOptions service_options;
  service_options.max_upload_bytes = options.max_upload_bytes;
  server->service_ = std::make_unique<QuantServiceImpl>(
      server->store_.get(), server->artifacts_.get(), server->policy_.get(),
      service_options);

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  // Uploads arrive in chunks; one message stays well under the default
  // 4 MiB receive limit, which is kept.
  builder.AddListeningPort(options.listen, grpc::InsecureServerCredentials(),
                           &server->port_);
  builder.RegisterService(server->service_.get());
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr || server->port_ == 0) {
    return absl::UnavailableError(
        absl::StrCat("--listen: cannot listen on ", options.listen));
  }
  server->host_ = options.listen.substr(0, options.listen.rfind(':'));
  grpc::HealthCheckServiceInterface* health =
      server->server_->GetHealthCheckService();
  if (health != nullptr) {
    health->SetServingStatus(true);
    health->SetServingStatus(v1::QuantService::service_full_name(), true);
  }
  return server;
}

QuantdServer::~QuantdServer() {
  Shutdown(0);
  Wait();
}

std::string QuantdServer::address() const {
  return absl::StrCat(host_, ":", port_);
}

void QuantdServer::Shutdown(int grace_ms) {
  if (shut_down_ || server_ == nullptr) return;
  shut_down_ = true;
  if (grpc::HealthCheckServiceInterface* health =
          server_->GetHealthCheckService()) {
    health->SetServingStatus(false);
  }
  server_->Shutdown(std::chrono::system_clock::now() +
                    std::chrono::milliseconds(grace_ms));
}

void QuantdServer::Wait() {
  if (server_ != nullptr) server_->Wait();
}

}  // namespace quant::server

// QuantdServer: opens quantd's stores and runs its gRPC server.
#include "server/quantd_server.h"

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/base/clock.h"
#include "core/base/directory_util.h"
#include "core/base/file_util.h"
#include "core/base/status_macros.h"
#include "core/pipeline/manifest_signature.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"
#include "server/data_dir_lock.h"
#include "server/job_eta.h"
#include "server/job_spec.h"
#include "server/listen_address.h"
#include "server/report_page.h"
#include "server/rpc_metrics_interceptor.h"

namespace quant::server {
namespace {

// Job ids count up from the state in --data_dir. With that state lost (the
// directory reset, the WAL deleted) but the artifact root kept, a new job
// would get the id of an old one and be answered with the old job's
// published checkpoint. So every job the artifact root holds must be one
// the state knows; quantd refuses to start otherwise.
absl::Status CheckArtifactRootMatchesState(store::JobStore& store,
                                           const std::string& root_dir) {
  const std::filesystem::path jobs = std::filesystem::path(root_dir) / "jobs";
  std::error_code error;
  if (!std::filesystem::is_directory(jobs, error)) return absl::OkStatus();
  std::filesystem::directory_iterator it(jobs, error);
  for (; !error && it != std::filesystem::directory_iterator();
       it.increment(error)) {
    const std::string id = it->path().filename().string();
    absl::StatusOr<store::Job> job = store.GetJob(id);
    if (absl::IsNotFound(job.status())) {
      return absl::FailedPreconditionError(absl::StrCat(
          "--artifact_root: ", jobs.string(), " holds job ", id,
          ", which the state in --data_dir does not know (was the data "
          "directory reset?); new jobs would reuse its id and be answered "
          "with its artifacts. Start quantd with the data directory that "
          "belongs to this artifact root, or move the artifact root aside"));
    }
    if (!job.ok()) return job.status();
  }
  if (error) {
    return absl::InternalError(absl::StrCat(
        "--artifact_root: cannot list ", jobs.string(), ": ", error.message()));
  }
  return absl::OkStatus();
}

// The options' own consistency, before anything is opened.
absl::Status CheckOptions(const QuantdOptions& options) {
  const bool authenticated =
      !options.tokens.client.empty() && !options.tokens.worker.empty();
  QUANT_RETURN_IF_ERROR(CheckListenAddress(options.listen, authenticated));
  if (!options.tokens.client.empty() &&
      options.tokens.client == options.tokens.worker) {
    return absl::InvalidArgumentError(
        "--worker_token_file: the worker token must differ from the client "
        "token");
  }
  if (options.tls_cert_file.empty() != options.tls_key_file.empty()) {
    return absl::InvalidArgumentError(
        "--tls_cert/--tls_key: give both or neither");
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
  return absl::OkStatus();
}

// TLS from --tls_cert/--tls_key, else insecure.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentialsFrom(
    const QuantdOptions& options) {
  if (options.tls_cert_file.empty()) return grpc::InsecureServerCredentials();
  auto cert = ReadFileToString(options.tls_cert_file, 1 << 20);
  if (!cert.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tls_cert: ", cert.status().message()));
  }
  auto key = ReadFileToString(options.tls_key_file, 1 << 20);
  if (!key.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tls_key: ", key.status().message()));
  }
  grpc::SslServerCredentialsOptions ssl;
  ssl.pem_key_cert_pairs.push_back({*key, *cert});
  return grpc::SslServerCredentials(ssl);
}

// Workers by what they do now; one heard from within `lost_after` is alive.
metrics::WorkerCounts CountWorkers(const WorkerServiceImpl& workers,
                                   absl::Duration lost_after) {
  metrics::WorkerCounts counts;
  const int64_t now_ms = absl::ToUnixMillis(absl::Now());
  for (const WorkerInfo& w : workers.Workers()) {
    if (absl::Milliseconds(now_ms - w.last_seen_ms) > lost_after) {
      ++counts.lost;
    } else if (w.leased > 0) {
      ++counts.busy;
    } else {
      ++counts.idle;
    }
  }
  return counts;
}

}  // namespace

absl::StatusOr<std::unique_ptr<QuantdServer>> QuantdServer::Start(
    const QuantdOptions& options) {
  QUANT_RETURN_IF_ERROR(CheckOptions(options));
  std::unique_ptr<QuantdServer> server(new QuantdServer());
  QUANT_RETURN_IF_ERROR(server->OpenState(options));
  if (!options.signing_key_file.empty()) {
    absl::StatusOr<std::string> pem =
        ReadFileToString(options.signing_key_file, 64 << 10);
    if (!pem.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--signing_key: ", pem.status().message()));
    }
    QUANT_ASSIGN_OR_RETURN(
        server->signer_,
        ManifestSigner::FromPem(
            *pem, absl::StrCat("--signing_key ", options.signing_key_file)));
  }
  QUANT_RETURN_IF_ERROR(server->StartMetrics(options));
  server->BuildServices(options);
  QUANT_RETURN_IF_ERROR(server->ServeMetrics(options));
  QUANT_RETURN_IF_ERROR(server->Listen(options));
  server->scheduler_ = std::make_unique<Scheduler>(server->lifecycle_.get(),
                                                   options.upkeep_interval);
  server->scheduler_->Start();
  QUANT_RETURN_IF_ERROR(server->StartLocalWorkers(options));
  return server;
}

absl::Status QuantdServer::OpenState(const QuantdOptions& options) {
  if (!IsDirectory(options.data_dir)) {
    if (absl::Status s = MakeDirectory(options.data_dir); !s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--data_dir: ", s.message()));
    }
  }
  QUANT_ASSIGN_OR_RETURN(data_dir_lock_,
                         DataDirLock::Acquire(options.data_dir));
  QUANT_ASSIGN_OR_RETURN(store_, store::SqliteJobStore::Open(
                                     JoinPath(options.data_dir, "quantd.db"),
                                     SystemClock::Default()));
  auto artifacts =
      FileArtifactStore::Open(options.artifact_root, options.max_upload_bytes);
  if (!artifacts.ok()) {
    return absl::Status(
        artifacts.status().code(),
        absl::StrCat("--artifact_root: ", artifacts.status().message()));
  }
  artifacts_ = *std::move(artifacts);
  QUANT_RETURN_IF_ERROR(
      CheckArtifactRootMatchesState(*store_, artifacts_->root_dir()));
  auto policy = UriPolicy::Create(options.allowed_roots);
  if (!policy.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--allowed_roots: ", policy.status().message()));
  }
  policy_ = std::make_unique<UriPolicy>(*std::move(policy));
  return absl::OkStatus();
}

absl::Status QuantdServer::StartMetrics(const QuantdOptions& options) {
  metrics_ = std::make_unique<metrics::QuantdMetrics>(
      metrics::QuantdMetricsOptions{options.metrics_retention});
  return absl::OkStatus();
}

absl::Status QuantdServer::ServeMetrics(const QuantdOptions& options) {
  if (options.metrics_listen.empty()) return absl::OkStatus();
  // The endpoint is destroyed before the store, artifacts and
  // authenticator (declared after them), so the page can use them.
  metrics::PageRoute reports;
  reports.prefix = kJobPagesPrefix;
  reports.handler = [this](const metrics::HttpRequest& request) {
    return ServeJobReportPage(request, *store_, *artifacts_, *auth_);
  };
  QUANT_ASSIGN_OR_RETURN(metrics_endpoint_,
                         metrics::MetricsEndpoint::Start(
                             options.metrics_listen, metrics_->registry(),
                             "--metrics_listen", {std::move(reports)}));
  return absl::OkStatus();
}

void QuantdServer::BuildServices(const QuantdOptions& options) {
  lifecycle_ =
      std::make_unique<JobLifecycle>(store_.get(), artifacts_.get(), &signal_);
  auth_ = std::make_unique<Authenticator>(options.tokens);
  QuantServiceOptions service_options;
  service_options.max_upload_bytes = options.max_upload_bytes;
  service_options.round_tasks = options.round_tasks;
  service_options.round_layer_reduces = options.round_layer_reduces;
  service_options.round_heldout_later = options.round_heldout_later;
  service_options.gate_parts = options.gate_parts;
  service_options.max_concurrent_uploads = options.max_concurrent_uploads;
  service_options.max_watch_streams = options.max_watch_streams;
  service_ = std::make_unique<QuantServiceImpl>(lifecycle_.get(), policy_.get(),
                                                auth_.get(), service_options);
  WorkerServiceOptions worker_options = options.workers;
  // A task reads the submitted checkpoint and calibration (allowed roots)
  // and the job's work area and uploads (artifact root), nothing else.
  worker_options.read_roots = policy_->roots();
  worker_options.read_roots.push_back(artifacts_->root_dir());
  worker_service_ = std::make_unique<WorkerServiceImpl>(
      lifecycle_.get(), auth_.get(), worker_options);
  const WorkerServiceImpl* worker_service = worker_service_.get();
  // A worker heard from within a long poll and two leases is alive.
  const absl::Duration lost_after = absl::Milliseconds(
      options.workers.max_wait_ms + 2 * options.workers.lease_ms);
  metrics_observer_ = std::make_unique<QuantdMetricsObserver>(
      metrics_.get(), store_.get(), [worker_service, lost_after] {
        return CountWorkers(*worker_service, lost_after);
      });
  job_eta_ = std::make_unique<JobEta>(
      SystemClock::Default(), [worker_service, lost_after] {
        const int64_t now_ms = absl::ToUnixMillis(absl::Now());
        std::vector<WorkRates> rates;
        for (const WorkerInfo& w : worker_service->Workers()) {
          if (absl::Milliseconds(now_ms - w.last_seen_ms) <= lost_after) {
            rates.push_back(w.rates);
          }
        }
        return MedianRates(rates);
      });
  lifecycle_->set_eta(job_eta_.get());
  lifecycle_->set_signer(signer_.get());
  const JobEta* eta = job_eta_.get();
  metrics_observer_->set_eta_source(
      [eta](const store::Job& job,
            const std::vector<store::Task>& tasks) -> std::optional<double> {
        absl::StatusOr<JobSpec> spec = JobSpecFromJson(job.spec_json);
        if (!spec.ok()) return std::nullopt;
        v1::Progress progress;
        eta->Fill(job, *spec, tasks, &progress);
        if (!progress.has_eta_seconds()) return std::nullopt;
        return progress.eta_seconds();
      });
  observers_ = std::make_unique<JobObserverList>(
      std::vector<JobObserver*>{job_eta_.get(), metrics_observer_.get()});
  lifecycle_->set_observer(observers_.get());
}

absl::Status QuantdServer::Listen(const QuantdOptions& options) {
  QUANT_ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> credentials,
                         ServerCredentialsFrom(options));
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  // Uploads arrive in chunks; one message stays well under the default
  // 4 MiB receive limit, which is kept.
  builder.AddListeningPort(options.listen, credentials, &port_);
  builder.RegisterService(service_.get());
  builder.RegisterService(worker_service_.get());
  std::vector<
      std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
      interceptors;
  interceptors.push_back(
      std::make_unique<RpcMetricsInterceptorFactory>(metrics_.get()));
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || port_ == 0) {
    return absl::UnavailableError(
        absl::StrCat("--listen: cannot listen on ", options.listen));
  }
  host_ = options.listen.substr(0, options.listen.rfind(':'));
  grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService();
  if (health != nullptr) {
    health->SetServingStatus(true);
    health->SetServingStatus(v1::QuantService::service_full_name(), true);
    health->SetServingStatus(v1::WorkerService::service_full_name(), true);
  }
  return absl::OkStatus();
}

absl::Status QuantdServer::StartLocalWorkers(const QuantdOptions& options) {
  if (options.local_workers <= 0) return absl::OkStatus();
  LocalWorkersOptions local;
  local.count = options.local_workers;
  local.binary = FindWorkerBinary(options.worker_binary);
  local.server_address =
      LocalDialAddress(options.listen, port_, !options.tls_cert_file.empty());
  local.worker_token = options.tokens.worker;
  local.tls_ca_file = options.tls_cert_file;
  local.extra_args = options.worker_args;
  QUANT_ASSIGN_OR_RETURN(local_workers_, LocalWorkers::Start(std::move(local)));
  return absl::OkStatus();
}

QuantdServer::~QuantdServer() {
  Shutdown(0);
  Wait();
}

int QuantdServer::metrics_port() const {
  return metrics_endpoint_ != nullptr ? metrics_endpoint_->port() : 0;
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
  signal_.Stop();
  if (local_workers_ != nullptr) {
    local_workers_->Stop(std::chrono::milliseconds(grace_ms));
  }
  server_->Shutdown(std::chrono::system_clock::now() +
                    std::chrono::milliseconds(grace_ms));
  if (scheduler_ != nullptr) scheduler_->Stop();
}

void QuantdServer::Wait() {
  if (server_ != nullptr) server_->Wait();
}

}  // namespace quant::server

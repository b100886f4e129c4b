// quantd: the coordinator's binary. Serves quant.v1.QuantService (uploads,
// jobs, watch, reports) and quant.v1.WorkerService (the workers' task
// protocol), gRPC health and reflection, until SIGTERM or SIGINT; then shuts
// down gracefully. With --local_workers it runs its own workers: the
// embedded default that needs nothing else.
//
//   quantd --data_dir=/var/lib/quantd
//          --artifact_root=file:///var/lib/quantd/artifacts
//          --allowed_roots=/models,/data --local_workers=2
//
// Flags may be written with dashes (--data-dir) or underscores.
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <tuple>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/flag_names.h"
#include "common/token_file.h"
#include "server/auth.h"
#include "server/job_spec.h"
#include "server/quantd_server.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:50051",
          "HOST:PORT to serve on. Loopback only unless both "
          "--client_token_file and --worker_token_file are given. Port 0 "
          "picks a free one (printed on stdout).");
ABSL_FLAG(std::string, data_dir, "",
          "Directory for quantd's state (the SQLite file quantd.db).");
ABSL_FLAG(std::string, artifact_root, "",
          "file:///DIR for calibration sets, job work areas and packed "
          "checkpoints; workers must see the same directory.");
ABSL_FLAG(std::vector<std::string>, allowed_roots, {},
          "Comma-separated directories that checkpoint and calibration URIs "
          "must lie under.");
ABSL_FLAG(int64_t, max_upload_mb, 64,
          "Bound on a calibration set, uploaded or named by URI, in MiB.");
ABSL_FLAG(bool, round_tasks, false,
          "Plan each block of a sequential job as rounds of small tasks that "
          "several workers share: per layer group, one task per shard of 16 "
          "calibration (or held-out) sequences and a reduce that adds them "
          "and quantizes the group (docs/DATA_PARALLEL.md). The packed "
          "checkpoint is the same bytes either way. Off by default: each "
          "round task opens the job's inputs and recomputes its block up to "
          "its group, which on small models costs more than a second worker "
          "gains (docs/PERFORMANCE.md). Jobs with independent propagation, "
          "mixed precision or mixture-of-experts blocks always run one task "
          "per block.");
ABSL_FLAG(bool, round_layer_reduces, true,
          "With --round_tasks: a GPTQ or RTN job's layer groups of several "
          "layers (q, k, v; gate, up) are reduced one task per layer, side by "
          "side, instead of one reduce per group (AWQ's groups always are: "
          "their layers share one input scale). The same bytes either way.");
ABSL_FLAG(bool, round_heldout_later, true,
          "With --round_tasks: a GPTQ or RTN job's reduces wait for their "
          "round's calibration shards only, and a block's last reduce audits "
          "every layer on the held-out shards, so the held-out shards run "
          "beside the reduces instead of before them. The same bytes and "
          "layers.json either way (AWQ's reduces always wait: their audit "
          "needs the group's input scale).");
ABSL_FLAG(int, gate_parts, 0,
          "Run the finalize's held-out gate evaluation as this many gate_part "
          "tasks, which several workers share: a finalize_pack task stages the "
          "packed checkpoint, each part scores a slice of the evaluation's "
          "batches, and the finalize completes on them (docs/DATA_PARALLEL.md, "
          "step 8). The same files either way. 0 (the default): one finalize "
          "task. At most 1024.");
ABSL_FLAG(int, max_concurrent_uploads, 4,
          "Calibration uploads received at once (each is held in memory, up "
          "to --max_upload_mb); more are refused with RESOURCE_EXHAUSTED.");
ABSL_FLAG(int, max_watch_streams, 256,
          "WatchJob streams open at once (each holds a thread); more are "
          "refused with RESOURCE_EXHAUSTED.");
ABSL_FLAG(int, max_workers, 4096,
          "Workers registered at once; one idle and unheard of for 10 "
          "minutes is forgotten. More are refused with RESOURCE_EXHAUSTED.");
ABSL_FLAG(int, local_workers, 0,
          "Start this many quant-worker processes on this machine and keep "
          "them running.");
ABSL_FLAG(std::string, worker_binary, "",
          "The quant-worker program for --local_workers (default: beside "
          "quantd, or ../worker/quant-worker in a build tree).");
ABSL_FLAG(std::vector<std::string>, worker_args, {},
          "Extra flags for local workers, comma-separated "
          "(e.g. --worker_args=--slots=2).");
ABSL_FLAG(std::string, client_token_file, "",
          "File holding the bearer token clients must send.");
ABSL_FLAG(std::string, worker_token_file, "",
          "File holding the bearer token workers must send (not the client "
          "token).");
ABSL_FLAG(std::string, tls_cert, "", "PEM certificate chain: serve TLS.");
ABSL_FLAG(std::string, tls_key, "", "PEM private key for --tls_cert.");
ABSL_FLAG(std::string, signing_key, "",
          "PEM Ed25519 private key (`openssl genpkey -algorithm ed25519`): "
          "sign every finished job's manifest.json (manifest.json.sig beside "
          "it; `quantctl verify --public_key` checks it).");
ABSL_FLAG(double, lease_seconds, 30,
          "How long a task lease lasts without a heartbeat.");
ABSL_FLAG(std::string, metrics_listen, "",
          "HOST:PORT to serve Prometheus /metrics on (IPv4 or localhost; "
          "port 0 picks one, printed on stdout). Empty: not served.");
ABSL_FLAG(absl::Duration, metrics_retention, absl::Minutes(30),
          "How long a finished job's per-job series (progress, per-layer "
          "errors, gates) stay on /metrics, e.g. 30m, 90s.");

namespace {

int Fail(const std::string& message, int code) {
  std::fprintf(stderr, "quantd: %s\n", message.c_str());
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "quantd: the quantization coordinator.\n"
      "Example (everything on one machine):\n"
      "  quantd --data-dir=/tmp/q --artifact-root=file:///tmp/q/artifacts "
      "--allowed-roots=/models,/data --local-workers=2");
  quant::common::ParseCommandLineAcceptingDashes(argc, argv);

  // Block the shutdown signals in every thread (gRPC's included, which
  // inherit the mask); the main thread waits for them below.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  quant::server::QuantdOptions options;
  options.listen = absl::GetFlag(FLAGS_listen);
  options.data_dir = absl::GetFlag(FLAGS_data_dir);
  options.artifact_root = absl::GetFlag(FLAGS_artifact_root);
  options.allowed_roots = absl::GetFlag(FLAGS_allowed_roots);
  const int64_t max_upload_mb = absl::GetFlag(FLAGS_max_upload_mb);
  if (max_upload_mb <= 0 || max_upload_mb > (int64_t{1} << 20)) {
    return Fail("--max_upload_mb must be in 1..1048576", 2);
  }
  options.max_upload_bytes = max_upload_mb << 20;
  options.round_tasks = absl::GetFlag(FLAGS_round_tasks);
  options.round_layer_reduces = absl::GetFlag(FLAGS_round_layer_reduces);
  options.round_heldout_later = absl::GetFlag(FLAGS_round_heldout_later);
  options.gate_parts = absl::GetFlag(FLAGS_gate_parts);
  if (options.gate_parts < 0 ||
      options.gate_parts > quant::server::kMaxGateParts) {
    return Fail(absl::StrCat("--gate_parts must be in 0..",
                             quant::server::kMaxGateParts, ", got ",
                             options.gate_parts),
                2);
  }
  for (const auto& [flag, value, target] :
       {std::make_tuple("--max_concurrent_uploads",
                        absl::GetFlag(FLAGS_max_concurrent_uploads),
                        &options.max_concurrent_uploads),
        std::make_tuple("--max_watch_streams",
                        absl::GetFlag(FLAGS_max_watch_streams),
                        &options.max_watch_streams),
        std::make_tuple("--max_workers", absl::GetFlag(FLAGS_max_workers),
                        &options.workers.max_workers)}) {
    if (value < 1 || value > 1'000'000) {
      return Fail(absl::StrCat(flag, " must be in 1..1000000, got ", value), 2);
    }
    *target = value;
  }
  const double lease_seconds = absl::GetFlag(FLAGS_lease_seconds);
  if (!(lease_seconds >= 1 && lease_seconds <= 3600)) {
    return Fail("--lease_seconds must be in 1..3600", 2);
  }
  options.workers.lease_ms = static_cast<int64_t>(lease_seconds * 1000);
  // Three heartbeats per lease: one lost beat does not cost the lease.
  options.workers.heartbeat_ms = options.workers.lease_ms / 3;
  options.upkeep_interval = std::chrono::milliseconds(
      std::min<int64_t>(1000, options.workers.lease_ms / 4));
  options.local_workers = absl::GetFlag(FLAGS_local_workers);
  options.worker_binary = absl::GetFlag(FLAGS_worker_binary);
  options.worker_args = absl::GetFlag(FLAGS_worker_args);
  options.tls_cert_file = absl::GetFlag(FLAGS_tls_cert);
  options.tls_key_file = absl::GetFlag(FLAGS_tls_key);
  options.signing_key_file = absl::GetFlag(FLAGS_signing_key);
  options.metrics_listen = absl::GetFlag(FLAGS_metrics_listen);
  options.metrics_retention = absl::GetFlag(FLAGS_metrics_retention);
  if (options.metrics_retention < absl::ZeroDuration()) {
    return Fail("--metrics_retention must not be negative", 2);
  }
  for (const auto& [flag, path, token] :
       {std::make_tuple("--client_token_file",
                        absl::GetFlag(FLAGS_client_token_file),
                        &options.tokens.client),
        std::make_tuple("--worker_token_file",
                        absl::GetFlag(FLAGS_worker_token_file),
                        &options.tokens.worker)}) {
    if (path.empty()) continue;
    auto read = quant::common::ReadTokenFile(path, flag);
    if (!read.ok()) return Fail(std::string(read.status().message()), 2);
    *token = *read;
  }

  auto server = quant::server::QuantdServer::Start(options);
  if (!server.ok()) return Fail(std::string(server.status().message()), 1);
  std::printf("quantd: listening on %s\n", (*server)->address().c_str());
  if ((*server)->metrics_port() > 0) {
    std::printf("quantd: metrics on port %d\n", (*server)->metrics_port());
  }
  if (options.local_workers > 0) {
    std::printf("quantd: started %d local worker(s)\n", options.local_workers);
  }
  std::fflush(stdout);

  int signal_number = 0;
  sigwait(&signals, &signal_number);
  std::printf("quantd: %s received, shutting down\n",
              signal_number == SIGTERM ? "SIGTERM" : "SIGINT");
  std::fflush(stdout);
  (*server)->Shutdown();
  (*server)->Wait();
  server->reset();
  std::printf("quantd: stopped\n");
  return 0;
}

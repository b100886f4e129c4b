// quantd: the coordinator's binary. Serves quant.v1.QuantService (uploads,
// job submission, lookup, listing, cancellation), gRPC health and
// reflection on a loopback address until SIGTERM or SIGINT. Jobs are
// validated and recorded; no scheduler or worker runs them yet.
//
//   quantd --data_dir=/var/lib/quantd
//          --artifact_root=file:///var/lib/quantd/artifacts
//          --allowed_roots=/models,/data
#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "server/quantd_server.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:50051",
          "HOST:PORT to serve on; loopback only (no client tokens yet). "
          "Port 0 picks a free one.");
ABSL_FLAG(std::string, data_dir, "",
          "Directory for quantd's state (the SQLite file quantd.db).");
ABSL_FLAG(std::string, artifact_root, "",
          "file:///DIR where calibration sets (and later artifacts) live.");
ABSL_FLAG(std::vector<std::string>, allowed_roots, {},
          "Comma-separated directories that checkpoint and calibration URIs "
          "must lie under.");
ABSL_FLAG(int64_t, max_upload_mb, 64,
          "Bound on a calibration set, uploaded or named by URI, in MiB.");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "quantd: the quantization coordinator (client API only so far).\n"
      "Example: quantd --data_dir=/tmp/q --artifact_root=file:///tmp/q/art "
      "--allowed_roots=/models");
  absl::ParseCommandLine(argc, argv);

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
    std::fprintf(stderr, "quantd: --max_upload_mb must be in 1..1048576\n");
    return 2;
  }
  options.max_upload_bytes = max_upload_mb << 20;

  auto server = quant::server::QuantdServer::Start(options);
  if (!server.ok()) {
    std::fprintf(stderr, "quantd: %s\n",
                 std::string(server.status().message()).c_str());
    return 1;
  }
  std::printf("quantd: listening on %s\n", (*server)->address().c_str());
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

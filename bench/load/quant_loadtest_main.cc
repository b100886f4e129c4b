// quant_loadtest: a bounded load test of quantd on loopback. Starts its own
// quantd (with local workers) in a temporary folder, runs client threads
// that create small RTN jobs, replay request_ids, poll, list, watch and
// read reports for --duration seconds, then prints requests per second and
// p50/p99 latency per RPC, jobs created and completed, errors and lost jobs.
// Exit status: 0 when errors and lost jobs are both 0, 1 otherwise, 2 when
// the test could not start.
//
//   quant_loadtest --duration=60 --clients=8 --workers=2 [--json]
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "bench/load/load_report.h"
#include "bench/load/load_run.h"
#include "common/flag_names.h"

ABSL_FLAG(int, duration, 60, "Seconds the clients run.");
ABSL_FLAG(int, clients, 8, "Client threads, each with its own connection.");
ABSL_FLAG(int, workers, 2, "Local workers of the quantd it starts.");
ABSL_FLAG(std::string, quantd, "",
          "The quantd program (default: server/quantd of the build tree this "
          "program is in).");
ABSL_FLAG(std::string, shared, "",
          "The shared folder with models/stories260K and data/ (default: "
          "$QUANT_SHARED_DIR, else the build's QUANT_SHARED_DIR).");
ABSL_FLAG(bool, json, false, "Print the result as one line of JSON.");
ABSL_FLAG(int, drain, 30,
          "Seconds to wait, after the clients stop, for queued jobs to "
          "finish.");
ABSL_FLAG(int, max_pending, 2,
          "A client creates a new job only while fewer of its jobs are "
          "unfinished.");
ABSL_FLAG(uint64_t, seed, 1, "Seed of the clients' call mix.");
ABSL_FLAG(bool, keep_temp, false,
          "Keep quantd's temporary folder (it is always kept on failure).");

namespace {

std::string Dirname(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

// bench/load/quant_loadtest -> server/quantd in the same build tree.
std::string DefaultQuantd() {
  char buffer[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buffer, sizeof(buffer) - 1);
  if (n <= 0) return "quantd";
  buffer[n] = '\0';
  const std::string here = Dirname(buffer);
  for (const char* relative : {"/../../server/quantd", "/../server/quantd"}) {
    const std::string candidate = here + relative;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return here + "/../../server/quantd";
}

std::string DefaultShared() {
  const char* env = getenv("QUANT_SHARED_DIR");
  if (env != nullptr && *env != '\0') return env;
  return QUANT_LOAD_DEFAULT_SHARED_DIR;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Load test of quantd on loopback: quant_loadtest --duration=60 "
      "--clients=8 --workers=2 [--json]");
  quant::common::ParseCommandLineAcceptingDashes(argc, argv);

  quant::load::LoadOptions options;
  options.duration = absl::Seconds(absl::GetFlag(FLAGS_duration));
  options.clients = absl::GetFlag(FLAGS_clients);
  options.workers = absl::GetFlag(FLAGS_workers);
  options.quantd_path = absl::GetFlag(FLAGS_quantd).empty()
                            ? DefaultQuantd()
                            : absl::GetFlag(FLAGS_quantd);
  options.shared_dir = absl::GetFlag(FLAGS_shared).empty()
                           ? DefaultShared()
                           : absl::GetFlag(FLAGS_shared);
  options.drain = absl::Seconds(absl::GetFlag(FLAGS_drain));
  options.max_pending_per_client = absl::GetFlag(FLAGS_max_pending);
  options.seed = absl::GetFlag(FLAGS_seed);
  options.keep_temp = absl::GetFlag(FLAGS_keep_temp);
  if (absl::GetFlag(FLAGS_duration) < 1) {
    std::fprintf(stderr, "quant_loadtest: --duration: must be at least 1\n");
    return 2;
  }

  absl::StatusOr<quant::load::LoadResult> result =
      quant::load::RunLoadTest(options);
  if (!result.ok()) {
    std::fprintf(stderr, "quant_loadtest: %s\n",
                 std::string(result.status().message()).c_str());
    return 2;
  }
  const std::string text = absl::GetFlag(FLAGS_json)
                               ? quant::load::FormatJson(*result) + "\n"
                               : quant::load::FormatTable(*result);
  std::fputs(text.c_str(), stdout);
  return result->ok() ? 0 : 1;
}

// quant-worker: runs quantd's block and finalize tasks. Registers with the
// coordinator, leases tasks (long poll), runs them through core/ with
// heartbeats, and exits cleanly on SIGTERM or SIGINT, releasing the task it
// was running so another worker takes it over at once.
//
//   quant-worker --server=127.0.0.1:50051 --slots=1 --token_file=/run/wtoken
//
// The worker token comes from --token_file or QUANT_WORKER_TOKEN. The
// worker reads and writes the job's files at the file:// paths the
// coordinator gives it, so it must see the same artifact directory.
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/flag_names.h"
#include "common/token_file.h"
#include "core/base/allocator_tuning.h"
#include "core/base/thread_pool.h"
#include "core/estimate/rate_probe.h"
#include "core/kernels/dispatch.h"
#include "core/pipeline/finalize_task.h"
#include "core/pipeline/job_tasks.h"
#include "metrics/metrics_endpoint.h"
#include "metrics/worker_metrics.h"
#include "worker/worker.h"

ABSL_FLAG(std::string, server, "127.0.0.1:50051", "quantd's HOST:PORT.");
ABSL_FLAG(std::string, name, "",
          "This worker's name in listings (default: HOST-PID).");
ABSL_FLAG(int, slots, 1, "Tasks run at once.");
ABSL_FLAG(std::string, token_file, "",
          "File holding the worker token (else QUANT_WORKER_TOKEN).");
ABSL_FLAG(std::string, tls_ca, "",
          "PEM root certificate: connect with TLS, trusting it.");
ABSL_FLAG(int64_t, lease_wait_ms, 10000,
          "How long one LeaseTask call waits for a task (long poll).");
ABSL_FLAG(int, threads, 0,
          "Threads each task runs on: that many chunks of sequences through "
          "the block's forward pass at once, the Hessian's tiles and a layer "
          "group's layers side by side. 0: the cores this process may use, "
          "divided by --slots. The results are the same bytes for any "
          "value. With several workers on one machine, give each cores / "
          "workers (quantd --local_workers does).");
ABSL_FLAG(int64_t, max_activation_mb, quant::kDefaultMaxActivationBytes >> 20,
          "MiB of hidden states (the calibration and held-out activations "
          "entering a block) a task keeps in memory, and as much again for "
          "what a block keeps between its layer groups (and, for round "
          "tasks, what each shard keeps for its next round on this "
          "worker). Larger ones are "
          "written to the task's area in the artifact store and read back "
          "a chunk of sequences at a time; the results are identical. 0: "
          "always in files.");
ABSL_FLAG(bool, log_heartbeats, false,
          "Log every heartbeat quantd acknowledged (task, layers done) on "
          "stderr.");
ABSL_FLAG(std::string, isa, "",
          "Kernel level: auto (the highest this CPU runs), v2 (x86-64-v2, "
          "SSE4.2), v3 (AVX2, FMA) or v4 (AVX-512). Default: QUANT_ISA, "
          "else auto. The worker takes tasks of jobs at this level or below "
          "(or of jobs not started yet, which then run at this level) and "
          "runs each at its job's level.");
ABSL_FLAG(double, max_task_seconds,
          quant::worker::WorkerOptions::kDefaultMaxTaskMs / 1000.0,
          "A task running longer is cancelled and failed as retryable (it "
          "is retried, on this or another worker, until the job's attempts "
          "run out). 0: no bound.");
ABSL_FLAG(double, cancel_grace_seconds,
          quant::worker::WorkerOptions::kDefaultCancelGraceMs / 1000.0,
          "How long a cancelled task (job cancelled, lease lost, SIGTERM, "
          "--max_task_seconds) may take to return. Cancellation is seen "
          "between layer groups, so this must exceed the longest group's "
          "time. A task that takes longer is stuck where it cannot see it "
          "(a read that never returns): the worker stops renewing its "
          "lease, so the task goes to another worker, and exits with code "
          "75 for its supervisor to restart it.");
ABSL_FLAG(bool, measure_rates, true,
          "Measure this worker's rates (forward, Hessian and GPTQ flops per "
          "second on its kernels and threads; well under a second) at start "
          "and send them when registering: quantd predicts jobs' times from "
          "them. false: quantd predicts from other workers' rates and the "
          "jobs' finished tasks.");
ABSL_FLAG(std::string, metrics_listen, "",
          "HOST:PORT to serve Prometheus /metrics on (IPv4 or localhost; "
          "port 0 picks one, printed on stderr). Empty: not served.");

namespace {

// Started by quantd --local_workers: stop when it goes away, even when it
// was killed (SIGKILL leaves no chance to stop us).
void ExitWithParentIfAsked() {
  const char* parent = std::getenv("QUANT_PARENT_PID");
  int64_t pid = 0;
  if (parent == nullptr || !absl::SimpleAtoi(parent, &pid)) return;
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (getppid() != pid) std::exit(0);  // It died before prctl.
}

// Blocks SIGTERM and SIGINT in every thread (the watcher in
// RunUntilSignalled takes them) and ignores SIGXFSZ: a file-size limit
// (ulimit -f) then fails the write with EFBIG, which fails the task with its
// cause, instead of killing the worker mid-task.
sigset_t BlockStopSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGXFSZ, SIG_IGN);
  return signals;
}

absl::StatusOr<std::string> TokenFromFlagsOrEnvironment() {
  const std::string token_file = absl::GetFlag(FLAGS_token_file);
  if (!token_file.empty()) {
    return quant::common::ReadTokenFile(token_file, "--token_file");
  }
  const char* env = std::getenv("QUANT_WORKER_TOKEN");
  if (env == nullptr) return std::string();
  if (absl::Status ok = quant::common::CheckToken(env, "QUANT_WORKER_TOKEN");
      !ok.ok()) {
    return ok;
  }
  return std::string(env);
}

// The worker's options from its flags (after InitProcessIsa); an error
// names the bad flag. Worker::Create checks the rest.
absl::StatusOr<quant::worker::WorkerOptions> OptionsFromFlags(
    const std::string& allocator) {
  quant::worker::WorkerOptions options;
  for (quant::kernels::IsaLevel level : quant::kernels::SupportedLevels()) {
    if (level <= quant::kernels::ProcessIsa()) {
      options.isa_levels.emplace_back(quant::kernels::IsaName(level));
    }
  }
  options.server = absl::GetFlag(FLAGS_server);
  options.slots = absl::GetFlag(FLAGS_slots);
  options.tls_ca = absl::GetFlag(FLAGS_tls_ca);
  options.lease_wait_ms = absl::GetFlag(FLAGS_lease_wait_ms);
  options.log_heartbeats = absl::GetFlag(FLAGS_log_heartbeats);
  options.max_task_ms =
      static_cast<int64_t>(absl::GetFlag(FLAGS_max_task_seconds) * 1000.0);
  options.cancel_grace_ms =
      static_cast<int64_t>(absl::GetFlag(FLAGS_cancel_grace_seconds) * 1000.0);
  const int64_t activation_mb = absl::GetFlag(FLAGS_max_activation_mb);
  if (activation_mb < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max_activation_mb must be >= 0, got ", activation_mb));
  }
  options.max_activation_bytes = activation_mb << 20;
  options.version = quant::ToolVersion();
  options.allocator = allocator;
  options.name = absl::GetFlag(FLAGS_name);
  if (options.name.empty()) {
    char host[256] = {0};
    gethostname(host, sizeof(host) - 1);
    options.name = absl::StrCat(host, "-", getpid());
  }
  absl::StatusOr<std::string> token = TokenFromFlagsOrEnvironment();
  if (!token.ok()) return token.status();
  options.token = *std::move(token);
  if (options.lease_wait_ms < 0 || options.lease_wait_ms > 60'000) {
    return absl::InvalidArgumentError("--lease_wait_ms must be in 0..60000");
  }
  const int threads = absl::GetFlag(FLAGS_threads);
  if (threads < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--threads must be >= 0, got ", threads));
  }
  options.threads = threads > 0
                        ? threads
                        : std::max(1, quant::ThreadPool::AvailableCores() /
                                          std::max(1, options.slots));
  return options;
}

// Runs the worker while a thread waits for SIGTERM or SIGINT (blocked by
// BlockStopSignals) and asks it to stop.
absl::Status RunUntilSignalled(quant::worker::Worker* worker,
                               const sigset_t& signals,
                               const std::string& name) {
  std::atomic<bool> done{false};
  std::thread watcher([&] {
    const timespec tick{0, 200'000'000};
    while (!done.load()) {
      const int got = sigtimedwait(&signals, nullptr, &tick);
      if (got == SIGTERM || got == SIGINT) {
        std::fprintf(stderr, "quant-worker[%s]: %s: stopping\n", name.c_str(),
                     got == SIGTERM ? "SIGTERM" : "SIGINT");
        worker->RequestStop();
        return;
      }
    }
  });
  const absl::Status run = worker->Run();
  done.store(true);
  watcher.join();
  return run;
}

int UsageFailure(const absl::Status& status) {
  std::fprintf(stderr, "quant-worker: %s\n",
               std::string(status.message()).c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string allocator = quant::TuneAllocatorForLargeMatrices();
  absl::SetProgramUsageMessage(
      "quant-worker: runs quantd's quantization tasks.\n"
      "Example: quant-worker --server=127.0.0.1:50051 --slots=1");
  quant::common::ParseCommandLineAcceptingDashes(argc, argv);
  const sigset_t signals = BlockStopSignals();
  ExitWithParentIfAsked();

  if (absl::Status isa =
          quant::kernels::InitProcessIsa(absl::GetFlag(FLAGS_isa));
      !isa.ok()) {
    return UsageFailure(isa);
  }
  absl::StatusOr<quant::worker::WorkerOptions> options =
      OptionsFromFlags(allocator);
  if (!options.ok()) return UsageFailure(options.status());
  quant::metrics::WorkerMetrics metrics;
  metrics.SetKernelLevels(quant::kernels::IsaName(quant::kernels::ProcessIsa()),
                          absl::StrJoin(options->isa_levels, ","));
  options->metrics = &metrics;
  if (absl::GetFlag(FLAGS_measure_rates)) {
    quant::ThreadPool pool(options->threads);
    absl::StatusOr<quant::WorkRates> rates = quant::MeasureWorkRates(&pool);
    if (!rates.ok()) {
      // Not fatal: the worker still runs tasks; quantd predicts without.
      std::fprintf(stderr, "quant-worker: measuring rates: %s\n",
                   std::string(rates.status().message()).c_str());
    } else {
      options->rates = *rates;
      std::fprintf(stderr,
                   "quant-worker: rates on %d thread(s): forward %.1f, "
                   "Hessian %.1f, GPTQ %.1f Gflop/s\n",
                   pool.threads(), rates->forward_flops_per_second / 1e9,
                   rates->hessian_flops_per_second / 1e9,
                   rates->gptq_flops_per_second / 1e9);
    }
  }
  std::unique_ptr<quant::metrics::MetricsEndpoint> endpoint;
  if (const std::string listen = absl::GetFlag(FLAGS_metrics_listen);
      !listen.empty()) {
    auto started =
        quant::metrics::MetricsEndpoint::Start(listen, metrics.registry());
    if (!started.ok()) return UsageFailure(started.status());
    endpoint = *std::move(started);
    std::fprintf(stderr, "quant-worker[%s]: metrics on port %d\n",
                 options->name.c_str(), endpoint->port());
  }
  auto worker = quant::worker::Worker::Create(*options);
  if (!worker.ok()) return UsageFailure(worker.status());

  const absl::Status run =
      RunUntilSignalled(worker->get(), signals, options->name);
  if (!run.ok()) {
    std::fprintf(stderr, "quant-worker: %s\n",
                 std::string(run.message()).c_str());
    return 1;
  }
  std::fprintf(
      stderr, "quant-worker[%s]: stopped (%d task(s) done, %d failed)\n",
      options->name.c_str(), (*worker)->completed(), (*worker)->failed());
  return 0;
}

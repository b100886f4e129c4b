// quantd as a child process for the bench programs (load test, bad-input
// table): started with a stdout pipe (its first line gives the address),
// stderr to a log file, stopped with SIGTERM. Killed if still running when
// destroyed.
#ifndef QUANT_BENCH_LOAD_QUANTD_PROCESS_H_
#define QUANT_BENCH_LOAD_QUANTD_PROCESS_H_

#include <sys/types.h>

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace quant::load {

class QuantdProcess {
 public:
  // Starts `args` (args[0] is the program, which must be given
  // --listen=...:0 or a port) and waits up to `startup` for its
  // "quantd: listening on HOST:PORT" line.
  static absl::StatusOr<std::unique_ptr<QuantdProcess>> Start(
      std::vector<std::string> args, const std::string& log_path,
      absl::Duration startup);
  ~QuantdProcess();

  QuantdProcess(const QuantdProcess&) = delete;
  QuantdProcess& operator=(const QuantdProcess&) = delete;

  const std::string& address() const { return address_; }

  // SIGTERM, then waits up to `timeout`: OK only for exit status 0.
  absl::Status Stop(absl::Duration timeout);

 private:
  QuantdProcess() = default;
  // The wait status, or -1 when still running at `deadline`.
  int WaitUntil(absl::Time deadline);

  pid_t pid_ = -1;
  int stdout_fd_ = -1;
  bool reaped_ = false;
  int status_ = 0;
  std::string address_;
  // Reads (and drops) stdout after the first line so quantd never blocks
  // on a full pipe.
  std::thread drain_;
  std::atomic<bool> stop_drain_{false};
};

// How the bench programs run quantd: on loopback at a free port, with its
// data, artifacts and log in a temporary folder.
struct LoopbackQuantdOptions {
  std::string quantd_path;
  std::string temp_dir;              // Gets data/, artifacts/ and quantd.log.
  std::string allowed_roots;         // --allowed-roots, comma-separated.
  std::optional<int> max_upload_mb;  // Unset: quantd's default.
  int local_workers = 1;
};

// Starts quantd as `options` say and waits up to a minute for it to listen.
absl::StatusOr<std::unique_ptr<QuantdProcess>> StartLoopbackQuantd(
    const LoopbackQuantdOptions& options);

}  // namespace quant::load

#endif  // QUANT_BENCH_LOAD_QUANTD_PROCESS_H_

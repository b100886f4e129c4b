// `quantctl watch JOB`: follows a job over WatchJob until it is terminal,
// printing its state changes, progress (a redrawn bar on a terminal, plain
// lines otherwise) and a row per layer as each finishes; exits like
// `submit --wait`. Also the watching and the exit-code rule that `submit
// --wait` shares.
#ifndef QUANT_CLIENT_WATCH_COMMAND_H_
#define QUANT_CLIENT_WATCH_COMMAND_H_

#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/command.h"
#include "client/service_client.h"
#include "quant/v1/service.pb.h"

namespace quant {

Command WatchCommand();

// Where and how the events are shown. `out` null: shown nowhere.
struct WatchDisplay {
  std::ostream* out = nullptr;
  bool terminal = false;        // Redraw one progress bar instead of lines.
  std::ostream* err = nullptr;  // Reconnect notices.
  // Show the final state at the end; off where the caller prints its own
  // final line to `out` (quantctl watch's FinalLine).
  bool show_final_state = true;
};

// Streams the job's events to `display` until the job is terminal and
// returns it. A stream lost to an unreachable or restarting quantd is
// resumed with backoff (250 ms doubling to 5 s) for up to two minutes of
// unreachability; layers already shown are not shown again. Otherwise the
// job as GetJob sees it when the stream ended.
absl::StatusOr<v1::Job> WatchUntilTerminal(ServiceClient& client,
                                           const std::string& id,
                                           const WatchDisplay& display);

// The end of `submit --wait` and `retry --wait`: watches job `id` until it
// is terminal (progress on invocation.err unless `json_output`), prints the
// job on invocation.out (as JSON, or its FinalLine) and returns JobOutcome.
absl::Status WatchAndPrintOutcome(ServiceClient& client, const std::string& id,
                                  bool json_output,
                                  const CommandInvocation& invocation);

// One line: "ID: SUCCEEDED, verdict PASS, artifact URI".
std::string FinalLine(const v1::Job& job);

// The exit rule of watch and submit --wait: SUCCEEDED with a verdict other
// than FAIL is OK; FAIL is GateFailedError (exit 3); FAILED, CANCELLED and
// an unfinished job are errors (exit 1).
absl::Status JobOutcome(const v1::Job& job);

// Whether `stream` is std::cout or std::cerr attached to a terminal.
bool IsTerminalStream(const std::ostream* stream);

}  // namespace quant

#endif  // QUANT_CLIENT_WATCH_COMMAND_H_

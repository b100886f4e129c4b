// Runs the bad-input table against a real quantd and judges every row: the
// status and where it came from, whether the message names the bad thing,
// that nothing was created, and that quantd still answers afterwards.
#ifndef QUANT_BENCH_RELIABILITY_BAD_INPUT_RUNNER_H_
#define QUANT_BENCH_RELIABILITY_BAD_INPUT_RUNNER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/reliability/bad_input_case.h"
#include "bench/reliability/bad_input_env.h"

namespace quant::reliability {

struct BadInputRow {
  std::string name;
  std::string input;
  Expectation expected;
  std::string refused_at;  // "CreateJob", "job: task 0 (block 0)", ...
  std::string stage;       // StageName of where it ended.
  std::string status;
  std::string message;          // The line that matters, trimmed.
  std::string full_message;     // Everything that was said.
  std::string nothing_created;  // "yes", or what was left.
  bool status_ok = false;
  bool message_ok = false;
  bool nothing_created_ok = false;
  bool still_serving = false;
  std::vector<std::string> problems;  // Why the row does not pass.
  std::vector<std::string> notes;     // Worth knowing, not a failure.

  bool passed() const {
    return status_ok && message_ok && nothing_created_ok && still_serving &&
           problems.empty();
  }
};

struct BadInputReport {
  std::vector<BadInputRow> rows;
  bool quantd_clean_exit = false;  // SIGTERM at the end, exit status 0.
  std::string quantd_exit;         // Why not, when not.
  std::string temp_dir;            // Kept for inspection when not ok().

  bool ok() const;
};

// Starts quantd, runs `cases`, stops quantd. An error only when the run
// could not start (no quantd, no shared data).
absl::StatusOr<BadInputReport> RunBadInputCases(
    const EnvOptions& options, const std::vector<BadInputCase>& cases);

}  // namespace quant::reliability

#endif  // QUANT_BENCH_RELIABILITY_BAD_INPUT_RUNNER_H_

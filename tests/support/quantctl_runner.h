// Runs the built quantctl program as a subprocess, for tests of the
// command-line interface: its stdout, stderr and exit code.
#ifndef QUANT_TESTS_SUPPORT_QUANTCTL_RUNNER_H_
#define QUANT_TESTS_SUPPORT_QUANTCTL_RUNNER_H_

#include <string>

namespace quant::testing {

struct RunResult {
  int exit_code = -1;  // -1 when the program did not exit normally.
  std::string out;
  std::string err;
};

// Single-quotes `text` for /bin/sh.
std::string Quote(const std::string& text);

// BinaryDir() + "/client/quantctl".
std::string QuantctlPath();

// Runs quantctl with `args` (already shell-quoted where needed).
RunResult RunQuantctl(const std::string& args);

}  // namespace quant::testing

#endif  // QUANT_TESTS_SUPPORT_QUANTCTL_RUNNER_H_

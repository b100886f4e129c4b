// Runs the built quantctl program as a subprocess.
#include "tests/support/quantctl_runner.h"

#include <sys/wait.h>

#include <cstdio>

#include "core/base/file_util.h"
#include "gtest/gtest.h"
#include "tests/support/test_env.h"

namespace quant::testing {

std::string Quote(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) {
    if (c == '\'') {
      quoted += "'\\''";
    } else {
      quoted += c;
    }
  }
  return quoted + "'";
}

std::string QuantctlPath() { return BinaryDir() + "/client/quantctl"; }

RunResult RunQuantctl(const std::string& args) {
  static const std::string err_path = MakeTempDir() + "/stderr.txt";
  RunResult result;
  const std::string command =
      Quote(QuantctlPath()) + " " + args + " 2>" + Quote(err_path);
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) {
    ADD_FAILURE() << "cannot run " << command;
    return result;
  }
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) {
    result.out.append(buffer, n);
  }
  const int status = ::pclose(pipe);
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  result.err = ReadFileToString(err_path).value_or("");
  return result;
}

}  // namespace quant::testing

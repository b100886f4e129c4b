// RunJsonProgram; see run_json_program.h.
#include "tests/support/run_json_program.h"

#include <cstdio>

namespace quant::testing {

JsonProgramResult RunJsonProgram(const std::string& command) {
  JsonProgramResult result;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe != nullptr) {
    char buffer[4096];
    size_t n;
    while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) {
      result.out.append(buffer, n);
    }
    result.status = ::pclose(pipe);
  }
  result.json = nlohmann::json::parse(result.out, nullptr, false);
  return result;
}

}  // namespace quant::testing

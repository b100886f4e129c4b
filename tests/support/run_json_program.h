// Runs a program that prints its report as JSON on stdout (the bench
// programs' --json mode, e.g. quant_loadtest and quant_bad_input_report)
// and parses that output, for the tests that check such reports.
#ifndef QUANT_TESTS_SUPPORT_RUN_JSON_PROGRAM_H_
#define QUANT_TESTS_SUPPORT_RUN_JSON_PROGRAM_H_

#include <string>

#include "nlohmann/json.hpp"

namespace quant::testing {

struct JsonProgramResult {
  int status = -1;      // The wait status (pclose); -1 when it did not run.
  std::string out;      // Its stdout, as printed.
  nlohmann::json json;  // `out` parsed; is_discarded() when not JSON.
};

// Runs `command` through /bin/sh, reading its stdout to the end.
JsonProgramResult RunJsonProgram(const std::string& command);

}  // namespace quant::testing

#endif  // QUANT_TESTS_SUPPORT_RUN_JSON_PROGRAM_H_

// The bad-input table as markdown (for docs/RELIABILITY.md) or as one JSON
// document (for tests and scripts).
#ifndef QUANT_BENCH_RELIABILITY_BAD_INPUT_REPORT_H_
#define QUANT_BENCH_RELIABILITY_BAD_INPUT_REPORT_H_

#include <string>

#include "bench/reliability/bad_input_runner.h"

namespace quant::reliability {

// | case | input | refused at | status | message | nothing created |
// still serving |, then a line per row that did not pass, saying why.
std::string FormatMarkdown(const BadInputReport& report);

std::string FormatJson(const BadInputReport& report);

}  // namespace quant::reliability

#endif  // QUANT_BENCH_RELIABILITY_BAD_INPUT_REPORT_H_

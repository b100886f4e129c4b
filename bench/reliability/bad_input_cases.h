// The bad-input table: every case issue 8 lists (checkpoints, calibration,
// recipes, calibration rank) and the outside probe's classes of issue 23
// (non-regular files, symlinks out of the roots, nesting, integer range,
// early recipe checks, oversized fields), each with the outcome it must
// have.
#ifndef QUANT_BENCH_RELIABILITY_BAD_INPUT_CASES_H_
#define QUANT_BENCH_RELIABILITY_BAD_INPUT_CASES_H_

#include <vector>

#include "bench/reliability/bad_input_case.h"

namespace quant::reliability {

// In the order they run and are printed.
std::vector<BadInputCase> AllBadInputCases();

// The groups AllBadInputCases joins, one source file each.
std::vector<BadInputCase> CheckpointCases();
std::vector<BadInputCase> ProbeCases();
std::vector<BadInputCase> CalibrationCases();
std::vector<BadInputCase> RecipeCases();

}  // namespace quant::reliability

#endif  // QUANT_BENCH_RELIABILITY_BAD_INPUT_CASES_H_

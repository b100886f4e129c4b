// `quantctl calib upload FILE`: streams a calibration set (JSONL or plain
// text) to quantd in 1 MiB chunks and prints its sha256, the name jobs use
// for it (`submit --calibration SHA256`). `quantctl calib inspect FILE`:
// what a job would make of it, on this machine.
#ifndef QUANT_CLIENT_CALIB_COMMAND_H_
#define QUANT_CLIENT_CALIB_COMMAND_H_

#include <string>

#include "absl/status/statusor.h"
#include "client/command.h"
#include "core/calib/calibration_inspection.h"
#include "core/recipe/recipe.h"

namespace quant {

Command CalibCommand();

// `calib inspect`'s figures for the calibration file at `path` as `recipe`
// would split it: documents, tokens and lengths with the tokenizer in
// `tokenizer_dir`, and with a `checkpoint` (non-empty) the split and T/K
// per layer input width. Also what `submit` prints before it uploads.
absl::StatusOr<CalibrationInspection> InspectCalibrationForJob(
    const std::string& path, const std::string& checkpoint,
    const std::string& tokenizer_dir, const Recipe& recipe);

}  // namespace quant

#endif  // QUANT_CLIENT_CALIB_COMMAND_H_

// A calibration set made of several sources mixed by weight (recipe
// calibration.sources): each source is split into calibration and held-out
// documents on its own (BuildCalibrationSplit with the recipe's options), so
// the held-out windows have the same mix as the calibration windows, and
// the windows wanted are shared out by weight.
//
// Shares: samples (and held-out samples) * weight / sum of weights, rounded
// by largest remainder (ties to the earlier source), every source at least
// one window of each. The windows are concatenated in source order. The
// mix's identity (CalibrationSplit::calibration_hash) is the sha256 of the
// lines "<source sha256> <weight %.17g>\n" in source order.
#ifndef QUANT_CORE_CALIB_MIXED_CALIBRATION_H_
#define QUANT_CORE_CALIB_MIXED_CALIBRATION_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/calib/calibration_file.h"
#include "core/calib/calibration_split.h"
#include "core/text/tokenizer.h"

namespace quant {

struct WeightedCalibrationFile {
  const CalibrationFile* file = nullptr;  // Not owned.
  double weight = 1.0;                    // > 0.
};

// `total` windows shared out by `weights` (see above). Errors: no weights,
// a weight that is not finite and positive, fewer windows than sources.
absl::StatusOr<std::vector<int>> ShareWindowsByWeight(
    int total, const std::vector<double>& weights);

// The mix's identity (see above) of sources given as (sha256, weight).
std::string CalibrationMixSha256(
    const std::vector<std::pair<std::string, double>>& sources);

// The mixed split; split.sources records each source's part. Errors:
// those of ShareWindowsByWeight and BuildCalibrationSplit, prefixed with
// "calibration.sources[i]: ".
absl::StatusOr<CalibrationSplit> BuildMixedCalibrationSplit(
    const std::vector<WeightedCalibrationFile>& sources,
    const Tokenizer& tokenizer, const CalibrationSplitOptions& options);

}  // namespace quant

#endif  // QUANT_CORE_CALIB_MIXED_CALIBRATION_H_

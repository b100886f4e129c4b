// Rebuilding a finished job's held-out windows from its manifest.json and
// its calibration file, so anyone can re-evaluate the release gates of a
// packed checkpoint on exactly the tokens the job used (`quantctl eval
// --heldout_of`).
#ifndef QUANT_CORE_PIPELINE_HELDOUT_WINDOWS_H_
#define QUANT_CORE_PIPELINE_HELDOUT_WINDOWS_H_

#include <string>

#include "absl/status/statusor.h"
#include "core/calib/calibration_file.h"
#include "core/calib/calibration_split.h"
#include "core/text/tokenizer.h"

namespace quant {

// `manifest_path` is a manifest.json or the directory holding one. Errors:
// an unreadable or malformed manifest (naming the field), a calibration
// file whose sha256 differs from the manifest's (FailedPrecondition, both
// hashes named), a split that no longer matches the manifest's document
// lists.
absl::StatusOr<CalibrationSplit> SplitFromManifest(
    const std::string& manifest_path, const CalibrationFile& file,
    const Tokenizer& tokenizer);

}  // namespace quant

#endif  // QUANT_CORE_PIPELINE_HELDOUT_WINDOWS_H_

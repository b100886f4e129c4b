// `quantctl submit`: creates a quantization job on quantd from a
// checkpoint URI, a recipe file and a calibration set (a local file, which
// is uploaded first, or the sha256 of one uploaded earlier). Prints the job
// id; with --wait follows the job like `watch` and exits 0 on PASS, 3 on
// FAIL, 1 when the job FAILED or was CANCELLED.
#ifndef QUANT_CLIENT_SUBMIT_COMMAND_H_
#define QUANT_CLIENT_SUBMIT_COMMAND_H_

#include <string>

#include "client/command.h"

namespace quant {

Command SubmitCommand();

// "file://" + the absolute path, symlinks resolved, for a plain path; URIs
// ("scheme://...") unchanged.
std::string CheckpointUri(const std::string& checkpoint);

// Whether `text` is 64 lower- or upper-case hex digits (a sha256).
bool LooksLikeSha256(const std::string& text);

}  // namespace quant

#endif  // QUANT_CLIENT_SUBMIT_COMMAND_H_

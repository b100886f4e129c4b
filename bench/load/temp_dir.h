// Real paths and fresh temporary folders for the bench programs that start
// quantd (quant_loadtest, quant_bad_input_report): quantd compares resolved
// paths with its allowed roots, so both are given resolved.
#ifndef QUANT_BENCH_LOAD_TEMP_DIR_H_
#define QUANT_BENCH_LOAD_TEMP_DIR_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace quant::load {

// `path` with links and dots resolved; NotFound naming it when absent.
absl::StatusOr<std::string> RealPath(const std::string& path);

// A new folder $TMPDIR/PREFIX-XXXXXX (/tmp when TMPDIR is unset or empty),
// as a real path.
absl::StatusOr<std::string> MakeTempDir(absl::string_view prefix);

}  // namespace quant::load

#endif  // QUANT_BENCH_LOAD_TEMP_DIR_H_

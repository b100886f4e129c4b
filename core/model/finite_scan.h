// Scanning stored tensor bytes for NaN and infinity without converting them,
// so a corrupt checkpoint is caught before it poisons calibration.
#ifndef QUANT_CORE_MODEL_FINITE_SCAN_H_
#define QUANT_CORE_MODEL_FINITE_SCAN_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "core/base/dtype.h"

namespace quant {

struct NonFiniteValue {
  int64_t index = 0;  // Flat (row-major) element index.
  bool is_nan = false;
};

// The first NaN or infinity among `count` elements of `dtype` at `bytes`
// (little-endian); empty when all are finite or the type is an integer type.
std::optional<NonFiniteValue> FindFirstNonFinite(
    DType dtype, absl::Span<const uint8_t> bytes, int64_t count);

// Row-major flat index -> "[i, j, ...]" for a tensor of `shape`.
std::string FormatIndex(int64_t flat_index, const std::vector<int64_t>& shape);

}  // namespace quant

#endif  // QUANT_CORE_MODEL_FINITE_SCAN_H_

// Checks shared by the packers: a QuantizedLayer is self-consistent (shapes,
// code and zero ranges, group indices, scales) before any of it is packed,
// so no format ever stores a value that would be misread.
#ifndef QUANT_CORE_PACK_PACK_VALIDATION_H_
#define QUANT_CORE_PACK_PACK_VALIDATION_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "core/base/dtype.h"
#include "core/quant/quantized_layer.h"

namespace quant {

// ceil(K / group_size), or 1 for per-row grids.
int64_t PackGroupCount(const GridSpec& grid, int64_t k);

// Shapes agree (codes and dequantized [N,K], scales and zeros [groups,N],
// g_idx [K]), bits packable, codes <= 2^b-1, zeros integers in 0..2^b-1
// (exactly 2^(b-1) for symmetric grids), g_idx in [0, groups), scales finite
// and positive. Errors name the layer and the first bad element.
absl::Status ValidateLayerForPacking(const QuantizedLayer& layer,
                                     absl::string_view layer_name);

// True when g_idx[i] == i / group_size for all i (0 for per-row grids): the
// layer needs no stored group index.
bool HasSequentialGroups(const QuantizedLayer& layer);

struct StoredScales {
  std::vector<float> values;         // As a reader sees them after `dtype`.
  float max_relative_change = 0.0f;  // max |stored - s| / s.
};

// Scales [groups, N] (or transposed to [N, groups]) rounded through `dtype`;
// OutOfRange names the layer when one overflows or flushes to zero.
absl::StatusOr<StoredScales> RoundScalesForStorage(const QuantizedLayer& layer,
                                                   absl::string_view layer_name,
                                                   DType dtype,
                                                   bool transpose_to_rows);

}  // namespace quant

#endif  // QUANT_CORE_PACK_PACK_VALIDATION_H_

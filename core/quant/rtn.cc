// Round-to-nearest on any grid.
#include "core/quant/rtn.h"

#include <algorithm>

#include "core/base/status_macros.h"
#include "core/quant/layer_checks.h"

namespace quant {

QuantizedLayer QuantizeRtnUnchecked(const ConstRowMatrixRef& weights,
                                    const GridSpec& grid, float clip_ratio) {
  const int64_t n = weights.rows();
  const int64_t k = weights.cols();
  const int64_t groups = NumGroups(grid, k);
  const int64_t gs = EffectiveGroupSize(grid, k);
  const CodeRange range = CodeRangeFor(grid);
  QuantizedLayer out;
  out.grid = grid;
  out.rows = n;
  out.cols = k;
  out.method = "rtn";
  out.dequantized.resize(n, k);
  out.codes.resize(n, k);
  out.scales.resize(groups, n);
  out.zeros.resize(groups, n);
  out.g_idx.resize(k);
  out.order.resize(k);
  for (int64_t c = 0; c < k; ++c) {
    out.g_idx[c] = static_cast<int32_t>(c / gs);
    out.order[c] = static_cast<int32_t>(c);
  }
  for (int64_t r = 0; r < n; ++r) {
    const float* row = weights.data() + r * weights.outerStride();
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t begin = g * gs;
      const int64_t count = std::min(gs, k - begin);
      const GroupParams p =
          ComputeGroupParams(grid, row + begin, count, 1, clip_ratio);
      out.scales(g, r) = p.scale;
      out.zeros(g, r) = p.zero;
      for (int64_t c = begin; c < begin + count; ++c) {
        const int code = QuantizeToCode(row[c], p, range);
        out.codes(r, c) = static_cast<uint8_t>(code);
        out.dequantized(r, c) = DequantizeCode(code, p);
      }
    }
  }
  return out;
}

absl::StatusOr<QuantizedLayer> QuantizeRtn(const ConstRowMatrixRef& weights,
                                           const GridSpec& grid,
                                           absl::string_view layer_name) {
  QUANT_RETURN_IF_ERROR(ValidateGridSpec(grid));
  QUANT_RETURN_IF_ERROR(CheckFiniteWeights(weights, layer_name));
  return QuantizeRtnUnchecked(weights, grid);
}

}  // namespace quant

// The result of quantizing one linear layer with any method: dequantized
// weights, integer codes, per-group scales and zeros, the group index of every
// input column, and what the method did.
#ifndef QUANT_CORE_QUANT_QUANTIZED_LAYER_H_
#define QUANT_CORE_QUANT_QUANTIZED_LAYER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "core/quant/grid.h"
#include "core/quant/matrix_types.h"

namespace quant {

struct QuantizedLayer {
  GridSpec grid;
  int64_t rows = 0;  // N (output features).
  int64_t cols = 0;  // K (input features).
  // [N, K]: scales(g_idx[k], n) * (codes(n, k) - zeros(g_idx[k], n)).
  RowMatrixF dequantized;
  // [N, K], codes in CodeRangeFor(grid), stored in the original column order.
  Eigen::Matrix<uint8_t, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> codes;
  // [groups, N] like GPTQ checkpoints' `scales`; zeros are integers in code
  // units (not GPTQ v1's stored zero-1).
  RowMatrixF scales;
  RowMatrixF zeros;
  // [K]: the group (row of scales/zeros) each input column uses. i/group_size
  // without act-order; the group of the column's position in the quantization
  // order with act-order (and i/group_size again with static groups).
  std::vector<int32_t> g_idx;
  // The order columns were quantized in (identity without act-order).
  std::vector<int32_t> order;
  std::string method;  // "rtn", "gptq", "gptq-reference", "awq".
};

}  // namespace quant

#endif  // QUANT_CORE_QUANT_QUANTIZED_LAYER_H_

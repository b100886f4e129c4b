// Random QuantizedLayers built directly (no quantizer): codes in the grid's
// range, scales exactly representable in the storage dtype, integer zeros,
// and g_idx with or without an act-order permutation; `dequantized` is
// computed from them the way the grids do, so a correct packer and reader
// reproduce it exactly.
#ifndef QUANT_TESTS_PACK_RANDOM_LAYER_H_
#define QUANT_TESTS_PACK_RANDOM_LAYER_H_

#include <cstdint>

#include "core/base/dtype.h"
#include "core/quant/quantized_layer.h"

namespace quant::testing {

struct RandomLayerSpec {
  GridKind kind = GridKind::kSym;
  int bits = 4;
  int64_t rows = 64;             // N
  int64_t cols = 128;            // K
  int64_t group_size = 32;       // 0: per row.
  bool act_order = false;        // g_idx follows a random column permutation.
  bool allow_zero_zero = false;  // Asym zeros may be 0 (else 1..2^b-1).
  DType scale_dtype = DType::kF16;  // Scales exactly representable in it.
  uint32_t seed = 1;
};

QuantizedLayer MakeRandomLayer(const RandomLayerSpec& spec);

// Recomputes layer.dequantized from codes, scales, zeros and g_idx.
void RecomputeDequantized(QuantizedLayer& layer);

}  // namespace quant::testing

#endif  // QUANT_TESTS_PACK_RANDOM_LAYER_H_

// Random quantized layers for the packing tests.
#include "tests/pack/random_layer.h"

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

namespace quant::testing {

void RecomputeDequantized(QuantizedLayer& layer) {
  layer.dequantized.resize(layer.rows, layer.cols);
  for (int64_t r = 0; r < layer.rows; ++r) {
    for (int64_t c = 0; c < layer.cols; ++c) {
      const int32_t g = layer.g_idx[c];
      layer.dequantized(r, c) =
          layer.scales(g, r) *
          (static_cast<float>(layer.codes(r, c)) - layer.zeros(g, r));
    }
  }
}

QuantizedLayer MakeRandomLayer(const RandomLayerSpec& spec) {
  std::mt19937 rng(spec.seed);
  QuantizedLayer layer;
  layer.grid.kind = spec.kind;
  layer.grid.bits = spec.bits;
  layer.grid.group_size = spec.group_size;
  layer.rows = spec.rows;
  layer.cols = spec.cols;
  layer.method = "test";
  const int64_t groups =
      spec.group_size > 0 ? (spec.cols + spec.group_size - 1) / spec.group_size
                          : 1;
  const int max_code = (1 << spec.bits) - 1;
  const int min_code = spec.kind == GridKind::kSymRestricted ? 1 : 0;

  std::uniform_int_distribution<int> code_dist(min_code, max_code);
  layer.codes.resize(spec.rows, spec.cols);
  for (int64_t r = 0; r < spec.rows; ++r) {
    for (int64_t c = 0; c < spec.cols; ++c) {
      layer.codes(r, c) = static_cast<uint8_t>(code_dist(rng));
    }
  }

  std::uniform_real_distribution<float> scale_dist(1e-3f, 0.1f);
  std::uniform_int_distribution<int> zero_dist(spec.allow_zero_zero ? 0 : 1,
                                               max_code);
  layer.scales.resize(groups, spec.rows);
  layer.zeros.resize(groups, spec.rows);
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t r = 0; r < spec.rows; ++r) {
      const float s = scale_dist(rng);
      layer.scales(g, r) = spec.scale_dtype == DType::kBF16
                               ? BFloat16ToFloat(FloatToBFloat16(s))
                               : HalfToFloat(FloatToHalf(s));
      layer.zeros(g, r) = spec.kind == GridKind::kAsym
                              ? static_cast<float>(zero_dist(rng))
                              : static_cast<float>(1 << (spec.bits - 1));
    }
  }

  layer.order.resize(spec.cols);
  std::iota(layer.order.begin(), layer.order.end(), 0);
  if (spec.act_order) std::shuffle(layer.order.begin(), layer.order.end(), rng);
  layer.g_idx.assign(spec.cols, 0);
  for (int64_t pos = 0; pos < spec.cols; ++pos) {
    layer.g_idx[layer.order[pos]] =
        static_cast<int32_t>(spec.group_size > 0 ? pos / spec.group_size : 0);
  }
  RecomputeDequantized(layer);
  return layer;
}

}  // namespace quant::testing

// Rotary position embeddings.
#include "core/forward/rope.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace quant {
namespace {

// Llama 3: long wavelengths are stretched by `factor`, short ones kept, and
// the band between blended smoothly.
double ScaleLlama3(double inv_freq, const Llama3RopeScaling& scaling) {
  const double old_context =
      static_cast<double>(scaling.original_max_position_embeddings);
  const double low_freq_wavelen = old_context / scaling.low_freq_factor;
  const double high_freq_wavelen = old_context / scaling.high_freq_factor;
  const double wavelen = 2.0 * M_PI / inv_freq;
  if (wavelen < high_freq_wavelen) return inv_freq;
  if (wavelen > low_freq_wavelen) return inv_freq / scaling.factor;
  const double smooth = (old_context / wavelen - scaling.low_freq_factor) /
                        (scaling.high_freq_factor - scaling.low_freq_factor);
  return (1.0 - smooth) * inv_freq / scaling.factor + smooth * inv_freq;
}

}  // namespace

RopeTable::RopeTable(const ModelConfig& config, int64_t max_positions)
    : max_positions_(max_positions) {
  const int half = config.head_dim / 2;
  inv_freq_.resize(half);
  for (int i = 0; i < half; ++i) {
    // Computed in float32 like the reference implementations, whose tables
    // are float32: matching them matters more than a closer true value.
    const float exponent =
        static_cast<float>(2 * i) / static_cast<float>(config.head_dim);
    double inv =
        1.0 / std::pow(static_cast<float>(config.rope_theta), exponent);
    if (config.rope_scaling.has_value()) {
      inv = ScaleLlama3(inv, *config.rope_scaling);
    }
    inv_freq_[i] = static_cast<float>(inv);
  }
  const int rows = static_cast<int>(std::min(max_positions, kTablePositions));
  cos_.resize(rows, half);
  sin_.resize(rows, half);
  for (int t = 0; t < rows; ++t) {
    for (int i = 0; i < half; ++i) {
      const float angle =
          static_cast<float>(t) * static_cast<float>(inv_freq_[i]);
      cos_(t, i) = std::cos(angle);
      sin_(t, i) = std::sin(angle);
    }
  }
}

void RopeTable::Apply(int head_dim, Eigen::Ref<RowMatrixF> x) const {
  const int half = head_dim / 2;
  const int heads = static_cast<int>(x.cols()) / head_dim;
  std::vector<float> cos_row(half), sin_row(half);
  for (Eigen::Index t = 0; t < x.rows(); ++t) {
    const float* c = nullptr;
    const float* s = nullptr;
    if (t < cos_.rows()) {
      c = cos_.row(t).data();
      s = sin_.row(t).data();
    } else {
      // Past the table: the same float32 angles, computed here.
      for (int i = 0; i < half; ++i) {
        const float angle =
            static_cast<float>(t) * static_cast<float>(inv_freq_[i]);
        cos_row[i] = std::cos(angle);
        sin_row[i] = std::sin(angle);
      }
      c = cos_row.data();
      s = sin_row.data();
    }
    for (int h = 0; h < heads; ++h) {
      float* v = x.row(t).data() + h * head_dim;
      for (int i = 0; i < half; ++i) {
        const float a = v[i];
        const float b = v[i + half];
        v[i] = a * c[i] - b * s[i];
        v[i + half] = b * c[i] + a * s[i];
      }
    }
  }
}

}  // namespace quant

// SplitMix64 and Box-Muller; see gaussian_stream.h.
#include "bench/synth/gaussian_stream.h"

#include <cmath>

namespace quant::synth {

uint64_t GaussianStream::NextBits() {
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

double GaussianStream::NextUniform() {
  // 53 random bits, shifted by one so the result lies in (0, 1].
  return (static_cast<double>(NextBits() >> 11) + 1.0) * 0x1.0p-53;
}

void GaussianStream::Fill(float* out, size_t count, float scale) {
  constexpr double kTwoPi = 6.283185307179586476925286766559;
  for (size_t i = 0; i < count; ++i) {
    double value;
    if (has_spare_) {
      value = spare_;
      has_spare_ = false;
    } else {
      const double radius = std::sqrt(-2.0 * std::log(NextUniform()));
      const double angle = kTwoPi * NextUniform();
      value = radius * std::cos(angle);
      spare_ = radius * std::sin(angle);
      has_spare_ = true;
    }
    out[i] = static_cast<float>(value) * scale;
  }
}

uint64_t TensorSeed(uint64_t seed, uint64_t index) {
  // Two SplitMix64 steps: nearby (seed, index) pairs give unrelated streams.
  GaussianStream mixer(seed);
  const uint64_t base = mixer.NextBits();
  GaussianStream tensor(base ^ (index * 0xd1b54a32d192ed03ULL));
  return tensor.NextBits();
}

}  // namespace quant::synth

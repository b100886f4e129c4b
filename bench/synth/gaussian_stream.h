// Deterministic Gaussian numbers from a seed, the same on every platform
// (std::normal_distribution is not specified bit for bit): SplitMix64 bits
// through Box-Muller.
#ifndef QUANT_BENCH_SYNTH_GAUSSIAN_STREAM_H_
#define QUANT_BENCH_SYNTH_GAUSSIAN_STREAM_H_

#include <cstddef>
#include <cstdint>

namespace quant::synth {

class GaussianStream {
 public:
  explicit GaussianStream(uint64_t seed) : state_(seed) {}

  // Fills `out[0..count)` with N(0, 1) samples times `scale`.
  void Fill(float* out, size_t count, float scale);

  // 64 uniformly distributed bits (one SplitMix64 step).
  uint64_t NextBits();

 private:
  // A uniform double in (0, 1]: never 0, so log() stays finite.
  double NextUniform();

  uint64_t state_;
  bool has_spare_ = false;
  double spare_ = 0.0;
};

// A seed for tensor `index` of a checkpoint generated with `seed`, so each
// tensor's stream is independent of how the others were chunked.
uint64_t TensorSeed(uint64_t seed, uint64_t index);

}  // namespace quant::synth

#endif  // QUANT_BENCH_SYNTH_GAUSSIAN_STREAM_H_

// A bit-compatible clone of torch's CPU float32 randn (mt19937 seeded like
// torch.Generator().manual_seed(seed), 24-bit uniforms, Box-Muller in blocks
// of 16), so tests can regenerate the seed documents' inputs instead of
// storing them. Matches torch to the last bit or two of each value (torch uses
// vectorised log/sin/cos).
#ifndef QUANT_TESTS_QUANT_TORCH_RANDN_H_
#define QUANT_TESTS_QUANT_TORCH_RANDN_H_

#include <cstdint>
#include <random>
#include <vector>

#include "core/quant/matrix_types.h"

namespace quant::testing {

class TorchGenerator {
 public:
  explicit TorchGenerator(uint64_t seed)
      : engine_(static_cast<uint32_t>(seed)) {}
  // torch.randn(n, generator=g) for n >= 16.
  std::vector<float> Randn(int64_t n);
  // torch.randn(rows, cols, generator=g), row-major.
  RowMatrixF RandnMatrix(int64_t rows, int64_t cols);

 private:
  float Uniform();
  std::mt19937 engine_;
};

}  // namespace quant::testing

#endif  // QUANT_TESTS_QUANT_TORCH_RANDN_H_

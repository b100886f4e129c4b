// torch CPU randn clone (aten/src/ATen/native/cpu/DistributionTemplates.h:
// normal_fill and normal_fill_16).
#include "tests/quant/torch_randn.h"

#include <cassert>
#include <cmath>

namespace quant::testing {
namespace {

void NormalFill16(float* data) {
  for (int j = 0; j < 8; ++j) {
    const float u1 = 1.0f - data[j];
    const float u2 = data[j + 8];
    const float radius = std::sqrt(-2.0f * std::log(u1));
    const float theta = static_cast<float>(2.0f * M_PI * u2);
    data[j] = radius * std::cos(theta);
    data[j + 8] = radius * std::sin(theta);
  }
}

}  // namespace

float TorchGenerator::Uniform() {
  const uint32_t bits = static_cast<uint32_t>(engine_()) & ((1u << 24) - 1);
  return static_cast<float>(bits) * (1.0f / static_cast<float>(1u << 24));
}

std::vector<float> TorchGenerator::Randn(int64_t n) {
  assert(n >= 16);
  std::vector<float> data(n);
  for (int64_t i = 0; i < n; ++i) data[i] = Uniform();
  for (int64_t i = 0; i + 16 <= n; i += 16) NormalFill16(data.data() + i);
  if (n % 16 != 0) {
    float* tail = data.data() + n - 16;
    for (int i = 0; i < 16; ++i) tail[i] = Uniform();
    NormalFill16(tail);
  }
  return data;
}

RowMatrixF TorchGenerator::RandnMatrix(int64_t rows, int64_t cols) {
  std::vector<float> v = Randn(rows * cols);
  return Eigen::Map<RowMatrixF>(v.data(), rows, cols);
}

}  // namespace quant::testing

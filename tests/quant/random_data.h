// Deterministic random weights and correlated activations for property tests.
#ifndef QUANT_TESTS_QUANT_RANDOM_DATA_H_
#define QUANT_TESTS_QUANT_RANDOM_DATA_H_

#include <cstdint>
#include <random>

#include "core/quant/matrix_types.h"

namespace quant::testing {

inline RowMatrixF RandomNormal(int64_t rows, int64_t cols, uint32_t seed,
                               float stddev = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, stddev);
  RowMatrixF m(rows, cols);
  for (int64_t i = 0; i < m.size(); ++i) m.data()[i] = normal(rng);
  return m;
}

// [t, k] activations with real coupling between channels and a spread of
// channel scales: Z · (I + M/√k)ᵀ · diag(scales).
inline RowMatrixF CorrelatedActivations(int64_t t, int64_t k, uint32_t seed) {
  const RowMatrixF z = RandomNormal(t, k, seed);
  RowMatrixF mix = RandomNormal(k, k, seed + 1) / std::sqrt(float(k));
  mix.diagonal().array() += 1.0f;
  const RowMatrixF scales = RandomNormal(1, k, seed + 2, 0.7f).array().exp();
  RowMatrixF x = z * mix.transpose();
  return x.array().rowwise() * scales.row(0).array();
}

inline RowMatrixF GramOf(const RowMatrixF& x) {
  return (x.transpose() * x).eval();
}

}  // namespace quant::testing

#endif  // QUANT_TESTS_QUANT_RANDOM_DATA_H_

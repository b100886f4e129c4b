// Eigen's SGEMM compiled with -march=native (see bench/CMakeLists.txt),
// with Eigen's namespace renamed so that its instantiations are this file's
// own. Not part of any program but the benchmarks: it runs only on CPUs
// like the one that built it.
#undef EIGEN_USE_BLAS
#define EIGEN_DONT_PARALLELIZE

#include <Eigen/Core>
#include <string>

#include "bench/ceiling/reference_gemm.h"

namespace quant::bench {
namespace {

using Matrix =
    Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

void Sgemm(int m, int n, int k, const float* a, const float* b, float* c) {
  Eigen::Map<const Matrix> am(a, m, k);
  Eigen::Map<const Matrix> bm(b, k, n);
  Eigen::Map<Matrix> cm(c, m, n);
  cm.noalias() = am * bm;
}

}  // namespace

RowMajorSgemm NativeEigenSgemm() { return &Sgemm; }

std::string NativeEigenDescription() {
#if defined(__AVX512F__)
  return "Eigen -march=native (AVX-512)";
#elif defined(__AVX2__) && defined(__FMA__)
  return "Eigen -march=native (AVX2+FMA)";
#elif defined(__AVX__)
  return "Eigen -march=native (AVX)";
#else
  return "Eigen -march=native (SSE)";
#endif
}

}  // namespace quant::bench

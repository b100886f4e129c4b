// The pooled blocked Cholesky: a factor of A, Eigen's LLT to rounding, the
// same bytes on any thread count, and a clear failure where A is not
// positive definite.
#include "core/quant/cholesky.h"

#include <Eigen/Cholesky>
#include <cstdint>
#include <cstring>

#include "core/base/thread_pool.h"
#include "gtest/gtest.h"
#include "tests/quant/random_data.h"

namespace quant {
namespace {

// A well-conditioned SPD matrix whose size is no multiple of the panel or
// the tile, so the short last panel and the ragged tiles run too.
Eigen::MatrixXf SpdMatrix(int64_t k) {
  const RowMatrixF x = testing::CorrelatedActivations(2 * k, k, 11);
  Eigen::MatrixXf a = testing::GramOf(x);
  a.diagonal().array() += 0.01f * a.diagonal().mean();
  // Exactly symmetric (a float GEMM's two triangles may differ in the last
  // bit), so that L·Lᵀ can be compared with all of A.
  const Eigen::MatrixXf symmetric = a.selfadjointView<Eigen::Lower>();
  return symmetric;
}

TEST(CholeskyTest, FactorsAndMatchesEigensLlt) {
  const int64_t k = 3 * kCholeskyPanel + 37;  // 421: four panels, 2 tiles
  const Eigen::MatrixXf a = SpdMatrix(k);
  Eigen::MatrixXf l = a;
  ASSERT_TRUE(CholeskyLowerInPlace(&l));
  const Eigen::MatrixXf lower = l.triangularView<Eigen::Lower>();
  const double residual = (lower * lower.transpose() - a).norm() / a.norm();
  EXPECT_LT(residual, 1e-5);
  const Eigen::MatrixXf eigen = a.llt().matrixL();
  EXPECT_LT((lower - eigen).norm() / eigen.norm(), 1e-4);
  // The strict upper triangle is left as it was.
  const Eigen::MatrixXf upper = l.triangularView<Eigen::StrictlyUpper>();
  const Eigen::MatrixXf upper_before = a.triangularView<Eigen::StrictlyUpper>();
  EXPECT_EQ(upper, upper_before);
}

TEST(CholeskyTest, SameBytesOnAnyThreadCount) {
  const int64_t k = 2 * kCholeskyTile + 3 * kCholeskyPanel + 5;  // 901
  const Eigen::MatrixXf a = SpdMatrix(k);
  Eigen::MatrixXf inline_factor = a;
  ASSERT_TRUE(CholeskyLowerInPlace(&inline_factor, nullptr));
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    Eigen::MatrixXf pooled = a;
    ASSERT_TRUE(CholeskyLowerInPlace(&pooled, &pool));
    EXPECT_EQ(0, std::memcmp(pooled.data(), inline_factor.data(),
                             sizeof(float) * static_cast<size_t>(a.size())))
        << threads << " threads";
  }
}

TEST(CholeskyTest, DoubleFactorMatchesFloatToRounding) {
  const int64_t k = kCholeskyPanel + kCholeskyTile + 9;
  const Eigen::MatrixXf a = SpdMatrix(k);
  Eigen::MatrixXd d = a.cast<double>();
  Eigen::MatrixXf f = a;
  ThreadPool pool(2);
  ASSERT_TRUE(CholeskyLowerInPlace(&d, &pool));
  ASSERT_TRUE(CholeskyLowerInPlace(&f, &pool));
  const Eigen::MatrixXd ld = d.triangularView<Eigen::Lower>();
  const Eigen::MatrixXd lf = f.cast<double>().triangularView<Eigen::Lower>();
  EXPECT_LT(
      (ld * ld.transpose() - a.cast<double>()).norm() / a.cast<double>().norm(),
      1e-12);
  EXPECT_LT((ld - lf).norm() / ld.norm(), 1e-4);
}

TEST(CholeskyTest, NotPositiveDefiniteFailsInAnyPanel) {
  const int64_t k = 3 * kCholeskyPanel + 37;
  ThreadPool pool(2);
  // A negative pivot in the first, a middle and the last panel.
  for (int64_t bad : {int64_t{0}, kCholeskyPanel + 3, k - 1}) {
    Eigen::MatrixXf a = SpdMatrix(k);
    // Making row and column `bad` a copy of row and column bad - 1 (or
    // bad + 1) makes A singular; a little less on the diagonal makes it
    // indefinite.
    const int64_t twin = bad == 0 ? 1 : bad - 1;
    a.row(bad) = a.row(twin);
    a.col(bad) = a.col(twin);
    a(bad, bad) = a(twin, twin) * 0.9f;
    EXPECT_FALSE(CholeskyLowerInPlace(&a, &pool)) << "bad pivot at " << bad;
  }
}

}  // namespace
}  // namespace quant

// Every level's BLAS routines against the plain reference, on every level
// this CPU supports: each transpose/side/triangle/diagonal combination,
// shapes around Eigen's block sizes, leading dimensions with padding (NaN
// there must never be read, sentinels there never written), beta = 0 over
// NaN, alpha = 0, empty shapes and negative increments.
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/kernels/dispatch.h"
#include "core/kernels/isa.h"
#include "core/kernels/kernel_table.h"
#include "gtest/gtest.h"
#include "tests/kernels/reference_blas.h"

namespace quant::kernels {
namespace {

using testing::At;
using testing::Element;

constexpr float kSentinel = 12345.0f;

template <typename T>
const BlasRoutines<T>& RoutinesOf(const KernelTable& table);
template <>
const BlasRoutines<float>& RoutinesOf<float>(const KernelTable& table) {
  return table.s;
}
template <>
const BlasRoutines<double>& RoutinesOf<double>(const KernelTable& table) {
  return table.d;
}

// A column-major rows x cols matrix with leading dimension rows + pad; the
// padding holds `pad_value`.
template <typename T>
struct TestMatrix {
  int rows, cols, ld;
  std::vector<T> data;

  TestMatrix(int r, int c, int pad, uint32_t seed, T pad_value)
      : rows(r), cols(c), ld(r + pad) {
    data.assign(static_cast<size_t>(std::max(ld * c, 1)), pad_value);
    std::mt19937 rng(seed);
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    for (int j = 0; j < c; ++j) {
      for (int i = 0; i < r; ++i) At(data.data(), ld, i, j) = T(u(rng));
    }
  }
  T* p() { return data.data(); }
  const T* p() const { return data.data(); }
};

template <typename T>
double Tolerance(int k) {
  return 8.0 * (k + 4) * std::numeric_limits<T>::epsilon();
}

// got and want agree in the rows x cols region (relative to the larger of
// 1 and |want|), and got's padding is untouched.
template <typename T>
void ExpectMatrixNear(const TestMatrix<T>& got, const TestMatrix<T>& want,
                      double tolerance, const std::string& what) {
  ASSERT_EQ(got.data.size(), want.data.size());
  for (int j = 0; j < got.cols; ++j) {
    for (int i = 0; i < got.ld; ++i) {
      const double g = At(got.p(), got.ld, i, j);
      const double w = At(want.p(), want.ld, i, j);
      if (i >= got.rows) {
        ASSERT_EQ(g, double(kSentinel))
            << what << ": padding written at " << i << "," << j;
        continue;
      }
      ASSERT_TRUE(std::isfinite(g)) << what << " at " << i << "," << j;
      ASSERT_NEAR(g, w, tolerance * std::max(1.0, std::fabs(w)))
          << what << " at " << i << "," << j;
    }
  }
}

struct Shape {
  int m, n, k;
};
// Around Eigen's register blocks (8/16/48 rows, 4 columns) and its cache
// blocks, plus degenerate ones.
const Shape kShapes[] = {{1, 1, 1},   {3, 5, 7},    {17, 4, 33},
                         {48, 20, 9}, {64, 64, 64}, {97, 131, 70},
                         {0, 5, 3},   {4, 0, 3},    {5, 6, 0}};

class BlasTest : public ::testing::TestWithParam<IsaLevel> {
 protected:
  const KernelTable& table() const { return KernelsFor(GetParam()); }

  template <typename T>
  void CheckGemm() {
    const BlasRoutines<T>& r = RoutinesOf<T>(table());
    uint32_t seed = 1;
    for (const Shape& s : kShapes) {
      for (char ta : {'N', 'T'}) {
        for (char tb : {'N', 'T'}) {
          for (const auto& [alpha, beta] : std::vector<std::pair<T, T>>{
                   {1, 1}, {T(0.5), 0}, {-2, T(0.25)}, {0, T(3)}}) {
            const std::string what = "gemm " + std::string(1, ta) + tb +
                                     " m=" + std::to_string(s.m) +
                                     " n=" + std::to_string(s.n) +
                                     " k=" + std::to_string(s.k) +
                                     " alpha=" + std::to_string(alpha) +
                                     " beta=" + std::to_string(beta);
            const T nan = std::numeric_limits<T>::quiet_NaN();
            TestMatrix<T> a(ta == 'N' ? s.m : s.k, ta == 'N' ? s.k : s.m, 3,
                            seed++, nan);
            TestMatrix<T> b(tb == 'N' ? s.k : s.n, tb == 'N' ? s.n : s.k, 2,
                            seed++, nan);
            TestMatrix<T> c(s.m, s.n, 1, seed++, T(kSentinel));
            if (beta == T(0)) {
              for (int j = 0; j < s.n; ++j) {
                for (int i = 0; i < s.m; ++i) At(c.p(), c.ld, i, j) = nan;
              }
            }
            TestMatrix<T> want = c;
            testing::RefGemm(ta, tb, s.m, s.n, s.k, alpha, a.p(), a.ld, b.p(),
                             b.ld, beta, want.p(), want.ld);
            r.gemm(ta, tb, s.m, s.n, s.k, alpha, a.p(), a.ld, b.p(), b.ld, beta,
                   c.p(), c.ld);
            ExpectMatrixNear(c, want, Tolerance<T>(s.k), what);
          }
        }
      }
    }
  }

  template <typename T>
  void CheckSyrk() {
    const BlasRoutines<T>& r = RoutinesOf<T>(table());
    uint32_t seed = 100;
    for (const Shape& s : kShapes) {
      for (char uplo : {'L', 'U'}) {
        for (char trans : {'N', 'T'}) {
          for (T beta : {T(1), T(0), T(-0.5)}) {
            const std::string what = "syrk " + std::string(1, uplo) + trans +
                                     " n=" + std::to_string(s.n) +
                                     " k=" + std::to_string(s.k);
            TestMatrix<T> a(trans == 'N' ? s.n : s.k, trans == 'N' ? s.k : s.n,
                            2, seed++, std::numeric_limits<T>::quiet_NaN());
            TestMatrix<T> c(s.n, s.n, 1, seed++, T(kSentinel));
            TestMatrix<T> want = c;
            testing::RefSyrk(uplo, trans, s.n, s.k, T(0.75), a.p(), a.ld, beta,
                             want.p(), want.ld);
            r.syrk(uplo, trans, s.n, s.k, T(0.75), a.p(), a.ld, beta, c.p(),
                   c.ld);
            // The other triangle is not touched: the reference leaves it.
            ExpectMatrixNear(c, want, Tolerance<T>(s.k), what);
          }
        }
      }
    }
  }

  template <typename T>
  void CheckSymm() {
    const BlasRoutines<T>& r = RoutinesOf<T>(table());
    uint32_t seed = 200;
    for (const Shape& s : kShapes) {
      for (char side : {'L', 'R'}) {
        for (char uplo : {'L', 'U'}) {
          const int na = side == 'L' ? s.m : s.n;
          TestMatrix<T> a(na, na, 1, seed++,
                          std::numeric_limits<T>::quiet_NaN());
          TestMatrix<T> b(s.m, s.n, 2, seed++,
                          std::numeric_limits<T>::quiet_NaN());
          TestMatrix<T> c(s.m, s.n, 1, seed++, T(kSentinel));
          TestMatrix<T> want = c;
          testing::RefSymm(side, uplo, s.m, s.n, T(1.5), a.p(), a.ld, b.p(),
                           b.ld, T(0.5), want.p(), want.ld);
          r.symm(side, uplo, s.m, s.n, T(1.5), a.p(), a.ld, b.p(), b.ld, T(0.5),
                 c.p(), c.ld);
          ExpectMatrixNear(c, want, Tolerance<T>(na),
                           "symm " + std::string(1, side) + uplo);
        }
      }
    }
  }

  // A well-conditioned triangle: a dominant diagonal.
  template <typename T>
  static TestMatrix<T> Triangle(int n, uint32_t seed) {
    TestMatrix<T> a(n, n, 1, seed, std::numeric_limits<T>::quiet_NaN());
    for (int i = 0; i < n; ++i) {
      At(a.p(), a.ld, i, i) = T(2.0 + 0.01 * i) * (i % 2 ? 1 : -1);
    }
    for (int j = 0; j < n; ++j) {
      for (int i = 0; i < n; ++i) {
        if (i != j) At(a.p(), a.ld, i, j) *= T(1.0 / std::max(n, 1));
      }
    }
    return a;
  }

  template <typename T>
  void CheckTriangular() {
    const BlasRoutines<T>& r = RoutinesOf<T>(table());
    uint32_t seed = 300;
    for (const Shape& s : kShapes) {
      for (char side : {'L', 'R'}) {
        for (char uplo : {'L', 'U'}) {
          for (char trans : {'N', 'T'}) {
            for (char diag : {'N', 'U'}) {
              const std::string what = std::string(1, side) + uplo + trans +
                                       diag + " m=" + std::to_string(s.m) +
                                       " n=" + std::to_string(s.n);
              const int na = side == 'L' ? s.m : s.n;
              const TestMatrix<T> a = Triangle<T>(na, seed++);
              TestMatrix<T> b(s.m, s.n, 2, seed++, T(kSentinel));
              // trmm against the reference.
              TestMatrix<T> product = b;
              TestMatrix<T> want = b;
              testing::RefTrmm(side, uplo, trans, diag, s.m, s.n, T(-0.5),
                               a.p(), a.ld, want.p(), want.ld);
              r.trmm(side, uplo, trans, diag, s.m, s.n, T(-0.5), a.p(), a.ld,
                     product.p(), product.ld);
              ExpectMatrixNear(product, want, Tolerance<T>(na), "trmm " + what);
              // trsm: op(A)·X = alpha·B, checked by multiplying back.
              TestMatrix<T> x = b;
              r.trsm(side, uplo, trans, diag, s.m, s.n, T(2), a.p(), a.ld,
                     x.p(), x.ld);
              TestMatrix<T> back = x;
              testing::RefTrmm(side, uplo, trans, diag, s.m, s.n, T(0.5), a.p(),
                               a.ld, back.p(), back.ld);
              ExpectMatrixNear(back, b, 4 * Tolerance<T>(na), "trsm " + what);
            }
          }
        }
      }
    }
  }

  template <typename T>
  void CheckLevel2() {
    const BlasRoutines<T>& r = RoutinesOf<T>(table());
    uint32_t seed = 400;
    const T nan = std::numeric_limits<T>::quiet_NaN();
    for (const Shape& s : kShapes) {
      for (int inc : {1, 3, -2}) {
        const std::string tag = " m=" + std::to_string(s.m) +
                                " n=" + std::to_string(s.n) +
                                " inc=" + std::to_string(inc);
        const int step = std::abs(inc);
        const int len = std::max(s.m, s.n);
        auto vector = [&](uint32_t vs) {
          TestMatrix<T> v(1, std::max(len, 1) * step, 0, vs, nan);
          return v.data;
        };
        for (char trans : {'N', 'T'}) {
          for (T beta : {T(0), T(0.5)}) {
            TestMatrix<T> a(s.m, s.n, 2, seed++, nan);
            const std::vector<T> x = vector(seed++);
            std::vector<T> y = vector(seed++);
            const int leny = trans == 'N' ? s.m : s.n;
            if (beta == T(0)) {
              for (int i = 0; i < leny; ++i)
                Element(y.data(), leny, inc, i) = nan;
            }
            std::vector<T> want = y;
            testing::RefGemv(trans, s.m, s.n, T(1.25), a.p(), a.ld, x.data(),
                             inc, beta, want.data(), inc);
            r.gemv(trans, s.m, s.n, T(1.25), a.p(), a.ld, x.data(), inc, beta,
                   y.data(), inc);
            for (int i = 0; i < leny; ++i) {
              ASSERT_NEAR(Element(y.data(), leny, inc, i),
                          Element(want.data(), leny, inc, i), Tolerance<T>(len))
                  << "gemv " << trans << tag << " at " << i;
            }
          }
        }
        for (char uplo : {'L', 'U'}) {
          TestMatrix<T> a(s.n, s.n, 1, seed++, nan);
          const std::vector<T> x = vector(seed++);
          std::vector<T> y = vector(seed++);
          std::vector<T> want = y;
          testing::RefSymv(uplo, s.n, T(-1), a.p(), a.ld, x.data(), inc, T(2),
                           want.data(), inc);
          r.symv(uplo, s.n, T(-1), a.p(), a.ld, x.data(), inc, T(2), y.data(),
                 inc);
          for (int i = 0; i < s.n; ++i) {
            ASSERT_NEAR(Element(y.data(), s.n, inc, i),
                        Element(want.data(), s.n, inc, i), Tolerance<T>(len))
                << "symv " << uplo << tag << " at " << i;
          }
          for (char trans : {'N', 'T'}) {
            for (char diag : {'N', 'U'}) {
              const TestMatrix<T> t = Triangle<T>(s.n, seed++);
              std::vector<T> v = vector(seed++);
              std::vector<T> expected = v;
              testing::RefTrmv(uplo, trans, diag, s.n, t.p(), t.ld,
                               expected.data(), inc);
              r.trmv(uplo, trans, diag, s.n, t.p(), t.ld, v.data(), inc);
              for (int i = 0; i < s.n; ++i) {
                ASSERT_NEAR(Element(v.data(), s.n, inc, i),
                            Element(expected.data(), s.n, inc, i),
                            Tolerance<T>(len))
                    << "trmv " << uplo << trans << diag << tag << " at " << i;
              }
            }
          }
        }
        {
          const std::vector<T> x = vector(seed++);
          std::vector<T> y = vector(seed++);
          std::vector<T> want = y;
          testing::RefAxpy(s.m, T(0.75), x.data(), inc, want.data(), inc);
          r.axpy(s.m, T(0.75), x.data(), inc, y.data(), inc);
          for (int i = 0; i < s.m; ++i) {
            ASSERT_NEAR(Element(y.data(), s.m, inc, i),
                        Element(want.data(), s.m, inc, i), Tolerance<T>(1))
                << "axpy" << tag << " at " << i;
          }
        }
      }
    }
  }
};

TEST_P(BlasTest, GemmMatchesTheReference) {
  CheckGemm<float>();
  CheckGemm<double>();
}

TEST_P(BlasTest, SyrkUpdatesOnlyItsTriangle) {
  CheckSyrk<float>();
  CheckSyrk<double>();
}

TEST_P(BlasTest, SymmMatchesTheReference) {
  CheckSymm<float>();
  CheckSymm<double>();
}

TEST_P(BlasTest, TriangularProductsAndSolves) {
  CheckTriangular<float>();
  CheckTriangular<double>();
}

TEST_P(BlasTest, Level2Routines) {
  CheckLevel2<float>();
  CheckLevel2<double>();
}

TEST_P(BlasTest, TableIsTheLevelItWasAskedFor) {
  EXPECT_EQ(table().level, GetParam());
}

// Results of one level do not depend on which thread or how often a
// routine runs (the blocking is fixed, the routines keep no state).
TEST_P(BlasTest, GemmIsRepeatable) {
  TestMatrix<float> a(300, 257, 0, 1, 0.0f), b(257, 190, 0, 2, 0.0f);
  TestMatrix<float> c1(300, 190, 0, 3, 0.0f);
  TestMatrix<float> c2 = c1;
  table().s.gemm('N', 'N', 300, 190, 257, 1.0f, a.p(), a.ld, b.p(), b.ld, 0.0f,
                 c1.p(), c1.ld);
  table().s.gemm('N', 'N', 300, 190, 257, 1.0f, a.p(), a.ld, b.p(), b.ld, 0.0f,
                 c2.p(), c2.ld);
  EXPECT_EQ(c1.data, c2.data);
}

std::string LevelName(const ::testing::TestParamInfo<IsaLevel>& info) {
  return std::string(IsaName(info.param));
}

INSTANTIATE_TEST_SUITE_P(SupportedLevels, BlasTest,
                         ::testing::ValuesIn(SupportedLevels()), LevelName);

}  // namespace
}  // namespace quant::kernels

// One instruction-set level's kernels. CMake compiles this file once per
// level (core/kernels/CMakeLists.txt) with that level's -march flags and
//   QUANT_KERNEL_NS  the level's namespace (isa_v2, isa_v3, isa_v4, ...)
//   Eigen            renamed to a namespace of the level's own
// so that every Eigen template instantiated here is a private copy built
// for this level: the linker can never swap in another level's copy (an
// AVX-512 copy would crash a v2 CPU; a v2 copy would make v4 slow).
// tests/kernels/level_symbols_test.sh checks the linked programs for it.
//
// Nothing here may include project headers that use Eigen types: across
// this file's boundary only the plain pointers of kernel_table.h pass.
#ifndef QUANT_KERNEL_NS
#error "level_kernels.cc is built once per level by core/kernels/CMakeLists.txt"
#endif

// The rest of the project calls these routines through Eigen's BLAS
// backend; this file is that backend and must use Eigen's own products.
#undef EIGEN_USE_BLAS
#define EIGEN_DONT_PARALLELIZE

#include <Eigen/Core>
#include <algorithm>
#include <vector>

#include "core/kernels/kernel_table.h"

namespace quant::kernels::QUANT_KERNEL_NS {
namespace {

template <typename T>
using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>;
template <typename T>
using Vec = Eigen::Matrix<T, Eigen::Dynamic, 1>;
template <typename T>
using MatMap = Eigen::Map<Mat<T>, 0, Eigen::OuterStride<>>;
template <typename T>
using ConstMatMap = Eigen::Map<const Mat<T>, 0, Eigen::OuterStride<>>;
template <typename T>
using VecMap = Eigen::Map<Vec<T>, 0, Eigen::InnerStride<>>;
template <typename T>
using ConstVecMap = Eigen::Map<const Vec<T>, 0, Eigen::InnerStride<>>;

bool IsNoTrans(char c) { return c == 'N' || c == 'n'; }
bool IsLowerChar(char c) { return c == 'L' || c == 'l'; }
bool IsUnitDiag(char c) { return c == 'U' || c == 'u'; }
bool IsLeftSide(char c) { return c == 'L' || c == 'l'; }

// A read-only strided matrix; `ld` is at least 1 even for empty shapes.
template <typename T>
ConstMatMap<T> ConstMatrix(const T* p, int rows, int cols, int ld) {
  return ConstMatMap<T>(p, rows, cols, Eigen::OuterStride<>(std::max(ld, 1)));
}
template <typename T>
MatMap<T> Matrix(T* p, int rows, int cols, int ld) {
  return MatMap<T>(p, rows, cols, Eigen::OuterStride<>(std::max(ld, 1)));
}

// C := beta·C, with BLAS's rule that beta = 0 sets C to zero without
// reading it (C may hold NaN then).
template <typename Dst, typename T>
void Scale(Dst&& c, T beta) {
  if (beta == T(0)) {
    c.setZero();
  } else if (beta != T(1)) {
    c *= beta;
  }
}

template <typename T>
void Gemm(char transa, char transb, int m, int n, int k, T alpha, const T* a,
          int lda, const T* b, int ldb, T beta, T* c, int ldc) {
  if (m <= 0 || n <= 0) return;
  MatMap<T> cm = Matrix(c, m, n, ldc);
  Scale(cm, beta);
  if (alpha == T(0) || k <= 0) return;
  const bool na = IsNoTrans(transa);
  const bool nb = IsNoTrans(transb);
  const ConstMatMap<T> am = ConstMatrix(a, na ? m : k, na ? k : m, lda);
  const ConstMatMap<T> bm = ConstMatrix(b, nb ? k : n, nb ? n : k, ldb);
  if (na && nb) {
    cm.noalias() += alpha * am * bm;
  } else if (na) {
    cm.noalias() += alpha * am * bm.transpose();
  } else if (nb) {
    cm.noalias() += alpha * am.transpose() * bm;
  } else {
    cm.noalias() += alpha * am.transpose() * bm.transpose();
  }
}

// x or y of a level-2 routine as a contiguous vector: BLAS's negative
// increments walk the vector from its end; they are copied.
template <typename T>
struct StridedVector {
  T* base;
  int len;
  int inc;
  std::vector<T> copy;

  StridedVector(T* p, int length, int increment, bool read)
      : base(p), len(length), inc(increment) {
    if (inc < 0) {
      copy.resize(len);
      if (read) {
        for (int i = 0; i < len; ++i) copy[i] = base[(len - 1 - i) * -inc];
      }
    }
  }
  VecMap<T> Map() {
    if (inc < 0) return VecMap<T>(copy.data(), len, Eigen::InnerStride<>(1));
    return VecMap<T>(base, len, Eigen::InnerStride<>(inc));
  }
  void WriteBack() {
    if (inc >= 0) return;
    for (int i = 0; i < len; ++i) base[(len - 1 - i) * -inc] = copy[i];
  }
};

template <typename T>
Vec<T> ReadVector(const T* x, int len, int inc) {
  Vec<T> v(len);
  for (int i = 0; i < len; ++i) {
    v[i] = inc >= 0 ? x[static_cast<long>(i) * inc]
                    : x[static_cast<long>(len - 1 - i) * -inc];
  }
  return v;
}

template <typename T>
void Gemv(char trans, int m, int n, T alpha, const T* a, int lda, const T* x,
          int incx, T beta, T* y, int incy) {
  const bool no_trans = IsNoTrans(trans);
  const int leny = no_trans ? m : n;
  const int lenx = no_trans ? n : m;
  if (leny <= 0) return;
  StridedVector<T> ys(y, leny, incy, /*read=*/beta != T(0));
  VecMap<T> yv = ys.Map();
  Scale(yv, beta);
  if (alpha != T(0) && lenx > 0) {
    const Vec<T> xv = ReadVector(x, lenx, incx);
    const ConstMatMap<T> am = ConstMatrix(a, m, n, lda);
    if (no_trans) {
      yv.noalias() += alpha * am * xv;
    } else {
      yv.noalias() += alpha * am.transpose() * xv;
    }
  }
  ys.WriteBack();
}

template <typename T>
void Syrk(char uplo, char trans, int n, int k, T alpha, const T* a, int lda,
          T beta, T* c, int ldc) {
  if (n <= 0) return;
  MatMap<T> cm = Matrix(c, n, n, ldc);
  const bool lower = IsLowerChar(uplo);
  if (lower) {
    Scale(cm.template triangularView<Eigen::Lower>(), beta);
  } else {
    Scale(cm.template triangularView<Eigen::Upper>(), beta);
  }
  if (alpha == T(0) || k <= 0) return;
  const bool no_trans = IsNoTrans(trans);
  const ConstMatMap<T> am =
      ConstMatrix(a, no_trans ? n : k, no_trans ? k : n, lda);
  if (lower && no_trans) {
    cm.template selfadjointView<Eigen::Lower>().rankUpdate(am, alpha);
  } else if (lower) {
    cm.template selfadjointView<Eigen::Lower>().rankUpdate(am.transpose(),
                                                           alpha);
  } else if (no_trans) {
    cm.template selfadjointView<Eigen::Upper>().rankUpdate(am, alpha);
  } else {
    cm.template selfadjointView<Eigen::Upper>().rankUpdate(am.transpose(),
                                                           alpha);
  }
}

template <typename T>
void Symm(char side, char uplo, int m, int n, T alpha, const T* a, int lda,
          const T* b, int ldb, T beta, T* c, int ldc) {
  if (m <= 0 || n <= 0) return;
  MatMap<T> cm = Matrix(c, m, n, ldc);
  Scale(cm, beta);
  if (alpha == T(0)) return;
  const bool left = IsLeftSide(side);
  const int na = left ? m : n;
  const ConstMatMap<T> am = ConstMatrix(a, na, na, lda);
  const ConstMatMap<T> bm = ConstMatrix(b, m, n, ldb);
  const bool lower = IsLowerChar(uplo);
  if (left && lower) {
    cm.noalias() += alpha * (am.template selfadjointView<Eigen::Lower>() * bm);
  } else if (left) {
    cm.noalias() += alpha * (am.template selfadjointView<Eigen::Upper>() * bm);
  } else if (lower) {
    cm.noalias() += alpha * (bm * am.template selfadjointView<Eigen::Lower>());
  } else {
    cm.noalias() += alpha * (bm * am.template selfadjointView<Eigen::Upper>());
  }
}

template <typename T>
void Symv(char uplo, int n, T alpha, const T* a, int lda, const T* x, int incx,
          T beta, T* y, int incy) {
  if (n <= 0) return;
  StridedVector<T> ys(y, n, incy, /*read=*/beta != T(0));
  VecMap<T> yv = ys.Map();
  Scale(yv, beta);
  if (alpha != T(0)) {
    const Vec<T> xv = ReadVector(x, n, incx);
    const ConstMatMap<T> am = ConstMatrix(a, n, n, lda);
    if (IsLowerChar(uplo)) {
      yv.noalias() +=
          alpha * (am.template selfadjointView<Eigen::Lower>() * xv);
    } else {
      yv.noalias() +=
          alpha * (am.template selfadjointView<Eigen::Upper>() * xv);
    }
  }
  ys.WriteBack();
}

// op(A) as a triangular view: Mode is A's stored triangle (and UnitDiag);
// a transposed view stores the other triangle.
template <int Mode, typename T, typename Fn>
void WithTriangle(const ConstMatMap<T>& am, bool no_trans, Fn&& fn) {
  if (no_trans) {
    fn(am.template triangularView<Mode>());
  } else {
    constexpr int kFlipped =
        ((Mode & Eigen::Lower) ? Eigen::Upper : Eigen::Lower) |
        (Mode & Eigen::UnitDiag);
    fn(am.transpose().template triangularView<kFlipped>());
  }
}

template <typename T, typename Fn>
void WithTriangleMode(const ConstMatMap<T>& am, char uplo, char transa,
                      char diag, Fn&& fn) {
  const bool no_trans = IsNoTrans(transa);
  if (IsLowerChar(uplo)) {
    if (IsUnitDiag(diag)) {
      WithTriangle<Eigen::UnitLower>(am, no_trans, fn);
    } else {
      WithTriangle<Eigen::Lower>(am, no_trans, fn);
    }
  } else if (IsUnitDiag(diag)) {
    WithTriangle<Eigen::UnitUpper>(am, no_trans, fn);
  } else {
    WithTriangle<Eigen::Upper>(am, no_trans, fn);
  }
}

template <typename T>
void Trsm(char side, char uplo, char transa, char diag, int m, int n, T alpha,
          const T* a, int lda, T* b, int ldb) {
  if (m <= 0 || n <= 0) return;
  MatMap<T> bm = Matrix(b, m, n, ldb);
  Scale(bm, alpha);
  if (alpha == T(0)) return;
  const bool left = IsLeftSide(side);
  const int na = left ? m : n;
  const ConstMatMap<T> am = ConstMatrix(a, na, na, lda);
  WithTriangleMode(am, uplo, transa, diag, [&](const auto& tri) {
    if (left) {
      tri.template solveInPlace<Eigen::OnTheLeft>(bm);
    } else {
      tri.template solveInPlace<Eigen::OnTheRight>(bm);
    }
  });
}

template <typename T>
void Trmm(char side, char uplo, char transa, char diag, int m, int n, T alpha,
          const T* a, int lda, T* b, int ldb) {
  if (m <= 0 || n <= 0) return;
  MatMap<T> bm = Matrix(b, m, n, ldb);
  if (alpha == T(0)) {
    bm.setZero();
    return;
  }
  const bool left = IsLeftSide(side);
  const int na = left ? m : n;
  const ConstMatMap<T> am = ConstMatrix(a, na, na, lda);
  Mat<T> product(m, n);
  WithTriangleMode(am, uplo, transa, diag, [&](const auto& tri) {
    if (left) {
      product.noalias() = tri * bm;
    } else {
      product.noalias() = bm * tri;
    }
  });
  bm = alpha * product;
}

template <typename T>
void Trmv(char uplo, char trans, char diag, int n, const T* a, int lda, T* x,
          int incx) {
  if (n <= 0) return;
  StridedVector<T> xs(x, n, incx, /*read=*/true);
  VecMap<T> xv = xs.Map();
  const Vec<T> input = xv;
  const ConstMatMap<T> am = ConstMatrix(a, n, n, lda);
  WithTriangleMode(am, uplo, trans, diag,
                   [&](const auto& tri) { xv.noalias() = tri * input; });
  xs.WriteBack();
}

template <typename T>
void Axpy(int n, T alpha, const T* x, int incx, T* y, int incy) {
  if (n <= 0 || alpha == T(0)) return;
  StridedVector<T> ys(y, n, incy, /*read=*/true);
  VecMap<T> yv = ys.Map();
  yv += alpha * ReadVector(x, n, incx);
  ys.WriteBack();
}

template <typename T>
constexpr BlasRoutines<T> Routines() {
  return {&Gemm<T>, &Gemv<T>, &Syrk<T>, &Symm<T>, &Symv<T>,
          &Trsm<T>, &Trmm<T>, &Axpy<T>, &Trmv<T>};
}

}  // namespace

const KernelTable& Table() {
  static const KernelTable* table = [] {
    // Eigen sizes its GEMM blocks from the caches cpuid reports, and the
    // blocking decides the order of every sum. Fixed sizes make a level's
    // results the same on every machine, not only on every thread count.
    Eigen::setCpuCacheSizes(32 * 1024, 1024 * 1024, 32 * 1024 * 1024);
    return new KernelTable{QUANT_KERNEL_LEVEL, Routines<float>(),
                           Routines<double>()};
  }();
  return *table;
}

}  // namespace quant::kernels::QUANT_KERNEL_NS

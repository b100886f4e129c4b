// Plain reference BLAS: the netlib definitions written as loops, every sum
// in double. The kernels of every level are tested against it.
#ifndef QUANT_TESTS_KERNELS_REFERENCE_BLAS_H_
#define QUANT_TESTS_KERNELS_REFERENCE_BLAS_H_

#include <cstdint>

namespace quant::kernels::testing {

// Element (i, j) of a column-major matrix with leading dimension ld.
template <typename T>
T& At(T* p, int ld, int i, int j) {
  return p[static_cast<int64_t>(j) * ld + i];
}
template <typename T>
const T& At(const T* p, int ld, int i, int j) {
  return p[static_cast<int64_t>(j) * ld + i];
}

// op(A)(i, j) for transa 'N' or 'T'.
template <typename T>
double OpAt(const T* a, int lda, char trans, int i, int j) {
  return trans == 'N' ? At(a, lda, i, j) : At(a, lda, j, i);
}

// A triangular matrix's element (i, j) as the routine sees it: zero outside
// `uplo`'s triangle, one on a unit diagonal.
template <typename T>
double TriangleAt(const T* a, int lda, char uplo, char diag, int i, int j) {
  if (i == j) return diag == 'U' ? 1.0 : At(a, lda, i, i);
  const bool stored = uplo == 'L' ? i > j : i < j;
  return stored ? At(a, lda, i, j) : 0.0;
}

template <typename T>
double SymmetricAt(const T* a, int lda, char uplo, int i, int j) {
  const bool stored = uplo == 'L' ? i >= j : i <= j;
  return stored ? At(a, lda, i, j) : At(a, lda, j, i);
}

// The x of a level-2 routine: BLAS walks a negative increment from the end.
template <typename T>
T& Element(T* x, int n, int inc, int i) {
  return inc > 0 ? x[static_cast<int64_t>(i) * inc]
                 : x[static_cast<int64_t>(n - 1 - i) * -inc];
}
template <typename T>
const T& Element(const T* x, int n, int inc, int i) {
  return inc > 0 ? x[static_cast<int64_t>(i) * inc]
                 : x[static_cast<int64_t>(n - 1 - i) * -inc];
}

template <typename T>
void RefGemm(char transa, char transb, int m, int n, int k, T alpha, const T* a,
             int lda, const T* b, int ldb, T beta, T* c, int ldc) {
  for (int j = 0; j < n; ++j) {
    for (int i = 0; i < m; ++i) {
      double sum = 0;
      for (int p = 0; p < k; ++p) {
        sum += OpAt(a, lda, transa, i, p) * OpAt(b, ldb, transb, p, j);
      }
      double old = beta == T(0) ? 0.0 : beta * double(At(c, ldc, i, j));
      At(c, ldc, i, j) = static_cast<T>(alpha * sum + old);
    }
  }
}

template <typename T>
void RefGemv(char trans, int m, int n, T alpha, const T* a, int lda, const T* x,
             int incx, T beta, T* y, int incy) {
  const int leny = trans == 'N' ? m : n;
  const int lenx = trans == 'N' ? n : m;
  for (int i = 0; i < leny; ++i) {
    double sum = 0;
    for (int p = 0; p < lenx; ++p) {
      const double aip = trans == 'N' ? At(a, lda, i, p) : At(a, lda, p, i);
      sum += aip * Element(x, lenx, incx, p);
    }
    T& yi = Element(y, leny, incy, i);
    const double old = beta == T(0) ? 0.0 : beta * double(yi);
    yi = static_cast<T>(alpha * sum + old);
  }
}

template <typename T>
void RefSyrk(char uplo, char trans, int n, int k, T alpha, const T* a, int lda,
             T beta, T* c, int ldc) {
  for (int j = 0; j < n; ++j) {
    for (int i = 0; i < n; ++i) {
      if (uplo == 'L' ? i < j : i > j) continue;
      double sum = 0;
      for (int p = 0; p < k; ++p) {
        sum += OpAt(a, lda, trans, i, p) * OpAt(a, lda, trans, j, p);
      }
      const double old = beta == T(0) ? 0.0 : beta * double(At(c, ldc, i, j));
      At(c, ldc, i, j) = static_cast<T>(alpha * sum + old);
    }
  }
}

template <typename T>
void RefSymm(char side, char uplo, int m, int n, T alpha, const T* a, int lda,
             const T* b, int ldb, T beta, T* c, int ldc) {
  for (int j = 0; j < n; ++j) {
    for (int i = 0; i < m; ++i) {
      double sum = 0;
      if (side == 'L') {
        for (int p = 0; p < m; ++p) {
          sum += SymmetricAt(a, lda, uplo, i, p) * At(b, ldb, p, j);
        }
      } else {
        for (int p = 0; p < n; ++p) {
          sum += At(b, ldb, i, p) * SymmetricAt(a, lda, uplo, p, j);
        }
      }
      const double old = beta == T(0) ? 0.0 : beta * double(At(c, ldc, i, j));
      At(c, ldc, i, j) = static_cast<T>(alpha * sum + old);
    }
  }
}

template <typename T>
void RefSymv(char uplo, int n, T alpha, const T* a, int lda, const T* x,
             int incx, T beta, T* y, int incy) {
  for (int i = 0; i < n; ++i) {
    double sum = 0;
    for (int p = 0; p < n; ++p) {
      sum += SymmetricAt(a, lda, uplo, i, p) * Element(x, n, incx, p);
    }
    T& yi = Element(y, n, incy, i);
    const double old = beta == T(0) ? 0.0 : beta * double(yi);
    yi = static_cast<T>(alpha * sum + old);
  }
}

// op(A)(i, j) of a triangular A.
template <typename T>
double OpTriangleAt(const T* a, int lda, char uplo, char trans, char diag,
                    int i, int j) {
  return trans == 'N' ? TriangleAt(a, lda, uplo, diag, i, j)
                      : TriangleAt(a, lda, uplo, diag, j, i);
}

template <typename T>
void RefTrmm(char side, char uplo, char transa, char diag, int m, int n,
             T alpha, const T* a, int lda, T* b, int ldb) {
  const int na = side == 'L' ? m : n;
  // A copy of B, then B := alpha·op(A)·B or alpha·B·op(A).
  double* copy = new double[static_cast<size_t>(m) * n];
  for (int j = 0; j < n; ++j) {
    for (int i = 0; i < m; ++i) copy[j * m + i] = At(b, ldb, i, j);
  }
  for (int j = 0; j < n; ++j) {
    for (int i = 0; i < m; ++i) {
      double sum = 0;
      for (int p = 0; p < na; ++p) {
        sum += side == 'L' ? OpTriangleAt(a, lda, uplo, transa, diag, i, p) *
                                 copy[j * m + p]
                           : copy[p * m + i] *
                                 OpTriangleAt(a, lda, uplo, transa, diag, p, j);
      }
      At(b, ldb, i, j) = static_cast<T>(alpha * sum);
    }
  }
  delete[] copy;
}

template <typename T>
void RefTrmv(char uplo, char trans, char diag, int n, const T* a, int lda, T* x,
             int incx) {
  double* copy = new double[static_cast<size_t>(n)];
  for (int i = 0; i < n; ++i) copy[i] = Element(x, n, incx, i);
  for (int i = 0; i < n; ++i) {
    double sum = 0;
    for (int p = 0; p < n; ++p) {
      sum += OpTriangleAt(a, lda, uplo, trans, diag, i, p) * copy[p];
    }
    Element(x, n, incx, i) = static_cast<T>(sum);
  }
  delete[] copy;
}

template <typename T>
void RefAxpy(int n, T alpha, const T* x, int incx, T* y, int incy) {
  for (int i = 0; i < n; ++i) {
    T& yi = Element(y, n, incy, i);
    yi = static_cast<T>(double(yi) + alpha * double(Element(x, n, incx, i)));
  }
}

}  // namespace quant::kernels::testing

#endif  // QUANT_TESTS_KERNELS_REFERENCE_BLAS_H_

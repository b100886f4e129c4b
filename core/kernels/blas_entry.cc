// The BLAS routines Eigen's BLAS backend calls (EIGEN_USE_BLAS), forwarded
// to the current level's kernels.
//
// Every target of the project compiles with EIGEN_USE_BLAS and with the
// routine names renamed (sgemm_ -> quant_blas_sgemm, ...; the list is
// QUANT_BLAS_RENAMES in core/kernels/CMakeLists.txt), so Eigen's large
// products land here and no symbol clashes with a system BLAS. Including
// Eigen's own declarations makes the compiler check these definitions
// against the signatures Eigen calls.
#include <Eigen/src/misc/blas.h>

#include "core/kernels/dispatch.h"

namespace {

using quant::kernels::CurrentKernels;

}  // namespace

extern "C" {

#define QUANT_BLAS_ENTRIES(T, P)                                               \
  int P##gemm_(const char* transa, const char* transb, const int* m,           \
               const int* n, const int* k, const T* alpha, const T* a,         \
               const int* lda, const T* b, const int* ldb, const T* beta,      \
               T* c, const int* ldc) {                                         \
    CurrentKernels().P.gemm(*transa, *transb, *m, *n, *k, *alpha, a, *lda, b,  \
                            *ldb, *beta, c, *ldc);                             \
    return 0;                                                                  \
  }                                                                            \
  int P##gemv_(const char* trans, const int* m, const int* n, const T* alpha,  \
               const T* a, const int* lda, const T* x, const int* incx,        \
               const T* beta, T* y, const int* incy) {                         \
    CurrentKernels().P.gemv(*trans, *m, *n, *alpha, a, *lda, x, *incx, *beta,  \
                            y, *incy);                                         \
    return 0;                                                                  \
  }                                                                            \
  int P##syrk_(const char* uplo, const char* trans, const int* n,              \
               const int* k, const T* alpha, const T* a, const int* lda,       \
               const T* beta, T* c, const int* ldc) {                          \
    CurrentKernels().P.syrk(*uplo, *trans, *n, *k, *alpha, a, *lda, *beta, c,  \
                            *ldc);                                             \
    return 0;                                                                  \
  }                                                                            \
  int P##symm_(const char* side, const char* uplo, const int* m, const int* n, \
               const T* alpha, const T* a, const int* lda, const T* b,         \
               const int* ldb, const T* beta, T* c, const int* ldc) {          \
    CurrentKernels().P.symm(*side, *uplo, *m, *n, *alpha, a, *lda, b, *ldb,    \
                            *beta, c, *ldc);                                   \
    return 0;                                                                  \
  }                                                                            \
  int P##symv_(const char* uplo, const int* n, const T* alpha, const T* a,     \
               const int* lda, const T* x, const int* incx, const T* beta,     \
               T* y, const int* incy) {                                        \
    CurrentKernels().P.symv(*uplo, *n, *alpha, a, *lda, x, *incx, *beta, y,    \
                            *incy);                                            \
    return 0;                                                                  \
  }                                                                            \
  int P##trsm_(const char* side, const char* uplo, const char* transa,         \
               const char* diag, const int* m, const int* n, const T* alpha,   \
               const T* a, const int* lda, T* b, const int* ldb) {             \
    CurrentKernels().P.trsm(*side, *uplo, *transa, *diag, *m, *n, *alpha, a,   \
                            *lda, b, *ldb);                                    \
    return 0;                                                                  \
  }                                                                            \
  int P##trmm_(const char* side, const char* uplo, const char* transa,         \
               const char* diag, const int* m, const int* n, const T* alpha,   \
               const T* a, const int* lda, T* b, const int* ldb) {             \
    CurrentKernels().P.trmm(*side, *uplo, *transa, *diag, *m, *n, *alpha, a,   \
                            *lda, b, *ldb);                                    \
    return 0;                                                                  \
  }                                                                            \
  int P##axpy_(const int* n, const T* alpha, const T* x, const int* incx,      \
               T* y, const int* incy) {                                        \
    CurrentKernels().P.axpy(*n, *alpha, x, *incx, y, *incy);                   \
    return 0;                                                                  \
  }                                                                            \
  int P##trmv_(const char* uplo, const char* trans, const char* diag,          \
               const int* n, const T* a, const int* lda, T* x,                 \
               const int* incx) {                                              \
    CurrentKernels().P.trmv(*uplo, *trans, *diag, *n, a, *lda, x, *incx);      \
    return 0;                                                                  \
  }

QUANT_BLAS_ENTRIES(float, s)
QUANT_BLAS_ENTRIES(double, d)

#undef QUANT_BLAS_ENTRIES

}  // extern "C"

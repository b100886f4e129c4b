// The dispatch table: one per instruction-set level compiled into the
// binary, each filled by that level's build of level_kernels.cc.
//
// The matrix routines follow the reference BLAS (netlib) definitions
// exactly: column-major operands, leading dimensions, 'N'/'T' (and 'C',
// the same as 'T' for real types), 'L'/'U', 'N'/'U' for the diagonal and
// 'L'/'R' for the side, arguments by value instead of Fortran pointers.
// Eigen calls them for every large product (EIGEN_USE_BLAS, see
// blas_entry.cc), so all of the project's matrix products run at the
// selected level. Increments must be non-zero.
#ifndef QUANT_CORE_KERNELS_KERNEL_TABLE_H_
#define QUANT_CORE_KERNELS_KERNEL_TABLE_H_

#include "core/kernels/isa.h"

namespace quant::kernels {

template <typename T>
struct BlasRoutines {
  // C := alpha·op(A)·op(B) + beta·C; op(A) is m x k, op(B) k x n.
  void (*gemm)(char transa, char transb, int m, int n, int k, T alpha,
               const T* a, int lda, const T* b, int ldb, T beta, T* c, int ldc);
  // y := alpha·op(A)·x + beta·y; A is m x n.
  void (*gemv)(char trans, int m, int n, T alpha, const T* a, int lda,
               const T* x, int incx, T beta, T* y, int incy);
  // The uplo triangle of C (n x n) := alpha·op(A)·op(A)ᵀ + beta·C; op(A) is
  // n x k ('N') or A is k x n ('T').
  void (*syrk)(char uplo, char trans, int n, int k, T alpha, const T* a,
               int lda, T beta, T* c, int ldc);
  // C := alpha·A·B + beta·C ('L') or alpha·B·A + beta·C ('R'), A symmetric,
  // stored in its uplo triangle; C and B are m x n.
  void (*symm)(char side, char uplo, int m, int n, T alpha, const T* a, int lda,
               const T* b, int ldb, T beta, T* c, int ldc);
  // y := alpha·A·x + beta·y, A symmetric n x n stored in its uplo triangle.
  void (*symv)(char uplo, int n, T alpha, const T* a, int lda, const T* x,
               int incx, T beta, T* y, int incy);
  // B := alpha·op(A)⁻¹·B ('L') or alpha·B·op(A)⁻¹ ('R'), A triangular;
  // B is m x n.
  void (*trsm)(char side, char uplo, char transa, char diag, int m, int n,
               T alpha, const T* a, int lda, T* b, int ldb);
  // B := alpha·op(A)·B ('L') or alpha·B·op(A) ('R'), A triangular.
  void (*trmm)(char side, char uplo, char transa, char diag, int m, int n,
               T alpha, const T* a, int lda, T* b, int ldb);
  // y := alpha·x + y for vectors of n elements.
  void (*axpy)(int n, T alpha, const T* x, int incx, T* y, int incy);
  // x := op(A)·x, A triangular n x n.
  void (*trmv)(char uplo, char trans, char diag, int n, const T* a, int lda,
               T* x, int incx);
};

struct KernelTable {
  IsaLevel level;
  BlasRoutines<float> s;
  BlasRoutines<double> d;
};

// Each compiled level's table, defined in that level's level_kernels.cc.
#if defined(__x86_64__)
namespace isa_v2 {
const KernelTable& Table();
}
namespace isa_v3 {
const KernelTable& Table();
}
namespace isa_v4 {
const KernelTable& Table();
}
#else
namespace isa_baseline {
const KernelTable& Table();
}
#endif

}  // namespace quant::kernels

#endif  // QUANT_CORE_KERNELS_KERNEL_TABLE_H_

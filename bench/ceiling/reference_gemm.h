// The machine's real SGEMM ceiling, measured beside the project's kernels
// in the same run: Eigen compiled for this very CPU (-march=native, its own
// namespace so nothing else links against it) and, when installed,
// OpenBLAS (Debian's libopenblas0-serial), whose kernels are chosen for the
// CPU at run time. Neither is the project's own build of its kernels.
#ifndef QUANT_BENCH_CEILING_REFERENCE_GEMM_H_
#define QUANT_BENCH_CEILING_REFERENCE_GEMM_H_

#include <string>

namespace quant::bench {

// Row-major C[m, n] = A[m, k] · B[k, n], single-threaded.
using RowMajorSgemm = void (*)(int m, int n, int k, const float* a,
                               const float* b, float* c);

// Eigen built with -march=native; null when the compiler could not target
// this CPU (the build then leaves the row out).
RowMajorSgemm NativeEigenSgemm();
// What -march=native enabled ("AVX-512" / "AVX2+FMA" / "SSE"), for the table.
std::string NativeEigenDescription();

// OpenBLAS's cblas_sgemm, loaded with dlopen, pinned to one thread; null
// when libopenblas.so.0 is not installed. `core` gets the kernel family
// OpenBLAS chose for this CPU (e.g. "SkylakeX").
RowMajorSgemm OpenBlasSgemm(std::string* core);

}  // namespace quant::bench

#endif  // QUANT_BENCH_CEILING_REFERENCE_GEMM_H_

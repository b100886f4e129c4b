// OpenBLAS's SGEMM through dlopen: no link-time dependency (the benchmarks
// build and run without it), and its symbols never meet the project's own
// BLAS entry points.
#include <dlfcn.h>

#include <string>

#include "bench/ceiling/reference_gemm.h"

namespace quant::bench {
namespace {

// cblas.h's enums, as the C ABI passes them.
constexpr int kCblasRowMajor = 101;
constexpr int kCblasNoTrans = 111;

using CblasSgemm = void (*)(int order, int transa, int transb, int m, int n,
                            int k, float alpha, const float* a, int lda,
                            const float* b, int ldb, float beta, float* c,
                            int ldc);
CblasSgemm cblas_sgemm = nullptr;

void Sgemm(int m, int n, int k, const float* a, const float* b, float* c) {
  cblas_sgemm(kCblasRowMajor, kCblasNoTrans, kCblasNoTrans, m, n, k, 1.0f, a, k,
              b, n, 0.0f, c, n);
}

}  // namespace

RowMajorSgemm OpenBlasSgemm(std::string* core) {
  static void* library = [] {
    for (const char* name :
         {"libopenblas.so.0",
          "/usr/lib/x86_64-linux-gnu/openblas-serial/libopenblas.so.0",
          "/usr/lib/aarch64-linux-gnu/openblas-serial/libopenblas.so.0"}) {
      if (void* handle = dlopen(name, RTLD_NOW | RTLD_LOCAL)) return handle;
    }
    return static_cast<void*>(nullptr);
  }();
  if (library == nullptr) return nullptr;
  cblas_sgemm = reinterpret_cast<CblasSgemm>(dlsym(library, "cblas_sgemm"));
  if (cblas_sgemm == nullptr) return nullptr;
  if (auto set_threads = reinterpret_cast<void (*)(int)>(
          dlsym(library, "openblas_set_num_threads"))) {
    set_threads(1);
  }
  if (core != nullptr) {
    auto corename =
        reinterpret_cast<char* (*)()>(dlsym(library, "openblas_get_corename"));
    *core = corename != nullptr ? corename() : "unknown";
  }
  return &Sgemm;
}

}  // namespace quant::bench

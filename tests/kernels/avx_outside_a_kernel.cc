// A program with AVX code outside any kernel level: level_symbols_test.sh
// must reject it (ctest expects that run to fail), which shows the check
// can fail at all.
#include <immintrin.h>

#include <cstdio>

int main(int argc, char**) {
  const __m256 a = _mm256_set1_ps(static_cast<float>(argc));
  float out[8];
  _mm256_storeu_ps(out, _mm256_add_ps(a, a));
  std::printf("%f\n", out[0]);
  return 0;
}

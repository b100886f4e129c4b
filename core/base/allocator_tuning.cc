// glibc allocator settings for large, short-lived matrices.
#include "core/base/allocator_tuning.h"

#include <cstdlib>
#include <cstring>

#if defined(__GLIBC__)
#include <malloc.h>
#include <unistd.h>
#endif

namespace quant {
namespace {

#if defined(__GLIBC__)
// True when the user tunes the allocator through the environment.
bool EnvironmentTunesAllocator() {
  if (std::getenv("GLIBC_TUNABLES") != nullptr) return true;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    if (std::strncmp(*entry, "MALLOC_", 7) == 0) return true;
  }
  return false;
}
#endif

}  // namespace

std::string TuneAllocatorForLargeMatrices() {
#if defined(__GLIBC__)
  if (EnvironmentTunesAllocator()) return "left to the environment";
  // No mmap for any size: freed matrices stay in the heap for the next one.
  // A trim threshold at the maximum keeps free() from giving the top of the
  // heap back after every matrix; ReleaseFreeMemory() trims between tasks.
  // Both together matter: without mmap but with trimming, the heap is
  // shrunk and regrown on every matrix and the job runs 2.5x slower.
  const bool ok =
      mallopt(M_MMAP_MAX, 0) == 1 && mallopt(M_TRIM_THRESHOLD, 0x7fffffff) == 1;
  return ok ? "heap (no mmap, no trim)" : "glibc defaults (mallopt failed)";
#else
  return "not glibc";
#endif
}

void ReleaseFreeMemory() {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

}  // namespace quant

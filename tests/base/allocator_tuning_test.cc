// Tests that the allocator tuning keeps large matrices in the heap: after
// it, a 64 MiB allocation is not an mmap of its own, so freeing and
// allocating it again does not fault its pages in afresh.
#include "core/base/allocator_tuning.h"

#include <cstdlib>
#include <cstring>

#include "gtest/gtest.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace quant {
namespace {

// ASan and TSan replace glibc's allocator, so mallopt and mallinfo2 say
// nothing about the memory the program gets.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define QUANT_SANITIZER_ALLOCATOR 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define QUANT_SANITIZER_ALLOCATOR 1
#endif
#endif

#if defined(__GLIBC__) && !defined(QUANT_SANITIZER_ALLOCATOR)
TEST(AllocatorTuningTest, LargeAllocationsComeFromTheHeap) {
  const std::string how = TuneAllocatorForLargeMatrices();
  if (how == "left to the environment") {
    GTEST_SKIP() << "GLIBC_TUNABLES or MALLOC_* is set: the environment "
                    "tunes the allocator";
  }
  EXPECT_EQ(how, "heap (no mmap, no trim)");
  const size_t before = mallinfo2().hblkhd;
  const size_t bytes = size_t{64} << 20;
  void* block = std::malloc(bytes);
  ASSERT_NE(block, nullptr);
  std::memset(block, 1, bytes);
  // glibc's default serves this with mmap (hblkhd grows by 64 MiB).
  EXPECT_EQ(mallinfo2().hblkhd, before);
  std::free(block);
  // Kept for the next matrix rather than trimmed at free.
  EXPECT_GE(mallinfo2().fordblks, bytes);
  ReleaseFreeMemory();
  EXPECT_LT(mallinfo2().fordblks, bytes);
}
#else
TEST(AllocatorTuningTest, LargeAllocationsComeFromTheHeap) {
  GTEST_SKIP() << "not glibc's allocator (or a sanitizer's replaces it)";
}
#endif

}  // namespace
}  // namespace quant

// Tunes glibc's allocator for the numerical work: a quantization job
// allocates and frees matrices of tens of megabytes thousands of times.
// glibc serves each with a fresh mmap and returns it with munmap, so every
// allocation faults its pages in again (a 2-layer job measured 872k minor
// faults and 7 s of system time on one thread). Keeping freed memory in the
// heap instead cuts the job's time by a quarter for ~10% more resident memory
// (docs/PERFORMANCE.md, "The allocator").
#ifndef QUANT_CORE_BASE_ALLOCATOR_TUNING_H_
#define QUANT_CORE_BASE_ALLOCATOR_TUNING_H_

#include <string>

namespace quant {

// Serves large allocations from the heap and never trims it on free, unless
// the environment already tunes glibc's allocator (GLIBC_TUNABLES or a
// MALLOC_* variable), which then wins. Returns what it did, for the
// process's start line: "heap (no mmap, no trim)", "left to the environment"
// or "not glibc". Call once, first thing in main.
std::string TuneAllocatorForLargeMatrices();

// Hands memory freed since the last call back to the system (between tasks
// of a long-lived worker, so an idle worker does not hold a job's peak).
void ReleaseFreeMemory();

}  // namespace quant

#endif  // QUANT_CORE_BASE_ALLOCATOR_TUNING_H_

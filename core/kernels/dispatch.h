// Which level's kernels run: chosen once per process at start, and
// overridable per thread for a task that must run at its job's level.
//
// A program calls InitProcessIsa(flag) first thing: the flag's value
// ("auto", "v2", "v3", "v4"), else the QUANT_ISA environment variable, else
// auto, which is the highest level compiled in that the CPU supports. A
// level the CPU lacks is an error naming the missing features. Code that
// never calls it (tests, library users) gets the same resolution lazily at
// the first kernel call; an invalid QUANT_ISA then aborts with its message.
//
// The current level is the calling thread's override (ScopedIsa) if set,
// else the process level. ThreadPool (core/base/thread_pool.h) runs every
// iteration of a loop at the level of the thread that started it, so a
// task's work on many threads stays at one level.
#ifndef QUANT_CORE_KERNELS_DISPATCH_H_
#define QUANT_CORE_KERNELS_DISPATCH_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/kernels/isa.h"
#include "core/kernels/kernel_table.h"

namespace quant::kernels {

// The environment variable read when no flag value is given.
inline constexpr char kIsaEnvironmentVariable[] = "QUANT_ISA";

// Resolves a requested level: `flag_value` if not empty, else QUANT_ISA if
// set and not empty, else "auto". InvalidArgument for an unknown name or a
// level this CPU (or this build) cannot run; the message names where the
// request came from (`flag_name`=value or QUANT_ISA=value) and what is
// missing.
absl::StatusOr<IsaLevel> ResolveIsa(absl::string_view flag_value,
                                    absl::string_view flag_name = "--isa");

// ResolveIsa for a CPU with `cpu` and QUANT_ISA's value `environment` (null
// when unset): the logic, without reading the machine.
absl::StatusOr<IsaLevel> ResolveIsaFor(const CpuFeatures& cpu,
                                       const char* environment,
                                       absl::string_view flag_value,
                                       absl::string_view flag_name);

// The highest compiled level the CPU supports; FailedPrecondition on an
// x86 CPU below x86-64-v2.
absl::StatusOr<IsaLevel> BestSupportedIsa();

// Whether this binary has the level and this CPU can run it.
bool CanRun(IsaLevel level);

// ResolveIsa, then makes the result the process level.
absl::Status InitProcessIsa(absl::string_view flag_value,
                            absl::string_view flag_name = "--isa");
// Sets the process level; FailedPrecondition if this CPU cannot run it.
absl::Status SetProcessIsa(IsaLevel level);
IsaLevel ProcessIsa();

// The level kernels run at on this thread.
IsaLevel CurrentIsa();
const KernelTable& CurrentKernels();
// A compiled level's table (the level must be in CompiledLevels()).
const KernelTable& KernelsFor(IsaLevel level);

// Runs this thread's kernels at `level` for the guard's lifetime (nested
// guards restore the previous level). The caller checks CanRun(level)
// first; a level this CPU cannot run aborts with a message.
class ScopedIsa {
 public:
  explicit ScopedIsa(IsaLevel level);
  ~ScopedIsa();
  ScopedIsa(const ScopedIsa&) = delete;
  ScopedIsa& operator=(const ScopedIsa&) = delete;

 private:
  const KernelTable* saved_;
};

// The calling thread's override table (null when it has none), and setting
// it: for thread pools handing a loop's level to their helper threads.
const KernelTable* ThreadOverride();
void SetThreadOverride(const KernelTable* table);

// "v4: x86-64-v4 (AVX-512); this CPU supports v2, v3, v4": for the lines
// programs print at start.
std::string DescribeIsa(IsaLevel level);

}  // namespace quant::kernels

#endif  // QUANT_CORE_KERNELS_DISPATCH_H_

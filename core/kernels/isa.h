// Instruction-set levels the numerical kernels are built for, and what the
// CPU this process runs on supports.
//
// On x86-64 the kernels are compiled once per micro-architecture level of
// the psABI: x86-64-v2 (SSE4.2, the floor), x86-64-v3 (AVX2 + FMA) and
// x86-64-v4 (AVX-512 F/BW/CD/DQ/VL). Other architectures build one level,
// `baseline`, with the compiler's default flags.
#ifndef QUANT_CORE_KERNELS_ISA_H_
#define QUANT_CORE_KERNELS_ISA_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace quant::kernels {

enum class IsaLevel : int {
  kBaseline = 0,  // non-x86 builds only
  kV2 = 2,
  kV3 = 3,
  kV4 = 4,
};

// "v2", "v3", "v4" or "baseline": the name flags, QUANT_ISA, the manifest
// and the service use.
absl::string_view IsaName(IsaLevel level);
// "x86-64-v4 (AVX-512)": for people.
absl::string_view IsaDescription(IsaLevel level);
// Inverse of IsaName; also takes "x86-64-v3" and any case. InvalidArgument
// naming the accepted values otherwise ("auto" is not a level: see
// dispatch.h).
absl::StatusOr<IsaLevel> ParseIsaName(absl::string_view name);

// What cpuid and xgetbv report, reduced to the features the levels need.
struct CpuFeatures {
  bool x86 = false;  // false on other architectures: only kBaseline runs
  // x86-64-v2
  bool cx16 = false, lahf = false, popcnt = false, sse3 = false, ssse3 = false,
       sse41 = false, sse42 = false;
  // x86-64-v3
  bool avx = false, avx2 = false, bmi1 = false, bmi2 = false, f16c = false,
       fma = false, lzcnt = false, movbe = false;
  bool os_saves_ymm = false;  // XCR0 has the SSE and AVX state bits
  // x86-64-v4
  bool avx512f = false, avx512bw = false, avx512cd = false, avx512dq = false,
       avx512vl = false;
  bool os_saves_zmm = false;  // XCR0 has the opmask and ZMM state bits
};

CpuFeatures DetectCpuFeatures();

// Whether a CPU with `features` can run code built for `level`: every
// feature of the level, and for v3/v4 the OS saving the wider registers.
bool Supports(const CpuFeatures& features, IsaLevel level);
// The features of `level` this CPU lacks ("AVX512BW, AVX512VL"); empty when
// it has them all.
std::string MissingFeatures(const CpuFeatures& features, IsaLevel level);

// Levels compiled into this binary, lowest first.
const std::vector<IsaLevel>& CompiledLevels();
// Compiled levels this CPU can run, lowest first (empty only on an x86 CPU
// below x86-64-v2).
std::vector<IsaLevel> SupportedLevels();

}  // namespace quant::kernels

#endif  // QUANT_CORE_KERNELS_ISA_H_

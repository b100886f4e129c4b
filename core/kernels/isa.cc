// CPU feature detection (cpuid, xgetbv) and the x86-64 level definitions.
#include "core/kernels/isa.h"

#include <cctype>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace quant::kernels {
namespace {

struct Requirement {
  const char* name;
  bool CpuFeatures::*flag;
};

// The psABI's level definitions (x86-64 psABI 1.0, section 3.1.1).
constexpr Requirement kV2Features[] = {
    {"CMPXCHG16B", &CpuFeatures::cx16}, {"LAHF-SAHF", &CpuFeatures::lahf},
    {"POPCNT", &CpuFeatures::popcnt},   {"SSE3", &CpuFeatures::sse3},
    {"SSSE3", &CpuFeatures::ssse3},     {"SSE4.1", &CpuFeatures::sse41},
    {"SSE4.2", &CpuFeatures::sse42},
};
constexpr Requirement kV3Features[] = {
    {"AVX", &CpuFeatures::avx},
    {"AVX2", &CpuFeatures::avx2},
    {"BMI1", &CpuFeatures::bmi1},
    {"BMI2", &CpuFeatures::bmi2},
    {"F16C", &CpuFeatures::f16c},
    {"FMA", &CpuFeatures::fma},
    {"LZCNT", &CpuFeatures::lzcnt},
    {"MOVBE", &CpuFeatures::movbe},
    {"OS support for AVX state (XCR0)", &CpuFeatures::os_saves_ymm},
};
constexpr Requirement kV4Features[] = {
    {"AVX512F", &CpuFeatures::avx512f},
    {"AVX512BW", &CpuFeatures::avx512bw},
    {"AVX512CD", &CpuFeatures::avx512cd},
    {"AVX512DQ", &CpuFeatures::avx512dq},
    {"AVX512VL", &CpuFeatures::avx512vl},
    {"OS support for AVX-512 state (XCR0)", &CpuFeatures::os_saves_zmm},
};

template <size_t N>
void AddMissing(const CpuFeatures& f, const Requirement (&list)[N],
                std::vector<std::string>* missing) {
  for (const Requirement& r : list) {
    if (!(f.*r.flag)) missing->push_back(r.name);
  }
}

std::vector<std::string> Missing(const CpuFeatures& f, IsaLevel level) {
  std::vector<std::string> missing;
  if (level == IsaLevel::kBaseline) {
    if (f.x86) missing.push_back("a non-x86 build");
    return missing;
  }
  if (!f.x86) {
    missing.push_back("an x86-64 CPU");
    return missing;
  }
  AddMissing(f, kV2Features, &missing);
  if (level >= IsaLevel::kV3) AddMissing(f, kV3Features, &missing);
  if (level >= IsaLevel::kV4) AddMissing(f, kV4Features, &missing);
  return missing;
}

}  // namespace

absl::string_view IsaName(IsaLevel level) {
  switch (level) {
    case IsaLevel::kBaseline:
      return "baseline";
    case IsaLevel::kV2:
      return "v2";
    case IsaLevel::kV3:
      return "v3";
    case IsaLevel::kV4:
      return "v4";
  }
  return "unknown";
}

absl::string_view IsaDescription(IsaLevel level) {
  switch (level) {
    case IsaLevel::kBaseline:
      return "baseline (the compiler's default for this architecture)";
    case IsaLevel::kV2:
      return "x86-64-v2 (SSE4.2)";
    case IsaLevel::kV3:
      return "x86-64-v3 (AVX2, FMA)";
    case IsaLevel::kV4:
      return "x86-64-v4 (AVX-512)";
  }
  return "unknown";
}

absl::StatusOr<IsaLevel> ParseIsaName(absl::string_view name) {
  std::string lower;
  for (char c : name) {
    lower.push_back(
        static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  }
  if (lower.rfind("x86-64-", 0) == 0) lower = lower.substr(7);
  for (IsaLevel level :
       {IsaLevel::kBaseline, IsaLevel::kV2, IsaLevel::kV3, IsaLevel::kV4}) {
    if (lower == IsaName(level)) return level;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown instruction-set level '", name,
                   "': expected auto, v2, v3, v4 or baseline"));
}

CpuFeatures DetectCpuFeatures() {
  CpuFeatures f;
#if defined(__x86_64__)
  f.x86 = true;
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  const unsigned max_leaf = static_cast<unsigned>(__get_cpuid_max(0, nullptr));
  if (max_leaf >= 1 && __get_cpuid(1, &eax, &ebx, &ecx, &edx)) {
    f.sse3 = ecx & (1u << 0);
    f.ssse3 = ecx & (1u << 9);
    f.fma = ecx & (1u << 12);
    f.cx16 = ecx & (1u << 13);
    f.sse41 = ecx & (1u << 19);
    f.sse42 = ecx & (1u << 20);
    f.movbe = ecx & (1u << 22);
    f.popcnt = ecx & (1u << 23);
    const bool osxsave = ecx & (1u << 27);
    f.avx = ecx & (1u << 28);
    f.f16c = ecx & (1u << 29);
    if (osxsave) {
      // xgetbv(0): which register states the OS saves on a context switch.
      unsigned lo = 0, hi = 0;
      __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
      f.os_saves_ymm = (lo & 0x6u) == 0x6u;
      f.os_saves_zmm = f.os_saves_ymm && (lo & 0xE0u) == 0xE0u;
    }
  }
  if (max_leaf >= 7) {
    __cpuid_count(7, 0, eax, ebx, ecx, edx);
    f.bmi1 = ebx & (1u << 3);
    f.avx2 = ebx & (1u << 5);
    f.bmi2 = ebx & (1u << 8);
    f.avx512f = ebx & (1u << 16);
    f.avx512dq = ebx & (1u << 17);
    f.avx512cd = ebx & (1u << 28);
    f.avx512bw = ebx & (1u << 30);
    f.avx512vl = ebx & (1u << 31);
  }
  if (static_cast<unsigned>(__get_cpuid_max(0x80000000u, nullptr)) >=
          0x80000001u &&
      __get_cpuid(0x80000001u, &eax, &ebx, &ecx, &edx)) {
    f.lahf = ecx & (1u << 0);
    f.lzcnt = ecx & (1u << 5);
  }
#endif
  return f;
}

bool Supports(const CpuFeatures& features, IsaLevel level) {
  return Missing(features, level).empty();
}

std::string MissingFeatures(const CpuFeatures& features, IsaLevel level) {
  return absl::StrJoin(Missing(features, level), ", ");
}

const std::vector<IsaLevel>& CompiledLevels() {
  static const std::vector<IsaLevel>* levels = new std::vector<IsaLevel> {
#if defined(__x86_64__)
    IsaLevel::kV2, IsaLevel::kV3, IsaLevel::kV4
#else
    IsaLevel::kBaseline
#endif
  };
  return *levels;
}

std::vector<IsaLevel> SupportedLevels() {
  const CpuFeatures features = DetectCpuFeatures();
  std::vector<IsaLevel> out;
  for (IsaLevel level : CompiledLevels()) {
    if (Supports(features, level)) out.push_back(level);
  }
  return out;
}

}  // namespace quant::kernels

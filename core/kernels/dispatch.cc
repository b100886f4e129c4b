// Process and thread kernel levels; see dispatch.h.
#include "core/kernels/dispatch.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace quant::kernels {
namespace {

std::atomic<const KernelTable*> process_table{nullptr};
thread_local const KernelTable* thread_table = nullptr;

std::string LevelList(const std::vector<IsaLevel>& levels) {
  std::vector<std::string> names;
  for (IsaLevel level : levels) names.emplace_back(IsaName(level));
  return names.empty() ? std::string("none") : absl::StrJoin(names, ", ");
}

bool IsCompiled(IsaLevel level) {
  for (IsaLevel compiled : CompiledLevels()) {
    if (compiled == level) return true;
  }
  return false;
}

[[noreturn]] void Die(const absl::Status& status) {
  std::fprintf(stderr, "quant kernels: %s\n",
               std::string(status.message()).c_str());
  std::abort();
}

// The process table, resolved from QUANT_ISA (or auto) on first use.
const KernelTable& ProcessTable() {
  const KernelTable* table = process_table.load(std::memory_order_acquire);
  if (table != nullptr) return *table;
  absl::StatusOr<IsaLevel> level = ResolveIsa("", "");
  if (!level.ok()) Die(level.status());
  const KernelTable* resolved = &KernelsFor(*level);
  const KernelTable* expected = nullptr;
  // A concurrent first use resolves the same level; keep whichever won.
  process_table.compare_exchange_strong(expected, resolved,
                                        std::memory_order_acq_rel);
  return *process_table.load(std::memory_order_acquire);
}

std::vector<IsaLevel> LevelsFor(const CpuFeatures& cpu) {
  std::vector<IsaLevel> out;
  for (IsaLevel level : CompiledLevels()) {
    if (Supports(cpu, level)) out.push_back(level);
  }
  return out;
}

absl::StatusOr<IsaLevel> BestFor(const CpuFeatures& cpu) {
  const std::vector<IsaLevel> supported = LevelsFor(cpu);
  if (supported.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "this CPU cannot run the lowest kernel level compiled in (",
        IsaDescription(CompiledLevels().front()), "): it lacks ",
        MissingFeatures(cpu, CompiledLevels().front())));
  }
  return supported.back();
}

}  // namespace

absl::StatusOr<IsaLevel> BestSupportedIsa() {
  return BestFor(DetectCpuFeatures());
}

bool CanRun(IsaLevel level) {
  return IsCompiled(level) && Supports(DetectCpuFeatures(), level);
}

absl::StatusOr<IsaLevel> ResolveIsaFor(const CpuFeatures& cpu,
                                       const char* environment,
                                       absl::string_view flag_value,
                                       absl::string_view flag_name) {
  std::string source;
  std::string value(flag_value);
  if (!value.empty()) {
    source = absl::StrCat(flag_name, "=", value);
  } else if (environment != nullptr && environment[0] != '\0') {
    value = environment;
    source = absl::StrCat(kIsaEnvironmentVariable, "=", value);
  } else {
    value = "auto";
  }
  if (value == "auto") {
    absl::StatusOr<IsaLevel> best = BestFor(cpu);
    if (!best.ok() && !source.empty()) {
      return absl::Status(best.status().code(),
                          absl::StrCat(source, ": ", best.status().message()));
    }
    return best;
  }
  absl::StatusOr<IsaLevel> level = ParseIsaName(value);
  if (!level.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": ", level.status().message()));
  }
  if (!IsCompiled(*level)) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": this build has no ", IsaName(*level),
                     " kernels (it has ", LevelList(CompiledLevels()), ")"));
  }
  if (!Supports(cpu, *level)) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": this CPU cannot run ", IsaDescription(*level),
                     ": it lacks ", MissingFeatures(cpu, *level),
                     " (it supports ", LevelList(LevelsFor(cpu)), ")"));
  }
  return *level;
}

absl::StatusOr<IsaLevel> ResolveIsa(absl::string_view flag_value,
                                    absl::string_view flag_name) {
  return ResolveIsaFor(DetectCpuFeatures(),
                       std::getenv(kIsaEnvironmentVariable), flag_value,
                       flag_name);
}

absl::Status InitProcessIsa(absl::string_view flag_value,
                            absl::string_view flag_name) {
  absl::StatusOr<IsaLevel> level = ResolveIsa(flag_value, flag_name);
  if (!level.ok()) return level.status();
  return SetProcessIsa(*level);
}

absl::Status SetProcessIsa(IsaLevel level) {
  if (!CanRun(level)) {
    return absl::FailedPreconditionError(
        absl::StrCat("kernel level ", IsaName(level),
                     " cannot run here (this CPU and build support ",
                     LevelList(SupportedLevels()), ")"));
  }
  process_table.store(&KernelsFor(level), std::memory_order_release);
  return absl::OkStatus();
}

IsaLevel ProcessIsa() { return ProcessTable().level; }

const KernelTable& CurrentKernels() {
  if (thread_table != nullptr) return *thread_table;
  return ProcessTable();
}

IsaLevel CurrentIsa() { return CurrentKernels().level; }

const KernelTable& KernelsFor(IsaLevel level) {
  switch (level) {
#if defined(__x86_64__)
    case IsaLevel::kV2:
      return isa_v2::Table();
    case IsaLevel::kV3:
      return isa_v3::Table();
    case IsaLevel::kV4:
      return isa_v4::Table();
#else
    case IsaLevel::kBaseline:
      return isa_baseline::Table();
#endif
    default:
      break;
  }
  Die(absl::InternalError(
      absl::StrCat("no kernels compiled for level ", IsaName(level))));
}

ScopedIsa::ScopedIsa(IsaLevel level) : saved_(thread_table) {
  if (!CanRun(level)) {
    Die(absl::FailedPreconditionError(
        absl::StrCat("ScopedIsa: this CPU cannot run ", IsaName(level))));
  }
  thread_table = &KernelsFor(level);
}

ScopedIsa::~ScopedIsa() { thread_table = saved_; }

const KernelTable* ThreadOverride() { return thread_table; }

void SetThreadOverride(const KernelTable* table) { thread_table = table; }

std::string DescribeIsa(IsaLevel level) {
  return absl::StrCat(IsaName(level), ": ", IsaDescription(level),
                      "; this CPU supports ", LevelList(SupportedLevels()));
}

}  // namespace quant::kernels

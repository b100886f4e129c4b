// `quantctl kernels`; see kernels_command.h.
#include "client/kernels_command.h"

#include <ostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_join.h"
#include "client/common_flags.h"
#include "core/base/status_macros.h"
#include "core/kernels/dispatch.h"
#include "core/kernels/isa.h"
#include "nlohmann/json.hpp"

ABSL_FLAG(bool, supported_names, false,
          "Print only the names of the levels this CPU runs, lowest first, "
          "separated by spaces (for scripts).");

namespace quant {
namespace {

std::vector<std::string> Names(const std::vector<kernels::IsaLevel>& levels) {
  std::vector<std::string> out;
  for (kernels::IsaLevel level : levels) {
    out.emplace_back(kernels::IsaName(level));
  }
  return out;
}

absl::Status RunKernels(const CommandInvocation& invocation) {
  const std::vector<std::string> compiled = Names(kernels::CompiledLevels());
  const std::vector<std::string> supported = Names(kernels::SupportedLevels());
  if (absl::GetFlag(FLAGS_supported_names)) {
    *invocation.out << absl::StrJoin(supported, " ") << "\n";
    return absl::OkStatus();
  }
  QUANT_RETURN_IF_ERROR(ApplyIsaFlag());
  if (absl::GetFlag(FLAGS_json)) {
    nlohmann::json out = {{"compiled", compiled},
                          {"supported", supported},
                          {"selected", KernelsJson()}};
    *invocation.out << out.dump(2) << "\n";
    return absl::OkStatus();
  }
  const kernels::IsaLevel selected = kernels::ProcessIsa();
  *invocation.out << "compiled in:    " << absl::StrJoin(compiled, " ") << "\n"
                  << "this CPU runs:  " << absl::StrJoin(supported, " ") << "\n"
                  << "selected:       " << kernels::IsaName(selected) << " ("
                  << kernels::IsaDescription(selected) << ")\n";
  return absl::OkStatus();
}

}  // namespace

Command KernelsCommand() {
  Command command;
  command.name = "kernels";
  command.summary =
      "Show the kernel levels (x86-64-v2/v3/v4) compiled in, those this CPU "
      "runs, and the one --isa / QUANT_ISA selects.";
  command.usage = "kernels [--isa LEVEL] [--json | --supported_names]";
  command.description =
      "The numerical kernels are built once per instruction-set level and "
      "the best one this CPU runs is chosen at start; --isa (or the "
      "QUANT_ISA environment variable) forces one. A level the CPU lacks "
      "is a usage error naming the missing features.";
  command.example = "quantctl kernels --isa=v3";
  command.flags = {&absl::GetFlagReflectionHandle(FLAGS_isa),
                   &absl::GetFlagReflectionHandle(FLAGS_json),
                   &absl::GetFlagReflectionHandle(FLAGS_supported_names)};
  command.run = RunKernels;
  return command;
}

}  // namespace quant

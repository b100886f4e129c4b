// `quantctl check`; see check_command.h.
#include "client/check_command.h"

#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "client/common_flags.h"
#include "core/base/status_macros.h"
#include "core/runtime/runtime_conformance.h"

ABSL_FLAG(std::string, runtime, "vllm",
          "The runtime to check against: vllm (fused q/k/v and gate/up "
          "layers, its kernels' shape rules) or transformers (each module "
          "on its own).");
ABSL_FLAG(int, compute_capability, 80,
          "vLLM: the GPU's compute capability, which decides the kernels "
          "(75 T4, 80 A100, 86 A10/RTX 30, 89 L4/L40S, 90 H100/H200).");

namespace quant {
namespace {

absl::Status RunCheck(const CommandInvocation& invocation) {
  const std::string runtime_name = absl::GetFlag(FLAGS_runtime);
  std::optional<TargetRuntime> runtime = TargetRuntimeFromName(runtime_name);
  if (!runtime.has_value()) {
    return UsageError(absl::StrCat("--runtime: \"", runtime_name,
                                   "\" is not one of vllm, transformers"));
  }
  const int capability = absl::GetFlag(FLAGS_compute_capability);
  if (capability < 30 || capability > 200) {
    return UsageError(absl::StrCat("--compute_capability: ", capability,
                                   " is not a GPU's (e.g. 80 for A100, 90 "
                                   "for H100)"));
  }
  RuntimeCheckOptions options;
  options.runtime = *runtime;
  options.compute_capability = capability;
  QUANT_ASSIGN_OR_RETURN(
      const RuntimeCheck check,
      CheckCheckpointRuntimeConformance(invocation.args[0], options));
  if (absl::GetFlag(FLAGS_json)) {
    *invocation.out << RuntimeCheckToJson(check).dump(2) << "\n";
  } else {
    *invocation.out << FormatRuntimeCheck(check);
  }
  if (!check.loads()) {
    return GateFailedError(
        absl::StrCat(invocation.args[0], ": would not load in ", runtime_name));
  }
  return absl::OkStatus();
}

}  // namespace

Command CheckCommand() {
  Command command;
  command.name = "check";
  command.summary =
      "Check that a packed checkpoint would load in vLLM or transformers.";
  command.usage =
      "check DIR [--runtime vllm|transformers] [--compute_capability N] "
      "[--json]";
  command.description =
      "Reads DIR's config.json and safetensors headers (no weights) and "
      "predicts what the runtime would do with them, by the rules written "
      "down in docs/RUNTIME_CONFORMANCE.md: the quantization method it "
      "picks (vLLM: gptq_marlin, gptq or compressed-tensors), the layers "
      "it builds (vLLM fuses q/k/v into qkv_proj and gate/up into "
      "gate_up_proj, which then need one setting; a mixture-of-experts "
      "block's router stays a plain weight and its experts are one "
      "FusedMoE layer read by one method), the scheme each is read "
      "with (GPTQ \"dynamic\" rules and compressed-tensors targets and "
      "ignore matched as vLLM matches them), the kernel each would run on "
      "(machete, marlin, exllama, gptq_gemm; experts: marlin_moe, "
      "moe_wna16, wna16_moe) and whether every tensor the "
      "loader asks for is there with its dtype and shape, and nothing "
      "else. Every finalize runs the same check into audit.json "
      "(\"runtime\"). --json prints {\"runtime\", \"method\", \"loads\", "
      "\"problems\", \"kernels\", \"layers\": [...]}. Exit codes: 0 loads, "
      "3 would not load, 1 error (DIR unreadable).";
  command.example = "quantctl check out/stories-w4 --runtime vllm --json";
  command.flags = {&absl::GetFlagReflectionHandle(FLAGS_runtime),
                   &absl::GetFlagReflectionHandle(FLAGS_compute_capability),
                   &absl::GetFlagReflectionHandle(FLAGS_json)};
  command.min_args = 1;
  command.max_args = 1;
  command.run = RunCheck;
  return command;
}

}  // namespace quant

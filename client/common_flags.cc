// Definitions of the flags shared by quantctl commands.
#include "client/common_flags.h"

#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "client/command.h"
#include "core/kernels/dispatch.h"

ABSL_FLAG(bool, json, false,
          "Print the result as one JSON document on stdout instead of text.");

ABSL_FLAG(std::string, checkpoint, "",
          "Checkpoint directory: config.json, model.safetensors (or shards "
          "with model.safetensors.index.json) and the tokenizer files.");

ABSL_FLAG(std::string, out, "",
          "Where results go. capture: a prefix, writing PREFIX.weight.npy "
          "[N, K], PREFIX.cal.npy [T, K] and PREFIX.heldout.npy [T, K]. "
          "quantize: the packed checkpoint directory, which must not exist "
          "yet (it appears complete or not at all). Required.");

ABSL_FLAG(std::vector<std::string>, label, {},
          "KEY=VALUE label; repeat the flag (or separate with ',') for more. "
          "submit: attached to the job. list: only jobs carrying it.");

ABSL_FLAG(std::string, isa, "",
          "Kernel level the numerical work runs at: auto (the highest this "
          "CPU runs), v2 (x86-64-v2, SSE4.2), v3 (AVX2, FMA) or v4 "
          "(AVX-512). Default: the QUANT_ISA environment variable, else "
          "auto. Results are the same bytes on any thread count at one "
          "level and may differ in the last bits between levels; the "
          "manifest records the level.");

namespace quant {

absl::Status ApplyIsaFlag() {
  absl::Status status = kernels::InitProcessIsa(absl::GetFlag(FLAGS_isa));
  if (!status.ok()) return UsageError(status.message());
  return absl::OkStatus();
}

nlohmann::json KernelsJson() {
  const kernels::IsaLevel level = kernels::ProcessIsa();
  return {{"isa", std::string(kernels::IsaName(level))},
          {"description", std::string(kernels::IsaDescription(level))}};
}

}  // namespace quant

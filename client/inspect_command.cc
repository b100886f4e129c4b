// `quantctl inspect`: open the checkpoint, build the report, print it.
#include "client/inspect_command.h"

#include <memory>
#include <ostream>

#include "absl/flags/flag.h"
#include "client/common_flags.h"
#include "core/base/status_macros.h"
#include "core/model/checkpoint.h"
#include "core/model/inspect.h"

ABSL_FLAG(bool, check_finite, false,
          "Also scan every weight for NaN and infinity (reads the whole "
          "checkpoint); the first bad element fails the command.");

namespace quant {
namespace {

absl::Status RunInspect(const CommandInvocation& invocation) {
  CheckpointOptions options;
  options.check_finite = absl::GetFlag(FLAGS_check_finite);
  options.allow_packed = true;  // Inspect shows packed checkpoints too.
  QUANT_ASSIGN_OR_RETURN(std::unique_ptr<Checkpoint> checkpoint,
                         Checkpoint::Open(invocation.args[0], options));
  const InspectReport report = BuildInspectReport(*checkpoint);
  if (absl::GetFlag(FLAGS_json)) {
    *invocation.out << InspectToJson(report).dump(2) << "\n";
  } else {
    *invocation.out << RenderInspectText(report);
  }
  return absl::OkStatus();
}

}  // namespace

Command InspectCommand() {
  Command command;
  command.name = "inspect";
  command.summary =
      "Check a checkpoint and show its architecture, tensors and which "
      "layers fit GPTQ packing.";
  command.usage = "inspect CHECKPOINT_DIR [--json] [--check_finite]";
  command.description =
      "Reads CHECKPOINT_DIR/config.json and its safetensors (single file or\n"
      "sharded with model.safetensors.index.json), checks every tensor the\n"
      "architecture needs against the config, and reports dimensions,\n"
      "parameter count, size on disk, each tensor's dtype and shape, and for\n"
      "each linear layer [N, K] whether GPTQ v1 can pack it at 2/3/4/8 bits\n"
      "and which group sizes (32, 64, 128) divide K. A packed checkpoint\n"
      "(GPTQ, compressed-tensors) also shows its quantization method and\n"
      "which layers are packed. Runs locally; no server.";
  command.example =
      "quantctl inspect ../shared/models/stories260K/hf-f32 --json";
  command.flags = {&absl::GetFlagReflectionHandle(FLAGS_json),
                   &absl::GetFlagReflectionHandle(FLAGS_check_finite)};
  command.min_args = 1;
  command.max_args = 1;
  command.run = RunInspect;
  return command;
}

}  // namespace quant

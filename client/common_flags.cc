// Definitions of the flags shared by quantctl commands.
#include "client/common_flags.h"

#include <string>
#include <vector>

#include "absl/flags/flag.h"

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

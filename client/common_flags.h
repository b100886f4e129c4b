// Flags that several quantctl commands accept. Each ABSL_FLAG may be defined
// only once per program, so flags shared between commands live here.
#ifndef QUANT_CLIENT_COMMON_FLAGS_H_
#define QUANT_CLIENT_COMMON_FLAGS_H_

#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/status/status.h"
#include "nlohmann/json.hpp"

ABSL_DECLARE_FLAG(bool, json);
ABSL_DECLARE_FLAG(std::string, checkpoint);
ABSL_DECLARE_FLAG(std::string, out);
ABSL_DECLARE_FLAG(std::vector<std::string>, label);
ABSL_DECLARE_FLAG(std::string, isa);

namespace quant {

// Sets the process's kernel level from --isa (else QUANT_ISA, else auto);
// a usage error naming the value and what the CPU lacks when it cannot.
// Commands that compute call it first.
absl::Status ApplyIsaFlag();

// {"isa": "v4", "description": "x86-64-v4 (AVX-512)"}: the level this
// process runs at, for --json output.
nlohmann::json KernelsJson();

}  // namespace quant

#endif  // QUANT_CLIENT_COMMON_FLAGS_H_

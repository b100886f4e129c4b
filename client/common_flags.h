// Flags that several quantctl commands accept. Each ABSL_FLAG may be defined
// only once per program, so flags shared between commands live here.
#ifndef QUANT_CLIENT_COMMON_FLAGS_H_
#define QUANT_CLIENT_COMMON_FLAGS_H_

#include <string>
#include <vector>

#include "absl/flags/declare.h"

ABSL_DECLARE_FLAG(bool, json);
ABSL_DECLARE_FLAG(std::string, checkpoint);
ABSL_DECLARE_FLAG(std::string, out);
ABSL_DECLARE_FLAG(std::vector<std::string>, label);

#endif  // QUANT_CLIENT_COMMON_FLAGS_H_

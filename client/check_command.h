// `quantctl check DIR [--runtime vllm|transformers] [--compute_capability N]
// [--json]`: whether a packed checkpoint would load in a serving runtime,
// and which kernel each layer would run on (core/runtime). Exits 3 when it
// would not load.
#ifndef QUANT_CLIENT_CHECK_COMMAND_H_
#define QUANT_CLIENT_CHECK_COMMAND_H_

#include "client/command.h"

namespace quant {

Command CheckCommand();

}  // namespace quant

#endif  // QUANT_CLIENT_CHECK_COMMAND_H_

// `quantctl inspect CHECKPOINT_DIR`: validates a checkpoint locally and
// prints its architecture, tensors and per-layer packing fit.
#ifndef QUANT_CLIENT_INSPECT_COMMAND_H_
#define QUANT_CLIENT_INSPECT_COMMAND_H_

#include "client/command.h"

namespace quant {

Command InspectCommand();

}  // namespace quant

#endif  // QUANT_CLIENT_INSPECT_COMMAND_H_

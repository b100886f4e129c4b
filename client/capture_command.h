// `quantctl capture`: records the inputs one linear layer of a checkpoint
// sees on calibration and held-out text, with its weight, as .npy files for
// `quantctl lab`.
#ifndef QUANT_CLIENT_CAPTURE_COMMAND_H_
#define QUANT_CLIENT_CAPTURE_COMMAND_H_

#include "client/command.h"

namespace quant {

Command CaptureCommand();

}  // namespace quant

#endif  // QUANT_CLIENT_CAPTURE_COMMAND_H_

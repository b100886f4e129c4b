// `quantctl calib upload FILE`: streams a calibration set (JSONL or plain
// text) to quantd in 1 MiB chunks and prints its sha256, the name jobs use
// for it (`submit --calibration SHA256`).
#ifndef QUANT_CLIENT_CALIB_COMMAND_H_
#define QUANT_CLIENT_CALIB_COMMAND_H_

#include "client/command.h"

namespace quant {

Command CalibCommand();

}  // namespace quant

#endif  // QUANT_CLIENT_CALIB_COMMAND_H_

// `quantctl quantize --local`: runs a whole quantization job in this process
// (the same block and finalize tasks the service's workers run), writes the
// packed checkpoint with its audit and manifest, prints the audit table and
// the gate verdict, and exits 0 on PASS, 3 on gate FAIL, 1 on error.
#ifndef QUANT_CLIENT_QUANTIZE_COMMAND_H_
#define QUANT_CLIENT_QUANTIZE_COMMAND_H_

#include "client/command.h"

namespace quant {

Command QuantizeCommand();

}  // namespace quant

#endif  // QUANT_CLIENT_QUANTIZE_COMMAND_H_

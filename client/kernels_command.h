// `quantctl kernels`: which kernel levels this binary has, which this CPU
// runs, and which one a command would use (--isa / QUANT_ISA / auto).
#ifndef QUANT_CLIENT_KERNELS_COMMAND_H_
#define QUANT_CLIENT_KERNELS_COMMAND_H_

#include "client/command.h"

namespace quant {

Command KernelsCommand();

}  // namespace quant

#endif  // QUANT_CLIENT_KERNELS_COMMAND_H_

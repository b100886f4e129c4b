// `quantctl lab`: the one-layer laboratory. Quantizes one weight matrix [N, K]
// with RTN, GPTQ and/or AWQ against calibration activations (or a Hessian) and
// reports each method's weight and output errors, gains against RTN on the
// same grid (calibration and held-out), flattery, storage cost, time, GPTQ's
// damping and Hessian diagnostics and AWQ's alpha.
#ifndef QUANT_CLIENT_LAB_COMMAND_H_
#define QUANT_CLIENT_LAB_COMMAND_H_

#include "client/command.h"

namespace quant {

Command LabCommand();

}  // namespace quant

#endif  // QUANT_CLIENT_LAB_COMMAND_H_

// `quantctl lab`: the one-layer laboratory. Quantizes one weight matrix [N, K]
// with RTN, GPTQ and/or AWQ against calibration activations (or a Hessian) and
// reports each method's weight and output errors, gains against RTN on the
// same grid (calibration and held-out), flattery, storage cost, time, GPTQ's
// damping and Hessian diagnostics and AWQ's alpha.
#ifndef QUANT_CLIENT_LAB_COMMAND_H_
#define QUANT_CLIENT_LAB_COMMAND_H_

#include <string>
#include <vector>

#include "client/command.h"

namespace quant {

Command LabCommand();

// absl flags accept only the spelling they were defined with
// (--act_order); this rewrites "--act-order[=v]" to "--act_order[=v]" for
// every argument whose dashed name, with '-' read as '_', names a flag of the
// command in argv[1]. Other arguments are returned unchanged. (A candidate
// for client/command.cc, where it would serve every command.)
std::vector<std::string> NormalizeDashedFlagNames(
    int argc, const char* const* argv, const std::vector<Command>& commands);

}  // namespace quant

#endif  // QUANT_CLIENT_LAB_COMMAND_H_

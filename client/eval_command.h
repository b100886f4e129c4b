// `quantctl eval`: perplexity of a checkpoint on a text file, and with
// --reference its perplexity ratio, KL and top-1 agreement against another
// checkpoint on the same windows, computed locally.
#ifndef QUANT_CLIENT_EVAL_COMMAND_H_
#define QUANT_CLIENT_EVAL_COMMAND_H_

#include "client/command.h"

namespace quant {

Command EvalCommand();

}  // namespace quant

#endif  // QUANT_CLIENT_EVAL_COMMAND_H_

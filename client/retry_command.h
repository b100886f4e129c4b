// `quantctl retry JOB`: runs a FAILED job again on quantd (RetryJob): its
// unfinished tasks get a fresh attempt budget, finished blocks are kept.
// Prints the job's new state; with --wait follows the job like `watch` and
// exits like `submit --wait` (0 PASS, 3 FAIL, 1 FAILED or CANCELLED).
#ifndef QUANT_CLIENT_RETRY_COMMAND_H_
#define QUANT_CLIENT_RETRY_COMMAND_H_

#include "client/command.h"

namespace quant {

Command RetryCommand();

}  // namespace quant

#endif  // QUANT_CLIENT_RETRY_COMMAND_H_

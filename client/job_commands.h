// `quantctl status JOB`, `quantctl list` and `quantctl cancel JOB`: one
// job's state, the jobs quantd knows (filtered by state and label, one page
// or all), and cancelling a job.
#ifndef QUANT_CLIENT_JOB_COMMANDS_H_
#define QUANT_CLIENT_JOB_COMMANDS_H_

#include "client/command.h"

namespace quant {

Command StatusCommand();
Command ListCommand();
Command CancelCommand();

}  // namespace quant

#endif  // QUANT_CLIENT_JOB_COMMANDS_H_

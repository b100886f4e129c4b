// `quantctl verify DIR`: checks a packed checkpoint directory against its
// manifest.json (every listed file present with its size and sha256,
// nothing unlisted beside them). Exits 0 when it verifies, 1 otherwise.
#ifndef QUANT_CLIENT_VERIFY_COMMAND_H_
#define QUANT_CLIENT_VERIFY_COMMAND_H_

#include "client/command.h"

namespace quant {

Command VerifyCommand();

}  // namespace quant

#endif  // QUANT_CLIENT_VERIFY_COMMAND_H_

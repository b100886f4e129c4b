// quantctl: the command-line client. Each subcommand lives in its own
// *_command.cc; this file only lists them.
#include <iostream>
#include <vector>

#include "client/command.h"
#include "client/eval_command.h"
#include "client/inspect_command.h"
#include "client/tokenize_command.h"

int main(int argc, char** argv) {
  const std::vector<quant::Command> commands = {
      quant::InspectCommand(),
      quant::TokenizeCommand(),
      quant::EvalCommand(),
  };
  return quant::RunCommandLine(argc, argv, commands, std::cout, std::cerr);
}

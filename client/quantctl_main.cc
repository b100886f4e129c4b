// quantctl: the command-line client. Each subcommand lives in its own
// *_command.cc; this file only lists them.
#include <iostream>
#include <string>
#include <vector>

#include "client/capture_command.h"
#include "client/command.h"
#include "client/eval_command.h"
#include "client/inspect_command.h"
#include "client/lab_command.h"
#include "client/quantize_command.h"
#include "client/recipe_command.h"
#include "client/tokenize_command.h"

int main(int argc, char** argv) {
  const std::vector<quant::Command> commands = {
      quant::InspectCommand(),  quant::TokenizeCommand(),
      quant::EvalCommand(),     quant::CaptureCommand(),
      quant::LabCommand(),      quant::RecipeCommand(),
      quant::QuantizeCommand(),
  };
  // absl flag names use '_'; accept "--act-order" for "--act_order" too.
  const std::vector<std::string> args =
      quant::NormalizeDashedFlagNames(argc, argv, commands);
  std::vector<const char*> normalized_argv;
  for (const std::string& arg : args) normalized_argv.push_back(arg.c_str());
  return quant::RunCommandLine(argc, normalized_argv.data(), commands,
                               std::cout, std::cerr);
}

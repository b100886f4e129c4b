// quantctl: the command-line client. Each subcommand lives in its own
// *_command.cc; this file only lists them. The service commands (calib,
// submit, status, list, watch, report, cancel, retry, fetch) are built with
// the gRPC parts (QUANT_BUILD_SERVICE).
#include <iostream>
#include <string>
#include <vector>

#include "client/capture_command.h"
#include "client/check_command.h"
#include "client/command.h"
#include "client/eval_command.h"
#include "client/inspect_command.h"
#include "client/kernels_command.h"
#include "client/lab_command.h"
#include "client/quantize_command.h"
#include "client/recipe_command.h"
#include "client/tokenize_command.h"
#include "client/verify_command.h"
#include "core/base/allocator_tuning.h"
#ifdef QUANT_CLIENT_SERVICE
#include "client/calib_command.h"
#include "client/fetch_command.h"
#include "client/job_commands.h"
#include "client/report_command.h"
#include "client/retry_command.h"
#include "client/submit_command.h"
#include "client/watch_command.h"
#endif

namespace {

// absl parses a list flag afresh at each occurrence, keeping only the last;
// "--label a=b --label c=d" becomes "--label=a=b,c=d" so that both count.
std::vector<std::string> MergeRepeatedListFlag(
    const std::vector<std::string>& args, const std::string& name) {
  const std::string bare = "--" + name;
  const std::string with_value = bare + "=";
  std::vector<std::string> out;
  std::vector<std::string> values;
  size_t position = 0;
  bool done = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") done = true;
    if (!done && arg == bare && i + 1 < args.size()) {
      if (values.empty()) position = out.size();
      values.push_back(args[++i]);
    } else if (!done && arg.rfind(with_value, 0) == 0) {
      if (values.empty()) position = out.size();
      values.push_back(arg.substr(with_value.size()));
    } else {
      out.push_back(arg);
    }
  }
  if (values.empty()) return args;
  std::string merged = with_value;
  for (size_t i = 0; i < values.size(); ++i) {
    merged += (i == 0 ? "" : ",") + values[i];
  }
  out.insert(out.begin() + static_cast<std::ptrdiff_t>(position), merged);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  // Before any allocation of size: see allocator_tuning.h.
  quant::TuneAllocatorForLargeMatrices();
  const std::vector<quant::Command> commands = {
      quant::InspectCommand(),  quant::TokenizeCommand(),
      quant::EvalCommand(),     quant::CaptureCommand(),
      quant::LabCommand(),      quant::RecipeCommand(),
      quant::QuantizeCommand(), quant::KernelsCommand(),
      quant::VerifyCommand(),   quant::CheckCommand(),
#ifdef QUANT_CLIENT_SERVICE
      quant::CalibCommand(),    quant::SubmitCommand(),
      quant::StatusCommand(),   quant::ListCommand(),
      quant::WatchCommand(),    quant::ReportCommand(),
      quant::CancelCommand(),   quant::RetryCommand(),
      quant::FetchCommand(),
#endif
  };
  // absl flag names use '_'; accept "--act-order" for "--act_order" too.
  const std::vector<std::string> args = MergeRepeatedListFlag(
      quant::NormalizeDashedFlagNames(argc, argv, commands), "label");
  std::vector<const char*> normalized_argv;
  for (const std::string& arg : args) normalized_argv.push_back(arg.c_str());
  return quant::RunCommandLine(static_cast<int>(normalized_argv.size()),
                               normalized_argv.data(), commands, std::cout,
                               std::cerr);
}

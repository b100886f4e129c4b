// The subcommand framework of `quantctl`: each command declares its name,
// one-line summary, usage, example, positional-argument count and the absl
// flags it accepts; RunCommandLine dispatches `quantctl <command> [flags]`,
// prints help, and maps outcomes to exit codes.
//
// Flags are ordinary ABSL_FLAGs, but the command line is parsed here (with
// absl's reflection: CommandLineFlag::ParseFrom) rather than by
// absl::ParseCommandLine, so that each command accepts only its own flags,
// per-command --help lists exactly those, and a bad flag is a usage error
// (exit 2) instead of absl's exit 1.
#ifndef QUANT_CLIENT_COMMAND_H_
#define QUANT_CLIENT_COMMAND_H_

#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/flags/commandlineflag.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace quant {

// Process exit codes of quantctl.
inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 1;  // The command ran and failed.
inline constexpr int kExitUsage = 2;  // Bad command line.
// The job ran and its release gates failed (quantize: verdict FAIL).
inline constexpr int kExitGateFailed = 3;

// What a command's Run receives: positional arguments (flags already parsed
// into their ABSL_FLAGs) and the streams to write to.
struct CommandInvocation {
  std::vector<std::string> args;
  std::ostream* out = nullptr;
  std::ostream* err = nullptr;
};

struct Command {
  std::string name;     // "inspect"
  std::string summary;  // One line, for `quantctl --help`.
  std::string usage;    // After "quantctl ": "inspect CHECKPOINT_DIR [flags]".
  std::string description;  // Optional paragraph for `quantctl CMD --help`.
  std::string example;      // A full command line.
  // The flags this command accepts, from absl::GetFlagReflectionHandle.
  std::vector<const absl::CommandLineFlag*> flags;
  int min_args = 0;
  int max_args = 0;  // -1: unbounded.
  // OK: exit 0. UsageError(...): exit 2 with the usage line. Any other
  // error: its message on stderr, exit 1.
  std::function<absl::Status(const CommandInvocation&)> run;
};

// An error that makes quantctl print the command's usage and exit 2, for
// checks the framework cannot make itself (e.g. flags that exclude each
// other).
absl::Status UsageError(absl::string_view message);
bool IsUsageError(const absl::Status& status);

// A command whose work succeeded but whose verdict is FAIL returns this:
// quantctl prints the message and exits kExitGateFailed.
absl::Status GateFailedError(absl::string_view message);
bool IsGateFailedError(const absl::Status& status);

// Runs `argv` (argv[0] is the program) against `commands` and returns the
// process exit code. Help goes to `out` with exit 0; errors go to `err`.
int RunCommandLine(int argc, const char* const* argv,
                   const std::vector<Command>& commands, std::ostream& out,
                   std::ostream& err);

// absl flags accept only the spelling they were defined with
// (--act_order); this rewrites "--act-order[=v]" to "--act_order[=v]" for
// every argument whose name, with '-' read as '_', names a flag of the
// command in argv[1] (or its --no form). Other arguments are returned
// unchanged, so an unknown flag is reported as the user spelled it.
std::vector<std::string> NormalizeDashedFlagNames(
    int argc, const char* const* argv, const std::vector<Command>& commands);

// The texts of `quantctl --help` and `quantctl CMD --help`.
std::string ProgramHelp(const std::vector<Command>& commands);
std::string CommandHelp(const Command& command);

}  // namespace quant

#endif  // QUANT_CLIENT_COMMAND_H_

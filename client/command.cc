// Dispatch, flag parsing, help and exit codes for quantctl subcommands.
#include "client/command.h"

#include <algorithm>
#include <utility>

#include "absl/flags/reflection.h"
#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/flag_names.h"

namespace quant {
namespace {

constexpr absl::string_view kProgram = "quantctl";
constexpr absl::string_view kUsagePayloadUrl = "type.quant/quantctl.UsageError";
constexpr absl::string_view kGateFailedPayloadUrl =
    "type.quant/quantctl.GateFailed";

bool IsHelpArgument(absl::string_view arg) {
  return arg == "-h" || arg == "--help" || arg == "-help" || arg == "--h";
}

const Command* FindCommand(const std::vector<Command>& commands,
                           absl::string_view name) {
  for (const Command& command : commands) {
    if (command.name == name) return &command;
  }
  return nullptr;
}

const absl::CommandLineFlag* FindFlag(const Command& command,
                                      absl::string_view name) {
  for (const absl::CommandLineFlag* flag : command.flags) {
    if (flag->Name() == name) return flag;
  }
  return nullptr;
}

// The command's flag called `name`, or else the boolean flag it negates
// (`name` "nojson" for --json, setting *negated).
const absl::CommandLineFlag* FindFlagOrNegation(const Command& command,
                                                absl::string_view name,
                                                bool* negated) {
  *negated = false;
  if (const absl::CommandLineFlag* flag = FindFlag(command, name)) return flag;
  if (!absl::StartsWith(name, "no")) return nullptr;
  const absl::CommandLineFlag* flag = FindFlag(command, name.substr(2));
  if (flag == nullptr || !flag->IsOfType<bool>()) return nullptr;
  *negated = true;
  return flag;
}

// "  --json (help) default: false"
std::string FlagHelp(const absl::CommandLineFlag& flag) {
  std::string type_hint;
  if (!flag.IsOfType<bool>()) type_hint = "=VALUE";
  return absl::StrCat(
      "  --", flag.Name(), type_hint, "\n      ", flag.Help(),
      " (default: ", flag.DefaultValue().empty() ? "\"\"" : flag.DefaultValue(),
      ")\n");
}

int ReportUsageError(const Command* command, absl::string_view message,
                     std::ostream& err) {
  if (command == nullptr) {
    err << kProgram << ": " << message << "\n"
        << "Run `" << kProgram << " --help` for the list of commands.\n";
  } else {
    err << kProgram << " " << command->name << ": " << message << "\n"
        << "Usage: " << kProgram << " " << command->usage << "\n"
        << "Run `" << kProgram << " " << command->name
        << " --help` for its flags and an example.\n";
  }
  return kExitUsage;
}

// Parses `args` (everything after the command name) into the command's flags
// and positional arguments. Returns a usage error message, or "" on success.
std::string ParseCommandArguments(const Command& command,
                                  const std::vector<std::string>& args,
                                  std::vector<std::string>& positional) {
  bool flags_done = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (flags_done || arg.size() < 2 || arg[0] != '-') {
      positional.push_back(arg);
      continue;
    }
    if (arg == "--") {
      flags_done = true;
      continue;
    }
    absl::string_view body = arg;
    body.remove_prefix(absl::StartsWith(body, "--") ? 2 : 1);
    const size_t equals = body.find('=');
    const bool has_value = equals != absl::string_view::npos;
    const absl::string_view name = body.substr(0, equals);
    std::string value = has_value ? std::string(body.substr(equals + 1)) : "";

    bool negated = false;
    const absl::CommandLineFlag* flag =
        FindFlagOrNegation(command, name, &negated);
    // --noflag sets a boolean flag to false; --noflag=VALUE is no flag.
    if (negated && has_value) flag = nullptr;
    if (negated && flag != nullptr) value = "false";
    if (flag == nullptr) {
      return absl::StrCat("unknown flag --", name);
    }
    if (!has_value && value.empty()) {
      if (flag->IsOfType<bool>()) {
        value = "true";
      } else if (i + 1 < args.size()) {
        value = args[++i];
      } else {
        return absl::StrCat("flag --", name, " needs a value");
      }
    }
    // The registry hands out the mutable handle that ParseFrom needs.
    absl::CommandLineFlag* mutable_flag =
        absl::FindCommandLineFlag(flag->Name());
    std::string error;
    if (mutable_flag == nullptr || !mutable_flag->ParseFrom(value, &error)) {
      return absl::StrCat("bad value for --", name, ": ", error);
    }
  }
  const int count = static_cast<int>(positional.size());
  if (count < command.min_args) {
    return absl::StrCat("expected ", command.min_args,
                        command.max_args == command.min_args ? "" : " or more",
                        " argument", command.min_args == 1 ? "" : "s", ", got ",
                        count);
  }
  if (command.max_args >= 0 && count > command.max_args) {
    return absl::StrCat("expected at most ", command.max_args, " argument",
                        command.max_args == 1 ? "" : "s", ", got ", count);
  }
  return "";
}

}  // namespace

absl::Status UsageError(absl::string_view message) {
  absl::Status status = absl::InvalidArgumentError(message);
  status.SetPayload(kUsagePayloadUrl, absl::Cord("1"));
  return status;
}

bool IsUsageError(const absl::Status& status) {
  return status.GetPayload(kUsagePayloadUrl).has_value();
}

absl::Status GateFailedError(absl::string_view message) {
  absl::Status status = absl::FailedPreconditionError(message);
  status.SetPayload(kGateFailedPayloadUrl, absl::Cord("1"));
  return status;
}

bool IsGateFailedError(const absl::Status& status) {
  return status.GetPayload(kGateFailedPayloadUrl).has_value();
}

std::string ProgramHelp(const std::vector<Command>& commands) {
  size_t width = 0;
  for (const Command& command : commands) {
    width = std::max(width, command.name.size());
  }
  std::string text =
      absl::StrCat(kProgram,
                   ": the command-line client of the quantization service.\n\n"
                   "Usage: ",
                   kProgram, " <command> [flags] [arguments]\n\nCommands:\n");
  for (const Command& command : commands) {
    absl::StrAppend(&text, "  ", command.name,
                    std::string(width - command.name.size() + 3, ' '),
                    command.summary, "\n");
  }
  absl::StrAppend(&text, "\nRun `", kProgram,
                  " <command> --help` for a command's flags and an "
                  "example.\nExit codes: 0 success, 1 error, 2 usage error, 3 "
                  "release gates failed "
                  "(quantize, submit --wait, watch, report).\n");
  return text;
}

std::string CommandHelp(const Command& command) {
  std::string text =
      absl::StrCat(kProgram, " ", command.name, ": ", command.summary,
                   "\n\nUsage: ", kProgram, " ", command.usage, "\n");
  if (!command.description.empty()) {
    absl::StrAppend(&text, "\n", command.description, "\n");
  }
  if (!command.example.empty()) {
    absl::StrAppend(&text, "\nExample:\n  ", command.example, "\n");
  }
  absl::StrAppend(&text, "\nFlags:\n");
  for (const absl::CommandLineFlag* flag : command.flags) {
    absl::StrAppend(&text, FlagHelp(*flag));
  }
  absl::StrAppend(&text, "  --help\n      Print this help.\n");
  return text;
}

int RunCommandLine(int argc, const char* const* argv,
                   const std::vector<Command>& commands, std::ostream& out,
                   std::ostream& err) {
  if (argc < 2) {
    err << ProgramHelp(commands);
    return kExitUsage;
  }
  const std::string first = argv[1];
  if (IsHelpArgument(first) || first == "help") {
    if (first == "help" && argc >= 3) {
      const Command* command = FindCommand(commands, argv[2]);
      if (command == nullptr) {
        return ReportUsageError(
            nullptr, absl::StrCat("unknown command \"", argv[2], "\""), err);
      }
      out << CommandHelp(*command);
      return kExitOk;
    }
    out << ProgramHelp(commands);
    return kExitOk;
  }
  const Command* command = FindCommand(commands, first);
  if (command == nullptr && absl::StartsWith(first, "-")) {
    return ReportUsageError(
        nullptr,
        absl::StrCat("expected a command before any flag, got \"", first,
                     "\"; flags follow the command"),
        err);
  }
  if (command == nullptr) {
    return ReportUsageError(
        nullptr, absl::StrCat("unknown command \"", first, "\""), err);
  }

  std::vector<std::string> args(argv + 2, argv + argc);
  // Help wins wherever it appears before "--", so that a command line with
  // other mistakes still gets its help.
  for (const std::string& arg : args) {
    if (arg == "--") break;
    if (IsHelpArgument(arg)) {
      out << CommandHelp(*command);
      return kExitOk;
    }
  }
  CommandInvocation invocation;
  invocation.out = &out;
  invocation.err = &err;
  const std::string usage_problem =
      ParseCommandArguments(*command, args, invocation.args);
  if (!usage_problem.empty()) {
    return ReportUsageError(command, usage_problem, err);
  }

  const absl::Status status = command->run(invocation);
  if (status.ok()) return kExitOk;
  if (IsUsageError(status)) {
    return ReportUsageError(command, status.message(), err);
  }
  err << kProgram << " " << command->name << ": " << status.message() << "\n";
  return IsGateFailedError(status) ? kExitGateFailed : kExitError;
}

std::vector<std::string> NormalizeDashedFlagNames(
    int argc, const char* const* argv, const std::vector<Command>& commands) {
  std::vector<std::string> args(argv, argv + argc);
  if (argc < 2) return args;
  const Command* command = FindCommand(commands, args[1]);
  if (command == nullptr) return args;
  return common::NormalizeFlagNames(
      std::move(args), 2, [command](absl::string_view name) {
        bool negated = false;
        return FindFlagOrNegation(*command, name, &negated) != nullptr;
      });
}

}  // namespace quant

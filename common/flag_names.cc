// NormalizeFlagNames: dashes to underscores in flag names.
#include "common/flag_names.h"

#include <algorithm>
#include <utility>

#include "absl/flags/parse.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace quant::common {

std::vector<std::string> NormalizeFlagNames(
    std::vector<std::string> args, size_t first,
    absl::FunctionRef<bool(absl::string_view name)> accept) {
  for (size_t i = first; i < args.size(); ++i) {
    std::string& arg = args[i];
    if (arg == "--") break;
    if (arg.size() < 2 || arg[0] != '-') continue;
    const size_t start = arg[1] == '-' ? 2 : 1;
    const size_t end = std::min(arg.find('='), arg.size());
    if (end <= start) continue;
    std::string name = arg.substr(start, end - start);
    if (name.find('-') == std::string::npos) continue;
    std::replace(name.begin(), name.end(), '-', '_');
    if (!accept(name)) continue;
    arg.replace(start, end - start, name);
  }
  return args;
}

std::vector<std::string> NormalizeFlagNames(std::vector<std::string> args) {
  return NormalizeFlagNames(std::move(args), 1,
                            [](absl::string_view) { return true; });
}

void ListFlagsOfMainFile(absl::string_view program) {
  const size_t slash = program.rfind('/');
  if (slash != absl::string_view::npos) program.remove_prefix(slash + 1);
  std::string main_file(program);
  std::replace(main_file.begin(), main_file.end(), '-', '_');
  main_file = absl::StrCat("/", main_file, "_main.cc");
  absl::FlagsUsageConfig config;
  config.contains_help_flags = [main_file](absl::string_view path) {
    return absl::EndsWith(path, main_file);
  };
  config.contains_helpshort_flags = config.contains_help_flags;
  absl::SetFlagsUsageConfig(config);
}

void ParseCommandLineAcceptingDashes(int argc, char** argv) {
  if (argc > 0) ListFlagsOfMainFile(argv[0]);
  std::vector<std::string> normalized =
      NormalizeFlagNames(std::vector<std::string>(argv, argv + argc));
  std::vector<char*> args;
  for (std::string& a : normalized) args.push_back(a.data());
  absl::ParseCommandLine(static_cast<int>(args.size()), args.data());
}

}  // namespace quant::common

// NormalizeFlagNames: dashes to underscores in flag names.
#include "server/flag_names.h"

#include <algorithm>

#include "absl/flags/parse.h"

namespace quant::server {

std::vector<std::string> NormalizeFlagNames(std::vector<std::string> args) {
  for (size_t i = 1; i < args.size(); ++i) {
    std::string& arg = args[i];
    if (arg == "--") break;
    if (arg.size() < 3 || arg[0] != '-') continue;
    const size_t start = arg[1] == '-' ? 2 : 1;
    const size_t end = std::min(arg.find('='), arg.size());
    std::replace(arg.begin() + start, arg.begin() + end, '-', '_');
  }
  return args;
}

void ParseCommandLineAcceptingDashes(int argc, char** argv) {
  std::vector<std::string> normalized =
      NormalizeFlagNames(std::vector<std::string>(argv, argv + argc));
  std::vector<char*> args;
  for (std::string& a : normalized) args.push_back(a.data());
  absl::ParseCommandLine(static_cast<int>(args.size()), args.data());
}

}  // namespace quant::server

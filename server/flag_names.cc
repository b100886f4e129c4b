// NormalizeFlagNames: dashes to underscores in flag names.
#include "server/flag_names.h"

#include <algorithm>

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

}  // namespace quant::server

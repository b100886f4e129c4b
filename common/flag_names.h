// Lets quantd, quant-worker and quantctl take flags written with dashes, as
// their documentation shows them (--data-dir), while absl flags are declared
// with underscores (--data_dir). Only the name before "=" changes.
#ifndef QUANT_COMMON_FLAG_NAMES_H_
#define QUANT_COMMON_FLAG_NAMES_H_

#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/strings/string_view.h"

namespace quant::common {

// "--data-dir=/x" -> "--data_dir=/x" for args[first..]; values and
// everything after a bare "--" are left as they are. `accept` sees the
// rewritten name ("data_dir") and says whether to rewrite this argument
// (quantctl rewrites only names its command declares, so a misspelling is
// reported as the user wrote it).
std::vector<std::string> NormalizeFlagNames(
    std::vector<std::string> args, size_t first,
    absl::FunctionRef<bool(absl::string_view name)> accept);

// Every flag name after argv[0] (quantd, quant-worker: absl parses them all).
std::vector<std::string> NormalizeFlagNames(std::vector<std::string> args);

// Makes --help list the flags declared in the program's main file. absl
// looks for a file named after the program ("quant-worker_main.cc"); ours
// are named with underscores (worker/quant_worker_main.cc), so without this
// --help said "No flags matched".
void ListFlagsOfMainFile(absl::string_view program);

// absl::ParseCommandLine on the normalized arguments (exits on a bad flag
// or --help, as it does), after ListFlagsOfMainFile(argv[0]).
void ParseCommandLineAcceptingDashes(int argc, char** argv);

}  // namespace quant::common

#endif  // QUANT_COMMON_FLAG_NAMES_H_

// `quantctl verify`; see verify_command.h.
#include "client/verify_command.h"

#include <ostream>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "client/common_flags.h"
#include "core/base/status_macros.h"
#include "core/pipeline/manifest_verify.h"
#include "nlohmann/json.hpp"

namespace quant {
namespace {

absl::Status RunVerify(const CommandInvocation& invocation) {
  const std::string& dir = invocation.args[0];
  QUANT_ASSIGN_OR_RETURN(const ManifestVerification result,
                         VerifyCheckpointDirectory(dir));
  if (absl::GetFlag(FLAGS_json)) {
    nlohmann::json verified = nlohmann::json::array();
    for (const VerifiedFile& f : result.verified) {
      verified.push_back(
          {{"name", f.name}, {"bytes", f.bytes}, {"sha256", f.sha256}});
    }
    *invocation.out << nlohmann::json{{"directory", dir},
                                      {"ok", result.ok()},
                                      {"verified", verified},
                                      {"problems", result.problems}}
                           .dump(2)
                    << "\n";
  } else {
    for (const VerifiedFile& f : result.verified) {
      *invocation.out << "ok       " << f.name << " (" << f.bytes
                      << " bytes)\n";
    }
    for (const std::string& problem : result.problems) {
      *invocation.out << "MISMATCH " << problem << "\n";
    }
  }
  if (!result.ok()) {
    return absl::DataLossError(absl::StrCat(
        dir, ": ", result.problems.size(),
        " file(s) do not match manifest.json; this is not the checkpoint "
        "the job published"));
  }
  return absl::OkStatus();
}

}  // namespace

Command VerifyCommand() {
  Command command;
  command.name = "verify";
  command.summary = "Check a packed checkpoint directory against its manifest.";
  command.usage = "verify DIR [--json]";
  command.description =
      "Reads DIR/manifest.json and checks every file it lists: present, "
      "a regular file, its size and sha256 as recorded; a file in DIR that "
      "the manifest does not list is a mismatch too. Prints a line per "
      "file (ok / MISMATCH and why); --json prints {\"directory\", \"ok\", "
      "\"verified\": [{name, bytes, sha256}], \"problems\": [...]}. A "
      "manifest that names a file outside DIR is refused. Exit codes: 0 "
      "verified, 1 a mismatch or an unreadable manifest.";
  command.example = "quantctl verify out/stories260k-w4";
  command.flags = {&absl::GetFlagReflectionHandle(FLAGS_json)};
  command.min_args = 1;
  command.max_args = 1;
  command.run = RunVerify;
  return command;
}

}  // namespace quant

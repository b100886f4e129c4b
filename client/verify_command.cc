// `quantctl verify`; see verify_command.h.
#include "client/verify_command.h"

#include <ostream>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/common_flags.h"
#include "core/base/file_util.h"
#include "core/base/status_macros.h"
#include "core/pipeline/manifest_signature.h"
#include "core/pipeline/manifest_verify.h"
#include "nlohmann/json.hpp"

ABSL_FLAG(std::string, public_key, "",
          "Also check DIR/manifest.json.sig: an Ed25519 signature of "
          "manifest.json by this PEM public key (quantd --signing_key's). A "
          "missing or invalid signature is a mismatch.");

namespace quant {
namespace {

// The signature check of --public_key: "" when it verifies, else why not.
absl::StatusOr<std::string> SignatureProblem(const std::string& dir,
                                             const std::string& key_path) {
  QUANT_ASSIGN_OR_RETURN(const std::string key,
                         ReadFileToString(key_path, 64 << 10));
  const std::string signature_path = JoinPath(dir, kManifestSignatureFileName);
  if (!FileExists(signature_path)) {
    return absl::StrCat(kManifestSignatureFileName,
                        ": missing (the checkpoint is not signed)");
  }
  QUANT_ASSIGN_OR_RETURN(const std::string signature,
                         ReadFileToString(signature_path, 64 << 10));
  QUANT_ASSIGN_OR_RETURN(
      const std::string manifest,
      ReadFileToString(JoinPath(dir, "manifest.json"), size_t{64} << 20));
  const absl::Status verified =
      VerifyManifestSignature(manifest, signature, key);
  if (verified.code() == absl::StatusCode::kInvalidArgument &&
      absl::StartsWith(verified.message(), "public key")) {
    return absl::InvalidArgumentError(
        absl::StrCat("--public_key ", key_path, ": ", verified.message()));
  }
  if (!verified.ok()) {
    return absl::StrCat(kManifestSignatureFileName, ": ", verified.message());
  }
  return std::string();
}

absl::Status RunVerify(const CommandInvocation& invocation) {
  const std::string& dir = invocation.args[0];
  QUANT_ASSIGN_OR_RETURN(ManifestVerification result,
                         VerifyCheckpointDirectory(dir));
  const std::string public_key = absl::GetFlag(FLAGS_public_key);
  bool signature_verified = false;
  if (!public_key.empty()) {
    QUANT_ASSIGN_OR_RETURN(const std::string problem,
                           SignatureProblem(dir, public_key));
    if (problem.empty()) {
      signature_verified = true;
    } else {
      result.problems.push_back(problem);
    }
  }
  if (absl::GetFlag(FLAGS_json)) {
    nlohmann::json verified = nlohmann::json::array();
    for (const VerifiedFile& f : result.verified) {
      verified.push_back(
          {{"name", f.name}, {"bytes", f.bytes}, {"sha256", f.sha256}});
    }
    *invocation.out << nlohmann::json{{"directory", dir},
                                      {"ok", result.ok()},
                                      {"signature_verified",
                                       signature_verified},
                                      {"verified", verified},
                                      {"problems", result.problems}}
                           .dump(2)
                    << "\n";
  } else {
    for (const VerifiedFile& f : result.verified) {
      *invocation.out << "ok       " << f.name << " (" << f.bytes
                      << " bytes)\n";
    }
    if (signature_verified) {
      *invocation.out << "ok       " << kManifestSignatureFileName
                      << " (Ed25519 signature of manifest.json by "
                      << public_key << ")\n";
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
  command.usage = "verify DIR [--public_key FILE] [--json]";
  command.description =
      "Reads DIR/manifest.json and checks every file it lists: present, "
      "a regular file, its size and sha256 as recorded; a file in DIR that "
      "the manifest does not list is a mismatch too. Prints a line per "
      "file (ok / MISMATCH and why); --json prints {\"directory\", \"ok\", "
      "\"verified\": [{name, bytes, sha256}], \"problems\": [...]}. A "
      "manifest that names a file outside DIR is refused. With --public_key "
      "the checkpoint must also carry manifest.json.sig, a valid Ed25519 "
      "signature of manifest.json by that key (quantd signs with "
      "--signing_key); the manifest records every file's sha256, the tool "
      "version, kernel level, recipe and every input's hash. Exit codes: 0 "
      "verified, 1 a mismatch or an unreadable manifest.";
  command.example = "quantctl verify out/stories260k-w4";
  command.flags = {&absl::GetFlagReflectionHandle(FLAGS_json),
                   &absl::GetFlagReflectionHandle(FLAGS_public_key)};
  command.min_args = 1;
  command.max_args = 1;
  command.run = RunVerify;
  return command;
}

}  // namespace quant

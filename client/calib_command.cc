// `quantctl calib upload`; see calib_command.h.
#include "client/calib_command.h"

#include <memory>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "client/common_flags.h"
#include "client/service_client.h"
#include "core/base/status_macros.h"
#include "nlohmann/json.hpp"

namespace quant {
namespace {

absl::Status RunCalib(const CommandInvocation& invocation) {
  if (invocation.args[0] != "upload") {
    return UsageError(absl::StrCat("unknown calib action \"",
                                   invocation.args[0], "\" (known: upload)"));
  }
  const std::string& path = invocation.args[1];
  QUANT_ASSIGN_OR_RETURN(std::unique_ptr<ServiceClient> client,
                         ServiceClient::FromFlags());
  QUANT_ASSIGN_OR_RETURN(const v1::UploadCalibrationResponse response,
                         client->UploadCalibration(path));
  if (absl::GetFlag(FLAGS_json)) {
    const nlohmann::json out = {
        {"file", path},
        {"sha256", response.sha256()},
        {"size_bytes", response.size_bytes()},
        {"documents", response.documents()},
        {"already_present", response.already_present()},
    };
    *invocation.out << out.dump(2) << "\n";
  } else {
    *invocation.out << response.sha256() << "  " << path << "  "
                    << response.documents() << " documents, "
                    << response.size_bytes() << " bytes"
                    << (response.already_present() ? " (already present)" : "")
                    << "\n";
  }
  return absl::OkStatus();
}

}  // namespace

Command CalibCommand() {
  Command command;
  command.name = "calib";
  command.summary = "Upload a calibration set to quantd and print its sha256.";
  command.usage = "calib upload FILE [--json] [connection flags]";
  command.description =
      "Streams FILE (JSONL with {\"text\": ...} or {\"input_ids\": [...]} "
      "per line, or plain text with documents separated by empty lines) to "
      "quantd in 1 MiB chunks. quantd checks that it parses and stores it "
      "under its sha256, which is what `quantctl submit --calibration "
      "SHA256` takes. Uploading the same bytes again is harmless. Prints "
      "\"SHA256  FILE  N documents, B bytes\".";
  command.example =
      "quantctl calib upload tinystories_val.txt --addr 127.0.0.1:50051";
  command.flags = {&absl::GetFlagReflectionHandle(FLAGS_json)};
  for (const absl::CommandLineFlag* flag : ServiceFlags()) {
    command.flags.push_back(flag);
  }
  command.min_args = 2;
  command.max_args = 2;
  command.run = RunCalib;
  return command;
}

}  // namespace quant

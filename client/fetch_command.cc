// `quantctl fetch`; see fetch_command.h.
#include "client/fetch_command.h"

#include <unistd.h>

#include <filesystem>
#include <functional>
#include <memory>
#include <system_error>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/job_json.h"
#include "client/service_client.h"
#include "core/base/status_macros.h"
#include "core/pipeline/manifest_verify.h"

namespace quant {
namespace {

namespace fs = std::filesystem;

constexpr absl::string_view kFileScheme = "file://";

absl::Status RunFetch(const CommandInvocation& invocation) {
  const std::string& id = invocation.args[0];
  const std::string& dest = invocation.args[1];
  std::error_code error;
  if (fs::exists(dest, error)) {
    return absl::AlreadyExistsError(
        absl::StrCat("DIR ", dest,
                     " already exists; fetch writes a new "
                     "directory"));
  }
  QUANT_ASSIGN_OR_RETURN(std::unique_ptr<ServiceClient> client,
                         ServiceClient::FromFlags());
  QUANT_ASSIGN_OR_RETURN(const v1::Job job, client->GetJob(id));
  if (job.state() != v1::JOB_STATE_SUCCEEDED) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", id, " is ", JobStateName(job.state()),
                     "; only a SUCCEEDED job has an artifact to fetch"));
  }
  if (job.artifact_uri().empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", id, " has no artifact_uri"));
  }
  QUANT_ASSIGN_OR_RETURN(const std::string source,
                         LocalPathOfFileUri(job.artifact_uri()));
  if (!fs::is_directory(source, error) ||
      access(source.c_str(), R_OK | X_OK) != 0) {
    return absl::NotFoundError(absl::StrCat(
        "artifact ", job.artifact_uri(),
        " is not readable from this machine; quantd has no download call, "
        "so copy it from quantd's artifact store (or run fetch where that "
        "path is mounted)"));
  }
  // The copy is checked against the manifest before it takes DIR's name:
  // a damaged artifact or copy leaves nothing behind.
  int files = 0;
  QUANT_RETURN_IF_ERROR(
      CopyDirectory(source, dest, [&](const std::string& copy) {
        QUANT_ASSIGN_OR_RETURN(const ManifestVerification verified,
                               VerifyCheckpointDirectory(copy));
        if (!verified.ok()) {
          return absl::DataLossError(absl::StrCat(
              "artifact ", job.artifact_uri(),
              " does not match its "
              "manifest.json, nothing was written to ",
              dest, ": ", verified.problems.front(),
              verified.problems.size() > 1
                  ? absl::StrCat(" (and ", verified.problems.size() - 1,
                                 " more)")
                  : std::string()));
        }
        files = static_cast<int>(verified.verified.size());
        return absl::OkStatus();
      }));
  *invocation.out << id << ": " << job.artifact_uri() << " copied to " << dest
                  << " (" << files
                  << " files verified against manifest.json)\n";
  if (job.verdict() == v1::VERDICT_FAIL) {
    *invocation.err << "warning: job " << id
                    << " has verdict FAIL; the checkpoint must not ship\n";
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> LocalPathOfFileUri(const std::string& uri) {
  if (!absl::StartsWith(uri, kFileScheme) ||
      !absl::StartsWith(uri.substr(kFileScheme.size()), "/")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "artifact_uri \"", uri,
        "\" is not a file:///PATH URI; fetch can copy only local files "
        "(quantd has no download call)"));
  }
  return uri.substr(kFileScheme.size());
}

absl::Status CopyDirectory(
    const std::string& from, const std::string& to,
    const std::function<absl::Status(const std::string& copy)>& check) {
  std::error_code error;
  if (fs::exists(to, error)) {
    return absl::AlreadyExistsError(absl::StrCat(to, " already exists"));
  }
  const std::string partial = absl::StrCat(
      fs::path(to).lexically_normal().string(), ".partial-", getpid());
  fs::remove_all(partial, error);
  fs::copy(from, partial, fs::copy_options::recursive, error);
  if (error) {
    const std::string message = error.message();
    fs::remove_all(partial, error);
    return absl::InternalError(
        absl::StrCat("copying ", from, " to ", partial, ": ", message));
  }
  if (check) {
    absl::Status checked = check(partial);
    if (!checked.ok()) {
      fs::remove_all(partial, error);
      return checked;
    }
  }
  fs::rename(partial, to, error);
  if (error) {
    const std::string message = error.message();
    fs::remove_all(partial, error);
    return absl::InternalError(
        absl::StrCat("renaming ", partial, " to ", to, ": ", message));
  }
  return absl::OkStatus();
}

Command FetchCommand() {
  Command command;
  command.name = "fetch";
  command.summary =
      "Copy a finished job's packed checkpoint to a local directory.";
  command.usage = "fetch JOB DIR [connection flags]";
  command.description =
      "Copies the SUCCEEDED job's artifact directory (its file:///... "
      "artifact_uri) to DIR, which must not exist yet; DIR appears complete "
      "or not at all. quantd has no download call: this works only where "
      "the artifact path is readable from this machine (the same host, or "
      "the artifact store mounted here); elsewhere fetch says so and exits "
      "1. The copy is checked against the artifact's manifest.json (every "
      "file's size and sha256, nothing unlisted) before it appears; a "
      "mismatch leaves nothing and exits 1. A verdict FAIL artifact is "
      "copied with a warning.";
  command.example = "quantctl fetch job-000042 out/stories260k-w4";
  command.flags = ServiceFlags();
  command.min_args = 2;
  command.max_args = 2;
  command.run = RunFetch;
  return command;
}

}  // namespace quant

// FileArtifactStore: content-addressed calibration sets under a directory.
#include "server/artifact_store.h"

#include <unistd.h>

#include <cerrno>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/base/directory_util.h"
#include "core/base/file_uri.h"
#include "core/base/file_util.h"
#include "core/base/sha256.h"
#include "core/pipeline/manifest_signature.h"
#include "server/uri_policy.h"

namespace quant::server {
namespace {

absl::Status EnsureDirectory(const std::string& path) {
  if (IsDirectory(path)) return absl::OkStatus();
  absl::Status status = MakeDirectory(path);
  if (status.ok() || absl::IsAlreadyExists(status)) return absl::OkStatus();
  return status;
}

}  // namespace

absl::StatusOr<std::unique_ptr<FileArtifactStore>> FileArtifactStore::Open(
    const std::string& root_uri, int64_t max_calibration_bytes) {
  absl::StatusOr<std::string> dir = FileUriPath(root_uri, "artifact_root");
  if (!dir.ok()) return dir.status();
  if (max_calibration_bytes <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_calibration_bytes must be positive, got ", max_calibration_bytes));
  }
  if (absl::Status s = EnsureDirectory(*dir); !s.ok()) return s;
  const std::string calib = JoinPath(*dir, "calib");
  if (absl::Status s = EnsureDirectory(calib); !s.ok()) return s;
  // An upload killed mid-write leaves its temporary file (WriteFileAtomically
  // names it "<final>.tmp-<pid>-<n>"); nothing else writes here, and this
  // runs before quantd serves, so every one found is an orphan.
  absl::StatusOr<std::vector<std::string>> names = ListFiles(calib);
  if (!names.ok()) return names.status();
  for (const std::string& name : *names) {
    if (name.find(".tmp-") == std::string::npos) continue;
    if (::unlink(JoinPath(calib, name).c_str()) != 0 && errno != ENOENT) {
      return ErrnoToStatus("cannot remove the interrupted upload",
                           JoinPath(calib, name), errno);
    }
  }
  return std::unique_ptr<FileArtifactStore>(
      new FileArtifactStore(root_uri, *dir, max_calibration_bytes));
}

absl::StatusOr<std::string> FileArtifactStore::PutCalibration(
    absl::string_view bytes) {
  if (static_cast<int64_t>(bytes.size()) > max_calibration_bytes_) {
    return absl::ResourceExhaustedError(
        absl::StrCat("calibration set of ", bytes.size(),
                     " bytes exceeds the limit of ", max_calibration_bytes_));
  }
  std::string sha256 = Sha256Hex(bytes);
  const std::string path = CalibrationPath(sha256);
  if (!FileExists(path)) {
    if (absl::Status s = WriteFileAtomically(path, bytes); !s.ok()) return s;
  }
  return sha256;
}

std::string FileArtifactStore::CalibrationPath(
    const std::string& sha256) const {
  return JoinPath(JoinPath(root_dir_, "calib"), absl::StrCat(sha256, ".jsonl"));
}

std::string FileArtifactStore::JobWorkUri(const std::string& job_id) const {
  return absl::StrCat("file://", JoinPath(root_dir_, "jobs"), "/", job_id,
                      "/work");
}

std::string FileArtifactStore::AttemptUri(const std::string& job_id,
                                          int task_index, int attempt) const {
  return absl::StrCat(JobWorkUri(job_id), "/attempts/", task_index, "-",
                      attempt);
}

std::string FileArtifactStore::CheckpointUri(const std::string& job_id) const {
  return absl::StrCat("file://", JoinPath(root_dir_, "jobs"), "/", job_id,
                      "/checkpoint");
}

absl::StatusOr<std::string> FileArtifactStore::ReadPublished(
    const std::string& job_id, const std::string& name) const {
  const std::string path = JoinPath(
      JoinPath(JoinPath(JoinPath(root_dir_, "jobs"), job_id), "checkpoint"),
      name);
  if (!FileExists(path)) {
    return absl::NotFoundError(absl::StrCat(
        "job ", job_id, " has no published checkpoint yet (no ", name, ")"));
  }
  return ReadFileToString(path);
}

absl::StatusOr<std::string> FileArtifactStore::ReadAudit(
    const std::string& job_id) const {
  return ReadPublished(job_id, "audit.json");
}

absl::StatusOr<std::string> FileArtifactStore::ReadManifest(
    const std::string& job_id) const {
  return ReadPublished(job_id, "manifest.json");
}

absl::Status FileArtifactStore::WriteManifestSignature(
    const std::string& job_id, const std::string& text) {
  const std::string dir =
      JoinPath(JoinPath(JoinPath(root_dir_, "jobs"), job_id), "checkpoint");
  if (!FileExists(JoinPath(dir, "manifest.json"))) {
    return absl::NotFoundError(
        absl::StrCat("job ", job_id, " has no published checkpoint to sign"));
  }
  return WriteFileAtomically(JoinPath(dir, kManifestSignatureFileName), text);
}

}  // namespace quant::server

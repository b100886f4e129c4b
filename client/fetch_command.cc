// `quantctl fetch`; see fetch_command.h.
#include "client/fetch_command.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <system_error>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/job_json.h"
#include "client/service_client.h"
#include "core/base/file_util.h"
#include "core/base/sha256.h"
#include "core/base/status_macros.h"
#include "core/estimate/plan_estimate.h"
#include "core/pipeline/manifest_signature.h"
#include "core/pipeline/manifest_verify.h"

namespace quant {
namespace {

namespace fs = std::filesystem;

constexpr char kManifest[] = "manifest.json";
constexpr int64_t kProgressEveryBytes = int64_t{64} << 20;

// Appends `file` from `offset` to `path` through `source`, checking that
// the chunks arrive in order and stop at `size`.
absl::Status DownloadFile(const ChunkSource& source, const std::string& file,
                          const std::string& path, int64_t offset, int64_t size,
                          std::ostream* progress) {
  std::ofstream out(path, std::ios::binary | std::ios::app);
  if (!out) {
    return absl::InternalError(absl::StrCat("cannot write ", path));
  }
  int64_t at = offset;
  int64_t next_report = offset + kProgressEveryBytes;
  QUANT_RETURN_IF_ERROR(
      source(file, offset, [&](const v1::ArtifactChunk& chunk) -> absl::Status {
        if (chunk.file_size() != size) {
          return absl::DataLossError(
              absl::StrCat(file, ": ", chunk.file_size(),
                           " bytes on the server, the manifest says ", size));
        }
        if (chunk.file() != file || chunk.offset() != at ||
            at + static_cast<int64_t>(chunk.data().size()) > size) {
          return absl::DataLossError(absl::StrCat(
              file, ": the server sent bytes ", chunk.offset(), "..",
              chunk.offset() + static_cast<int64_t>(chunk.data().size()),
              " of \"", chunk.file(), "\" where bytes from ", at, " of ", size,
              " were due"));
        }
        out.write(chunk.data().data(),
                  static_cast<std::streamsize>(chunk.data().size()));
        if (!out) return absl::InternalError(absl::StrCat("writing ", path));
        at += static_cast<int64_t>(chunk.data().size());
        if (progress != nullptr && at >= next_report && at < size) {
          *progress << "fetch: " << file << " " << HumanBytes(at) << " of "
                    << HumanBytes(size) << "\n";
          next_report = at + kProgressEveryBytes;
        }
        return absl::OkStatus();
      }));
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("writing ", path));
  if (at != size) {
    return absl::UnavailableError(
        absl::StrCat(file, ": the download ended at byte ", at, " of ", size));
  }
  return absl::OkStatus();
}

// A small file (the manifest or its signature) whole, through `source`;
// DataLoss when it arrives out of order or claims more than `max_bytes`.
absl::StatusOr<std::string> DownloadToString(const ChunkSource& source,
                                             const std::string& file,
                                             int64_t max_bytes) {
  std::string bytes;
  QUANT_RETURN_IF_ERROR(source(file, 0, [&](const v1::ArtifactChunk& chunk) {
    if (chunk.offset() != static_cast<int64_t>(bytes.size()) ||
        chunk.file_size() > max_bytes) {
      return absl::DataLossError(absl::StrCat(file, ": chunks out of order"));
    }
    bytes += chunk.data();
    return absl::OkStatus();
  }));
  return bytes;
}

int64_t SizeOr0(const std::string& path) {
  std::error_code error;
  const auto size = fs::file_size(path, error);
  return error ? 0 : static_cast<int64_t>(size);
}

}  // namespace

absl::StatusOr<FetchResult> FetchCheckpoint(const ChunkSource& source,
                                            const std::string& dest,
                                            std::ostream* progress) {
  std::error_code error;
  if (fs::exists(dest, error)) {
    return absl::AlreadyExistsError(absl::StrCat(
        "DIR ", dest, " already exists; fetch writes a new directory"));
  }
  const std::string partial =
      absl::StrCat(fs::path(dest).lexically_normal().string(), ".partial");
  // The manifest, whole, every time: it says what the rest must be.
  QUANT_ASSIGN_OR_RETURN(
      const std::string manifest,
      DownloadToString(source, kManifest, int64_t{64} << 20));
  QUANT_ASSIGN_OR_RETURN(const std::vector<VerifiedFile> files,
                         ListManifestFiles(manifest, "manifest.json"));
  // What an earlier fetch left is kept only if it was of this manifest.
  const std::string manifest_path = JoinPath(partial, kManifest);
  if (fs::exists(partial, error)) {
    absl::StatusOr<std::string> earlier = ReadFileToString(manifest_path);
    if (!earlier.ok() || *earlier != manifest) fs::remove_all(partial, error);
  }
  fs::create_directories(partial, error);
  if (error) {
    return absl::InternalError(
        absl::StrCat("cannot create ", partial, ": ", error.message()));
  }
  QUANT_RETURN_IF_ERROR(WriteFileAtomically(manifest_path, manifest));

  // Its signature, when quantd signs (`verify --public_key` checks it).
  const absl::StatusOr<std::string> signature =
      DownloadToString(source, kManifestSignatureFileName, 64 << 10);
  const absl::Status signature_status = signature.status();
  if (signature_status.ok()) {
    QUANT_RETURN_IF_ERROR(WriteFileAtomically(
        JoinPath(partial, kManifestSignatureFileName), *signature));
  } else if (!absl::IsNotFound(signature_status)) {
    return signature_status;
  }
  FetchResult result;
  result.signed_manifest = signature_status.ok();
  const auto damaged = [&](const std::string& what) {
    fs::remove_all(partial, error);
    return absl::DataLossError(
        absl::StrCat("the artifact does not match its manifest.json, nothing "
                     "was written to ",
                     dest, ": ", what));
  };
  for (size_t i = 0; i < files.size(); ++i) {
    const VerifiedFile& file = files[i];
    const std::string path = JoinPath(partial, file.name);
    int64_t have = SizeOr0(path);
    if (have > file.bytes) {
      fs::remove(path, error);
      have = 0;
    }
    result.bytes_resumed += have;
    if (have < file.bytes || !fs::exists(path, error)) {
      if (absl::Status s =
              DownloadFile(source, file.name, path, have, file.bytes, progress);
          !s.ok()) {
        if (absl::IsDataLoss(s)) return damaged(std::string(s.message()));
        return absl::Status(s.code(),
                            absl::StrCat(s.message(), "; ", partial,
                                         " keeps what arrived: run "
                                         "the same fetch again to resume"));
      }
    }
    QUANT_ASSIGN_OR_RETURN(const std::string sha256, Sha256File(path));
    if (sha256 != file.sha256) {
      return damaged(absl::StrCat(file.name, ": sha256 ", sha256,
                                  ", the manifest says ", file.sha256));
    }
    result.bytes += file.bytes;
    ++result.files;
    if (progress != nullptr) {
      *progress << "fetch: [" << i + 1 << "/" << files.size() << "] "
                << file.name << " " << HumanBytes(file.bytes)
                << (have > 0
                        ? absl::StrCat(" (resumed at ", HumanBytes(have), ")")
                        : std::string())
                << ", sha256 verified\n";
    }
  }
  QUANT_ASSIGN_OR_RETURN(const ManifestVerification verified,
                         VerifyCheckpointDirectory(partial));
  if (!verified.ok()) {
    return damaged(absl::StrCat(
        verified.problems.front(),
        verified.problems.size() > 1
            ? absl::StrCat(" (and ", verified.problems.size() - 1, " more)")
            : std::string()));
  }
  fs::rename(partial, dest, error);
  if (error) {
    return absl::InternalError(absl::StrCat("renaming ", partial, " to ", dest,
                                            ": ", error.message()));
  }
  return result;
}

namespace {

absl::Status RunFetch(const CommandInvocation& invocation) {
  const std::string& id = invocation.args[0];
  const std::string& dest = invocation.args[1];
  std::error_code error;
  if (fs::exists(dest, error)) {
    return absl::AlreadyExistsError(absl::StrCat(
        "DIR ", dest, " already exists; fetch writes a new directory"));
  }
  QUANT_ASSIGN_OR_RETURN(std::unique_ptr<ServiceClient> client,
                         ServiceClient::FromFlags());
  QUANT_ASSIGN_OR_RETURN(const v1::Job job, client->GetJob(id));
  if (job.state() != v1::JOB_STATE_SUCCEEDED) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", id, " is ", JobStateName(job.state()),
                     "; only a SUCCEEDED job has an artifact to fetch"));
  }
  const ChunkSource source =
      [&](const std::string& file, int64_t offset,
          const std::function<absl::Status(const v1::ArtifactChunk&)>&
              on_chunk) {
        return client->DownloadArtifact(id, file, offset, on_chunk);
      };
  QUANT_ASSIGN_OR_RETURN(const FetchResult fetched,
                         FetchCheckpoint(source, dest, invocation.err));
  *invocation.out << id << ": " << fetched.files << " files ("
                  << HumanBytes(fetched.bytes) << ") downloaded to " << dest
                  << (fetched.bytes_resumed > 0
                          ? absl::StrCat(", ",
                                         HumanBytes(fetched.bytes_resumed),
                                         " of them resumed")
                          : std::string())
                  << ", verified against manifest.json"
                  << (fetched.signed_manifest
                          ? "; signed (check with quantctl verify "
                            "--public_key)"
                          : "")
                  << "\n";
  if (job.verdict() == v1::VERDICT_FAIL) {
    *invocation.err << "warning: job " << id
                    << " has verdict FAIL; the checkpoint must not ship\n";
  }
  return absl::OkStatus();
}

}  // namespace

Command FetchCommand() {
  Command command;
  command.name = "fetch";
  command.summary =
      "Download a finished job's packed checkpoint to a local directory.";
  command.usage = "fetch JOB DIR [connection flags]";
  command.description =
      "Downloads the SUCCEEDED job's packed checkpoint from quantd "
      "(DownloadArtifact: no shared disk needed) into DIR, which must not "
      "exist yet; DIR appears complete or not at all. Files arrive in "
      "DIR.partial: if the connection drops, run the same command again and "
      "each file resumes where it stopped. Every file is checked against "
      "manifest.json's sha256 and the directory against the manifest "
      "(nothing unlisted) before it appears; a mismatch leaves nothing and "
      "exits 1. Progress goes to stderr. A verdict FAIL artifact is fetched "
      "with a warning.";
  command.example = "quantctl fetch job-000042 out/stories260k-w4";
  command.flags = ServiceFlags();
  command.min_args = 2;
  command.max_args = 2;
  command.run = RunFetch;
  return command;
}

}  // namespace quant

// SendCheckpointFile; see artifact_download.h.
#include "server/artifact_download.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "core/base/file_util.h"
#include "core/base/sha256.h"
#include "core/base/status_macros.h"
#include "core/pipeline/manifest_signature.h"
#include "core/pipeline/manifest_verify.h"

namespace quant::server {
namespace {

constexpr char kManifest[] = "manifest.json";

// The manifest's entry for `file`: its sha256, or NotFound. A manifest that
// ListManifestFiles refuses is damaged (DataLoss): quantd wrote it.
absl::StatusOr<std::string> ListedSha256(const std::string& manifest_text,
                                         const std::string& file) {
  absl::StatusOr<std::vector<VerifiedFile>> listed =
      ListManifestFiles(manifest_text, kManifest);
  if (!listed.ok()) {
    return absl::DataLossError(absl::StrCat(
        "the published manifest.json is damaged: ", listed.status().message()));
  }
  for (VerifiedFile& entry : *listed) {
    if (entry.name == file) return std::move(entry.sha256);
  }
  return absl::NotFoundError(
      absl::StrCat("file \"", file.substr(0, 200),
                   "\": not a file of this checkpoint (manifest.json and the "
                   "files its output.files lists)"));
}

// Sends one chunk of `file` (`size` bytes whole, `sha256` its hash).
absl::Status SendChunk(
    const std::string& file, int64_t offset, std::string data, int64_t size,
    const std::string& sha256,
    const std::function<bool(const v1::ArtifactChunk&)>& send) {
  v1::ArtifactChunk chunk;
  chunk.set_file(file);
  chunk.set_offset(offset);
  chunk.set_data(std::move(data));
  chunk.set_file_size(size);
  chunk.set_sha256(sha256);
  if (!send(chunk)) return absl::CancelledError("download: client went away");
  return absl::OkStatus();
}

// Sends `bytes[offset..]` in chunks.
absl::Status SendBytes(
    const std::string& file, const std::string& bytes,
    const std::string& sha256, int64_t offset, int64_t chunk_bytes,
    const std::function<bool(const v1::ArtifactChunk&)>& send) {
  const int64_t size = static_cast<int64_t>(bytes.size());
  do {
    const int64_t n = std::min(chunk_bytes, size - offset);
    QUANT_RETURN_IF_ERROR(
        SendChunk(file, offset, bytes.substr(offset, n), size, sha256, send));
    offset += n;
  } while (offset < size);
  return absl::OkStatus();
}

}  // namespace

absl::Status SendCheckpointFile(
    const std::string& checkpoint_dir, const std::string& manifest_text,
    const std::string& file, int64_t offset, int64_t chunk_bytes,
    const std::function<bool(const v1::ArtifactChunk&)>& send) {
  if (offset < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("offset: must be >= 0, got ", offset));
  }
  if (chunk_bytes <= 0) chunk_bytes = kArtifactChunkBytes;
  if (file.empty() || file == kManifest) {
    if (offset > static_cast<int64_t>(manifest_text.size())) {
      return absl::OutOfRangeError(absl::StrCat(
          "offset: ", offset, " is past the end of manifest.json (",
          manifest_text.size(), " bytes)"));
    }
    return SendBytes(kManifest, manifest_text, Sha256Hex(manifest_text), offset,
                     chunk_bytes, send);
  }
  if (file == kManifestSignatureFileName) {
    const std::string path = JoinPath(checkpoint_dir, file);
    if (!FileExists(path)) {
      return absl::NotFoundError(
          absl::StrCat("file \"", file,
                       "\": the checkpoint is not signed (quantd "
                       "--signing_key)"));
    }
    absl::StatusOr<std::string> signature = ReadFileToString(path, 64 << 10);
    if (!signature.ok()) return signature.status();
    if (offset > static_cast<int64_t>(signature->size())) {
      return absl::OutOfRangeError(
          absl::StrCat("offset: ", offset, " is past the end of ", file));
    }
    return SendBytes(file, *signature, Sha256Hex(*signature), offset,
                     chunk_bytes, send);
  }
  // ListManifestFiles admits plain names only, so `file` stays inside
  // checkpoint_dir.
  absl::StatusOr<std::string> sha256 = ListedSha256(manifest_text, file);
  if (!sha256.ok()) return sha256.status();
  const std::string path = JoinPath(checkpoint_dir, file);
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    return absl::DataLossError(
        absl::StrCat("the checkpoint lists ", file,
                     " but it cannot be opened: ", std::strerror(errno)));
  }
  absl::Cleanup close_fd = [fd] { ::close(fd); };
  struct stat info;
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    return absl::DataLossError(
        absl::StrCat("the checkpoint's ", file, " is not a regular file"));
  }
  const int64_t size = info.st_size;
  if (offset > size) {
    return absl::OutOfRangeError(absl::StrCat("offset: ", offset,
                                              " is past the end of ", file,
                                              " (", size, " bytes)"));
  }
  std::string buffer;
  do {
    const int64_t n = std::min(chunk_bytes, size - offset);
    buffer.resize(static_cast<size_t>(n));
    int64_t got = 0;
    while (got < n) {
      const ssize_t r = ::pread(fd, buffer.data() + got, n - got, offset + got);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) {
        return absl::DataLossError(
            absl::StrCat("reading ", file, " at byte ", offset + got, ": ",
                         r == 0 ? "the file shrank" : std::strerror(errno)));
      }
      got += r;
    }
    QUANT_RETURN_IF_ERROR(SendChunk(file, offset, buffer, size, *sha256, send));
    offset += n;
  } while (offset < size);
  return absl::OkStatus();
}

}  // namespace quant::server

// DownloadArtifact's reading side: one file of a published checkpoint sent
// in chunks from an offset. Only manifest.json and the files it lists are
// served (by exact name, opened without following symlinks), so a request
// cannot name anything else in or beside the checkpoint.
#ifndef QUANT_SERVER_ARTIFACT_DOWNLOAD_H_
#define QUANT_SERVER_ARTIFACT_DOWNLOAD_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "quant/v1/service.pb.h"

namespace quant::server {

inline constexpr int64_t kArtifactChunkBytes = int64_t{1} << 20;

// Sends `file` ("" or "manifest.json": `manifest_text` itself;
// "manifest.json.sig": its signature, NotFound when not signed) of the
// checkpoint in `checkpoint_dir`, whose manifest is `manifest_text`, from
// `offset` in chunks of at most `chunk_bytes`. `send` returns false when the
// client went away (Cancelled). NotFound for a name the manifest does not
// list, OutOfRange for an offset past the end, DataLoss when the manifest
// is not JSON or a listed file is missing or not a regular file.
absl::Status SendCheckpointFile(
    const std::string& checkpoint_dir, const std::string& manifest_text,
    const std::string& file, int64_t offset, int64_t chunk_bytes,
    const std::function<bool(const v1::ArtifactChunk&)>& send);

}  // namespace quant::server

#endif  // QUANT_SERVER_ARTIFACT_DOWNLOAD_H_

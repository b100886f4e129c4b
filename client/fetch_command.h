// `quantctl fetch JOB DIR`: downloads a SUCCEEDED job's packed checkpoint
// from quantd (DownloadArtifact) into DIR, from any machine that reaches
// quantd. Files arrive in DIR.partial; an interrupted fetch keeps them, and
// running it again resumes each file where it stopped. Every file is
// checked against the manifest's sha256, and the whole directory against
// the manifest, before DIR appears.
#ifndef QUANT_CLIENT_FETCH_COMMAND_H_
#define QUANT_CLIENT_FETCH_COMMAND_H_

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/command.h"
#include "quant/v1/service.pb.h"

namespace quant {

Command FetchCommand();

// Where fetch gets a file's bytes: `file` from `offset`, chunk by chunk, to
// `on_chunk` (quantd's DownloadArtifact, or a test's).
using ChunkSource = std::function<absl::Status(
    const std::string& file, int64_t offset,
    const std::function<absl::Status(const v1::ArtifactChunk&)>& on_chunk)>;

struct FetchResult {
  int files = 0;                 // Listed in the manifest, all verified.
  int64_t bytes = 0;             // Their total size.
  int64_t bytes_resumed = 0;     // Already in DIR.partial from an earlier run.
  bool signed_manifest = false;  // manifest.json.sig came with it.
};

// Downloads manifest.json and every file it lists into `dest`.partial (kept
// when the source fails, for the next call to resume), checks each file's
// size and sha256, then the directory (VerifyCheckpointDirectory), and
// renames it to `dest`. A file that does not match the manifest removes
// the partial directory: DataLoss naming it, nothing left at `dest`.
// Progress lines go to `progress` (may be null).
absl::StatusOr<FetchResult> FetchCheckpoint(const ChunkSource& source,
                                            const std::string& dest,
                                            std::ostream* progress);

}  // namespace quant

#endif  // QUANT_CLIENT_FETCH_COMMAND_H_

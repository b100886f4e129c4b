// A shard's statistics written and read back; see shard_statistics_io.h.
#include "core/pipeline/shard_statistics_io.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"

namespace quant {

absl::Status WriteShardStatistics(const std::string& path,
                                  const GroupActivationStatistics& statistics,
                                  FileSystem* fs) {
  if (statistics.has_open_shard()) {
    return absl::FailedPreconditionError(
        "shard statistics written with a shard still open (CloseShards)");
  }
  ShardSumsView sums;
  sums.calibration = &statistics.calibration();
  sums.heldout = &statistics.heldout();
  if (statistics.split().has_value()) sums.split = &*statistics.split();
  if (statistics.mean_abs().has_value()) {
    sums.mean_abs = &*statistics.mean_abs();
  }
  return WriteShardSums(path, sums, fs);
}

absl::Status ReadShardStatistics(const std::string& path,
                                 GroupActivationStatistics* into,
                                 FileSystem* fs) {
  absl::StatusOr<ShardSums> sums = ReadShardSums(path, into->k(), fs);
  if (!sums.ok()) return sums.status();
  absl::Status restored = into->RestoreShard(&*sums);
  if (!restored.ok()) {
    return absl::Status(restored.code(),
                        absl::StrCat(path, ": ", restored.message()));
  }
  return absl::OkStatus();
}

}  // namespace quant

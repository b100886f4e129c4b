// A shard's statistics in a file: what a shard task of a block's round
// publishes and the round's reduce adds (docs/DATA_PARALLEL.md). The file
// format is shard_sums_file.h's; this adds the group's statistics to it.
#ifndef QUANT_CORE_PIPELINE_SHARD_STATISTICS_IO_H_
#define QUANT_CORE_PIPELINE_SHARD_STATISTICS_IO_H_

#include <string>

#include "absl/status/status.h"
#include "core/base/file_system.h"
#include "core/pipeline/layer_group_quantizer.h"
#include "core/pipeline/shard_sums_file.h"

namespace quant {

// Writes `statistics` (closed: no open shard) atomically to `path`.
absl::Status WriteShardStatistics(const std::string& path,
                                  const GroupActivationStatistics& statistics,
                                  FileSystem* fs = FileSystem::Default());

// Reads `path` into `into`, empty statistics for the same group
// (EmptyShardStatistics). InvalidArgument naming the tensor or metadata
// field when the file does not fit them: another K, a missing or extra
// part (damp: auto, AWQ), counts that do not add up, values not finite.
// `into` is unchanged on any error.
absl::Status ReadShardStatistics(const std::string& path,
                                 GroupActivationStatistics* into,
                                 FileSystem* fs = FileSystem::Default());

}  // namespace quant

#endif  // QUANT_CORE_PIPELINE_SHARD_STATISTICS_IO_H_

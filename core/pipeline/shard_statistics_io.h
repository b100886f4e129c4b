// A shard's statistics in a file: what a shard task of a block's round
// publishes and the round's reduce adds (docs/DATA_PARALLEL.md).
//
// safetensors, each split's sums present only when it has tokens:
//   "calibration"       F32 [K(K+1)/2]  lower triangle of Σ xxᵀ, row by row
//   "heldout"           F32 [K(K+1)/2]
//   "split.train"       F32 [K(K+1)/2]  damp: auto's two parts
//   "split.validation"  F32 [K(K+1)/2]
//   "mean_abs.sum"      F64 [K]         AWQ's Σ|x| per channel
// metadata: format "quant-shard-statistics/1", k, calibration_tokens,
// heldout_tokens; with damp: auto split.first_token, split.next_token,
// split.train_tokens, split.validation_tokens, split.validation_fraction
// (%.17g); with AWQ mean_abs.tokens.
//
// The float32 sums are stored as they are, so a reduce reading the files
// adds exactly what the shard tasks computed: the same bytes as one
// process. Half of each symmetric K x K sum is stored.
#ifndef QUANT_CORE_PIPELINE_SHARD_STATISTICS_IO_H_
#define QUANT_CORE_PIPELINE_SHARD_STATISTICS_IO_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "core/base/file_system.h"
#include "core/pipeline/layer_group_quantizer.h"

namespace quant {

// Writes `statistics` (closed: no open shard) atomically to `path`.
absl::Status WriteShardStatistics(const std::string& path,
                                  const GroupActivationStatistics& statistics,
                                  FileSystem* fs = FileSystem::Default());

// Reads `path` into `into`, empty statistics for the same group
// (EmptyShardStatistics). InvalidArgument naming the tensor or metadata
// field when the file does not fit them: another K, a missing or extra
// part (damp: auto, AWQ), counts that do not add up, values not finite.
absl::Status ReadShardStatistics(const std::string& path,
                                 GroupActivationStatistics* into,
                                 FileSystem* fs = FileSystem::Default());

// Bytes of one stored K(K+1)/2 float32 triangle.
int64_t ShardTriangleBytes(int64_t k);

}  // namespace quant

#endif  // QUANT_CORE_PIPELINE_SHARD_STATISTICS_IO_H_

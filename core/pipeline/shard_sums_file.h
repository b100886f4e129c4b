// The sums a shard of a layer group's activations adds up to, in a file:
// what a shard task of a block's round publishes and the round's reduce
// reads (shard_statistics_io.h, docs/DATA_PARALLEL.md). Only the Hessian
// accumulators and safetensors: the fuzzer links nothing else.
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
#ifndef QUANT_CORE_PIPELINE_SHARD_SUMS_FILE_H_
#define QUANT_CORE_PIPELINE_SHARD_SUMS_FILE_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/base/file_system.h"
#include "core/quant/hessian.h"

namespace quant {

// The sums to write (not owned); split and mean_abs null when not kept.
struct ShardSumsView {
  const HessianAccumulator* calibration = nullptr;
  const HessianAccumulator* heldout = nullptr;
  const SplitHessianAccumulator* split = nullptr;
  const ActivationStatsAccumulator* mean_abs = nullptr;
};

// The sums read back.
struct ShardSums {
  HessianAccumulator calibration;
  HessianAccumulator heldout;
  std::optional<SplitHessianAccumulator> split;
  std::optional<ActivationStatsAccumulator> mean_abs;
};

// Writes `sums` atomically to `path`.
absl::Status WriteShardSums(const std::string& path, const ShardSumsView& sums,
                            FileSystem* fs = FileSystem::Default());

// Reads `path`, whose K must be `k`. InvalidArgument naming the tensor or
// metadata field that is missing, mistyped, not finite or whose counts do
// not add up.
absl::StatusOr<ShardSums> ReadShardSums(const std::string& path, int64_t k,
                                        FileSystem* fs = FileSystem::Default());

// Bytes of one stored K(K+1)/2 float32 triangle.
int64_t ShardTriangleBytes(int64_t k);

}  // namespace quant

#endif  // QUANT_CORE_PIPELINE_SHARD_SUMS_FILE_H_

// The state of a block's rounds as files: what a shard task of a later
// round rebuilds the block from (docs/DATA_PARALLEL.md).
//
// A reduce changes only its group's layers and what an AWQ fold reaches
// (the norms, v_proj's or up_proj's rows, an unquantized layer's columns),
// so it publishes a delta, and a shard task applies the deltas of the
// rounds before it to the block's input weights:
//   <prefix>.safetensors
//     "norm.input", "norm.post_attention", "norm.q", "norm.k"  F32 [H]
//     "<type>.weight"  F32 [N, K]   an unquantized layer's changed weight
//     "<type>.bias"    F32 [N]      a changed bias
//     "<type>.codes"   U8 [N, K], "<type>.scales" / "<type>.zeros"
//                      F32 [G, N], "<type>.g_idx" / "<type>.order" I32 [K]
//                                   a quantized layer (its float weight is
//                                   scales(g_idx[k], n) * (codes - zeros))
//   metadata "round": {"groups_done": g, "layers": [changed LayerResults in
//   task_io's JSON, each with its quantized layer's grid and method]}
// Only what changed is stored: a quantized layer as uint8 codes is a
// quarter of its float32 weights.
#ifndef QUANT_CORE_PIPELINE_ROUND_STATE_IO_H_
#define QUANT_CORE_PIPELINE_ROUND_STATE_IO_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/base/file_system.h"
#include "core/pipeline/block_task.h"

namespace quant {

// What one reduce changed.
struct BlockRoundDelta {
  int groups_done = 0;  // The state's count after the reduce.
  std::optional<Eigen::VectorXf> input_norm;
  std::optional<Eigen::VectorXf> post_attention_norm;
  std::optional<Eigen::VectorXf> q_norm;
  std::optional<Eigen::VectorXf> k_norm;
  // Unquantized layers whose weight changed, and changed biases.
  std::map<LayerType, RowMatrixF> weights;
  std::map<LayerType, Eigen::VectorXf> biases;
  // Layer results that changed (a quantized one carries its layer).
  std::vector<LayerResult> layers;
};

// What `after` changed relative to `before` (the same block's states).
absl::StatusOr<BlockRoundDelta> DiffRoundState(const BlockRoundState& before,
                                               const BlockRoundState& after);

// Applies `delta` to `state`, which must be the state it was taken from
// (FailedPrecondition when its groups_done is not delta.groups_done - 1).
absl::Status ApplyRoundDelta(const BlockRoundDelta& delta,
                             BlockRoundState* state);

// The deltas of one group's reduces split by layer (ReduceBlockRound with a
// layer), in the group's layer order, as the one delta of the whole
// group's reduce: each changed only its own layer. InvalidArgument when
// they are not of one group or two changed the same thing (a norm, a
// layer).
absl::StatusOr<BlockRoundDelta> MergeLayerDeltas(
    std::vector<BlockRoundDelta> parts);

absl::Status WriteRoundDelta(const std::string& path,
                             const BlockRoundDelta& delta,
                             FileSystem* fs = FileSystem::Default());
// InvalidArgument naming the tensor or field that is missing or does not
// fit its layer.
absl::StatusOr<BlockRoundDelta> ReadRoundDelta(
    const std::string& path, FileSystem* fs = FileSystem::Default());

}  // namespace quant

#endif  // QUANT_CORE_PIPELINE_ROUND_STATE_IO_H_

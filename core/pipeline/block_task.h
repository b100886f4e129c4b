// The block task: one decoder block quantized on the activations that enter
// it. The unit a worker runs; the local pipeline runs the same function.
//
// Inputs: the block's float32 weights, the resolved settings of its seven
// linear layers, the recipe, and the hidden states entering the block for the
// calibration and held-out windows. Outputs: the block's tensors as the
// packed checkpoint stores them, the per-layer results with audits, the
// block's effective weights (what the packed checkpoint computes), and the
// hidden states leaving the block.
//
// The states entering the block are read in chunks of whole sequences
// (hidden_state_stream.h): each chunk is run through the block up to the
// group's input, whose Hessians accumulate chunk by chunk, so memory holds
// one chunk's activations per thread, never a group's [T, K]. With several
// threads, that many chunks run through the forward pass at once and their
// statistics are then added in chunk order.
//
// Under sequential propagation every linear layer runs once per token: the
// activations a later group reuses are kept between groups (the stash: the
// attention context until the residual stream is formed, the residual
// stream, the MLP's hidden state), in memory or, beyond max_stash_bytes, in
// files under stash_dir, a chunk at a time. An AWQ fold into an op whose
// output is kept (v_proj for o_proj, up_proj for down_proj) makes that
// output stale; it is then computed again. Without a place for the stash
// (too large for memory, no stash_dir) every group recomputes its input from
// the block's input. All three give the same bytes.
//
// Order inside the block: [q,k,v] -> o -> [gate,up] -> down. A
// mixture-of-experts block quantizes [q,k,v] and o as above, then every
// expert (core/pipeline/expert_quantizer.h) on the MLP's input rows, which
// it holds in memory for both splits; its groups' inputs are recomputed
// from the block's input rather than stashed. With sequential
// propagation each group is calibrated on inputs computed with the groups
// already quantized, and the block's output uses the quantized block; with
// independent propagation every group sees the unquantized block's
// activations and the output is the unquantized block's (so blocks can run
// in parallel from the unquantized model's hidden states).
//
// AWQ's 1/s goes into the op that produces the group's input: the input
// RMSNorm weight for [q,k,v], the post-attention RMSNorm for [gate,up],
// v_proj's rows for o (only when every attention head has its own value
// head; under grouped-query attention o_proj is searched at α = 0, as
// AutoAWQ does), up_proj's rows for down. A quantized producer absorbs the
// row factor in its per-row scales (re-rounded to fp16), a float one in its
// weights.
#ifndef QUANT_CORE_PIPELINE_BLOCK_TASK_H_
#define QUANT_CORE_PIPELINE_BLOCK_TASK_H_

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/base/dtype.h"
#include "core/forward/block_weights.h"
#include "core/model/linear_layers.h"
#include "core/model/model_config.h"
#include "core/pack/packed_tensor.h"
#include "core/pipeline/expert_quantizer.h"
#include "core/pipeline/hidden_state_stream.h"
#include "core/pipeline/layer_group_quantizer.h"
#include "core/pipeline/layer_result.h"
#include "core/quant/audit.h"
#include "core/recipe/layer_plan.h"
#include "core/recipe/recipe.h"

namespace quant {

struct BlockTaskInput {
  const ModelConfig* config = nullptr;
  const Recipe* recipe = nullptr;
  BlockWeights weights;  // Unquantized, float32.
  // The previous release's layers of this block in the source's units
  // (PreviousLayersInSourceUnits; recipe gates.compare_to): each quantized
  // layer listed here is audited for it too on the same held-out inputs.
  std::map<LayerType, RowMatrixF> previous;
  // Settings of the block's layers by layer type.
  std::map<LayerType, LayerSettings> settings;
  // A mixture-of-experts block (config->IsMoeBlock): the settings of its
  // experts' gate, up and down (every expert alike), and how the experts
  // are calibrated. `settings` then holds q, k, v and o only; the router
  // stays unquantized.
  std::map<LayerType, LayerSettings> expert_settings;
  ExpertCalibrationPolicy expert_policy;
  // The stored dtype of each of the block's source tensors by full name;
  // kept tensors are written in it (F32 when absent).
  std::map<std::string, DType> stored_dtypes;
  // The hidden states entering the block, in memory...
  HiddenStates calibration;
  HiddenStates heldout;
  // ...or, when both are set, read from these a chunk at a time (the
  // HiddenStates above are then unused). Not owned.
  const HiddenStateSource* calibration_source = nullptr;
  const HiddenStateSource* heldout_source = nullptr;
  // Where the leaving states go, a chunk at a time; when null they are
  // returned in BlockTaskOutput. Not owned; finished by the task.
  HiddenStateSink* calibration_sink = nullptr;
  HiddenStateSink* heldout_sink = nullptr;
  // Rows per chunk (PlanChunks). The results depend on it (the order of
  // the Hessian sums), so every task of a job uses the same.
  int64_t chunk_tokens = kDefaultChunkTokens;
  // Threads the task runs on (>= 1): as many chunks at a time through the
  // block's forward pass, the Hessian tiles of each chunk, and a group's
  // GPTQ/RTN layers and audits side by side (under independent
  // propagation, the four groups side by side; a GPTQ sweep running alone
  // splits its solves and updates into fixed tiles). The results are identical
  // whatever the count (fixed chunks summed in order, fixed tiles); memory
  // grows by one chunk's activations per thread.
  int threads = 1;
  // The stash (see above): in memory up to max_stash_bytes, else in files
  // under stash_dir (written through file_system, removed when the task
  // ends); with no stash_dir, recomputed.
  std::string stash_dir;
  int64_t max_stash_bytes = int64_t{1} << 30;
  FileSystem* file_system = FileSystem::Default();
  // Checked before each layer group: when set, the task stops with
  // Cancelled (a worker told by the coordinator that the job was
  // cancelled, or shutting down).
  const std::atomic<bool>* cancelled = nullptr;
};

struct BlockTaskOutput {
  int block = 0;
  // q, k, v, o, gate, up, down; for a mixture-of-experts block q, k, v, o
  // and then every expert's gate, up, down.
  std::vector<LayerResult> layers;
  // A mixture-of-experts block: the tokens the router sent each expert on
  // each split, and the experts the policy found starved.
  std::vector<int64_t> routed_calibration_tokens;
  std::vector<int64_t> routed_heldout_tokens;
  std::vector<int> starved_experts;
  BlockWeights effective;  // Exactly what the stored tensors compute.
  std::vector<PackedTensor> tensors;  // The block's checkpoint tensors.
  // Empty when the input named sinks.
  HiddenStates calibration_out;
  HiddenStates heldout_out;
};

// Called after each layer group, for progress displays.
using LayerProgress = std::function<void(const LayerResult&)>;

absl::StatusOr<BlockTaskOutput> RunBlockTask(
    const BlockTaskInput& input, const LayerProgress& progress = nullptr);

// A sequential dense block as rounds of small tasks, so many workers can
// share one block (docs/DATA_PARALLEL.md). For each of the block's four
// layer groups in order: every shard of each split (PlanShards) gathers the
// group's statistics on its entering states, computed with the groups
// before it quantized (GatherShardStatistics); a reduce adds them in shard
// order and quantizes the group (ReduceBlockRound). Then every shard runs
// the quantized block (WriteShardOutput) and FinishBlockRounds packs the
// block. The statistics are summed per shard in RunBlockTask too, so the
// rounds give its bytes whatever order or place the shards ran in.
//
// In the functions below, `input` gives the block (config, recipe, weights,
// settings, threads, cancellation); its hidden states are not read.
struct BlockRoundState {
  int groups_done = 0;   // Layer groups quantized so far, in block order.
  BlockWeights working;  // What the next group's inputs use.
  std::vector<LayerResult> layers;  // q, k, v, o, gate, up, down.
};

// What a worker keeps of one shard between the rounds of a block, so that a
// round continues from where the shard's previous round stopped instead of
// running the block again from its entering states (docs/DATA_PARALLEL.md):
// the attention context after the q/k/v round, the residual stream
// (hidden + o_proj(context)) after the o round. One matrix per chunk of the
// shard (every round cuts a shard into the same chunks), each kind with a
// fingerprint of the weights it was computed with: a round whose weights
// differ (an AWQ fold into v_proj, a reduce run again) computes it again
// from the entering states. Either way the bytes are the same.
struct ShardRoundStash {
  std::vector<RowMatrixF> context;  // Empty when not kept.
  uint64_t context_weights = 0;
  std::vector<RowMatrixF> residual;  // Empty when not kept.
  uint64_t residual_weights = 0;
  // How many rounds took their inputs from the stash (tests, logs).
  int rounds_continued = 0;

  int64_t bytes() const;
};

// FailedPrecondition for a block the rounds do not cover yet (a mixture of
// experts; independent propagation, whose groups need no rounds):
// RunBlockTask runs those whole.
absl::StatusOr<BlockRoundState> StartBlockRounds(const BlockTaskInput& input);

// The layer groups of a dense block (the rounds before the output).
inline constexpr int kBlockRoundGroups = 4;
// The layers group `group` quantizes: q, k, v; o; gate, up; down. Empty
// outside 0..kBlockRoundGroups-1.
std::vector<LayerType> BlockRoundGroupTypes(int group);

// The statistics of group state.groups_done on one shard of one split:
// `shard` holds the shard's entering states; `first_token`, for the
// calibration split, is the real tokens of the split's sequences before it
// (damp: auto splits by token index). Null when the group quantizes no
// layer. The result is closed (ready to merge). `stash`, when set, is what
// this shard's earlier rounds kept (empty at first), updated for the next.
absl::StatusOr<std::unique_ptr<GroupActivationStatistics>>
GatherShardStatistics(const BlockTaskInput& input, const BlockRoundState& state,
                      bool calibration, const HiddenStateSource& shard,
                      int64_t first_token, ShardRoundStash* stash = nullptr);

// Empty statistics of the kind group state.groups_done gathers (null when
// it quantizes no layer): what a reduce reads a shard's file into
// (shard_statistics_io.h).
absl::StatusOr<std::unique_ptr<GroupActivationStatistics>> EmptyShardStatistics(
    const BlockTaskInput& input, const BlockRoundState& state);
// `count` of them at once (a reduce's shards), at the cost of one; none
// when the group quantizes no layer.
absl::StatusOr<std::vector<std::unique_ptr<GroupActivationStatistics>>>
EmptyShardStatistics(const BlockTaskInput& input, const BlockRoundState& state,
                     int count);

// Adds `shards` (each split's in shard order) and quantizes group
// state->groups_done, then advances the state. With `layer`, only that
// layer of the group is quantized (a reduce split by layer: the layers of
// a GPTQ or RTN group are independent given the group's statistics, and
// each gets the bytes the whole group's reduce gives it); the state then
// holds the group's other layers unquantized and serves only to take the
// layer's delta (round_state_io.h). FailedPrecondition when the group has
// an AWQ layer (its input scale is the group's), InvalidArgument when
// `layer` is not in the group.
absl::Status ReduceBlockRound(
    const BlockTaskInput& input,
    const std::vector<const GroupActivationStatistics*>& shards,
    BlockRoundState* state, std::optional<LayerType> layer = std::nullopt);

// How a round's reduce runs.
struct RoundReduceOptions {
  // Only this layer of the group (above).
  std::optional<LayerType> layer;
  // The shards are the calibration split's only: the reduce quantizes (no
  // method reads the held-out split) and leaves its audits' held-out part
  // pending (LayerAudit::heldout_pending) for AuditBlockRoundsHeldout, so
  // the next round need not wait for the held-out shards
  // (docs/DATA_PARALLEL.md). FailedPrecondition for a group with an AWQ
  // layer, whose audit needs the group's input scale.
  bool heldout_later = false;
};
absl::Status ReduceBlockRound(
    const BlockTaskInput& input,
    const std::vector<const GroupActivationStatistics*>& shards,
    BlockRoundState* state, const RoundReduceOptions& options);

// After the block's last reduce, the held-out part of the audits that
// reduces with heldout_later left pending. `heldout[g]`: layer group g's
// held-out sums, its held-out shards' added in shard order
// (HessianAccumulator::Merge onto an empty one). The audits then equal
// those of reduces given the held-out shards too.
absl::Status AuditBlockRoundsHeldout(
    const BlockTaskInput& input, const std::vector<HessianAccumulator>& heldout,
    BlockRoundState* state);

// The size of the held-out sums AuditBlockRoundsHeldout needs for each
// layer group of `state` (the group's quantized layers' input columns): 0
// for a group with no quantized layer, which has nothing to audit.
std::vector<int64_t> BlockRoundsHeldoutColumns(const BlockRoundState& state);

// Whether a job's reduces are split by layer: no layer may use AWQ (the
// recipe's method is not awq and no override sets it). Decided from the
// recipe alone, as the coordinator plans.
bool RoundReducesByLayer(const Recipe& recipe);
// The reduce tasks of group `group`: one per layer of a group of several
// when `by_layer`, else one for the whole group (an empty entry).
std::vector<std::optional<LayerType>> RoundGroupReduces(int group,
                                                        bool by_layer);

// The states leaving the quantized block for one shard, into `sink`
// (finished here). After the last reduce. `stash` as above.
absl::Status WriteShardOutput(const BlockTaskInput& input,
                              const BlockRoundState& state,
                              const HiddenStateSource& shard,
                              HiddenStateSink* sink,
                              ShardRoundStash* stash = nullptr);

// The block's tensors, effective weights and layer results (no hidden
// states: the shards wrote them).
absl::StatusOr<BlockTaskOutput> FinishBlockRounds(const BlockTaskInput& input,
                                                  BlockRoundState state);

// The most the stash of a sequential block task holds at once (the residual
// stream and the MLP's hidden state of both splits), for `rows` hidden-state
// rows (padding included) over the two splits.
int64_t BlockStashBytes(const ModelConfig& config, int64_t rows);

// The rows of real tokens (see HiddenStates).
RowMatrixF RealRows(const ConstRowMatrixRef& rows, int seq_len,
                    const std::vector<int>& lengths);

}  // namespace quant

#endif  // QUANT_CORE_PIPELINE_BLOCK_TASK_H_

// Files that carry the block and finalize tasks between processes: what a
// worker reads and writes, so the service can run the same tasks as
// `quantctl quantize --local`, and a restarted coordinator can pick up the
// outputs of finished blocks.
//
//   hidden states   (hidden_state_stream.h) safetensors: "hidden" F32
//   [sequences * seq_len, hidden],
//                   "lengths" I32 [sequences]; metadata seq_len
//   block output    <dir>/block-00003.safetensors   the block's tensors as
//                                                   the checkpoint stores them
//                   <dir>/block-00003.layers.json   every LayerResult (audit,
//                                                   settings, choices), exact,
//                                                   and the sha256 of the
//                                                   block's other files
//                   <dir>/block-00003.cal.safetensors / .heldout.safetensors
//                                                   the hidden states leaving
//                                                   it
//   rounds          <dir>/block-00003.rounds/...      a sequential dense
//                                                   block run as rounds
//                                                   (round_job_tasks.h):
//                   g1.cal-0002.stats.safetensors   group 1's statistics
//                                                   on calibration shard 2
//                   g1.delta.safetensors            what group 1's reduce
//                                                   changed
//                   g0.q_proj.delta.safetensors     what q_proj's reduce
//                                                   changed (a group
//                                                   reduced by layer)
//                   cal-0002.out.safetensors        the states leaving the
//                                                   block for that shard
//                   (such a block publishes no .cal/.heldout files; its
//                   layers.json records the deltas' sha256)
// Every file is written atomically (temporary name, then rename), so a
// reader sees a whole file or none. Writes go through a FileSystem (default:
// POSIX) so tests can inject storage faults.
#ifndef QUANT_CORE_PIPELINE_TASK_IO_H_
#define QUANT_CORE_PIPELINE_TASK_IO_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/base/file_system.h"
#include "core/pack/packed_tensor.h"
#include "core/pipeline/block_task.h"
#include "core/pipeline/hidden_state_stream.h"
#include "nlohmann/json.hpp"

namespace quant {

class FileDigests;  // core/base/file_digests.h

// Lossless JSON of a layer result without its QuantizedLayer (that is in
// the block's tensors): doubles round-trip exactly.
nlohmann::json LayerResultToTaskJson(const LayerResult& layer);
// InvalidArgument naming the missing or mistyped field.
absl::StatusOr<LayerResult> LayerResultFromTaskJson(const nlohmann::json& j);

// "<dir>/block-00003" for block 3: the prefix of its files.
std::string BlockOutputPrefix(const std::string& dir, int block);

// The round files of block `block`, by name relative to the work
// directory.
std::string ShardStatisticsFile(int block, int group, bool calibration,
                                int shard);
// A reduce's delta; `layer` for a reduce split by layer (RoundGroupReduces):
// "g0.q_proj.delta.safetensors".
std::string RoundDeltaFile(int block, int group,
                           std::optional<LayerType> layer = std::nullopt);
std::string ShardOutputFile(int block, bool calibration, int shard);
// "block-00003.layers.json": block 3's layer results, relative to the work
// directory (the marker a block's task reports).
std::string BlockLayersFile(int block);
// RoundDeltaFile(block, group) after the block's prefix: the key of its
// sha256 in a rounds block's layers.json (VerifyBlockFile's suffix).
std::string RoundDeltaSuffix(int group,
                             std::optional<LayerType> layer = std::nullopt);

// Writes the block's tensors, layer results and leaving hidden states (those
// only when `output` holds them: a task given sinks for its leaving states
// has written them to <dir>/block-NNNNN.{cal,heldout}.safetensors itself).
// `round_delta_sha256` (a block run as rounds): each delta's sha256 by its
// RoundDeltaSuffix, recorded in layers.json for the tasks that read them
// later. The files are hashed side by side on up to `threads` threads.
absl::Status WriteBlockOutput(
    const std::string& dir, const BlockTaskOutput& output,
    FileSystem* fs = FileSystem::Default(),
    const std::map<std::string, std::string>& round_delta_sha256 = {},
    int threads = 1);

// Moves block `block`'s files from `attempt_dir` into `work_dir` by rename
// (both on one file system), the layer results last: a reader that finds
// them finds the rest. Publishing the same block twice is harmless: every
// run of a block writes the same bytes. A failed publish leaves the layer
// results unpublished; files renamed before the failure are replaced by the
// next run's identical ones.
// `leaving_states` false: the block was run as rounds, whose shards publish
// the leaving states themselves.
absl::Status PublishBlockOutput(const std::string& attempt_dir,
                                const std::string& work_dir, int block,
                                FileSystem* fs = FileSystem::Default(),
                                bool leaving_states = true);

// What the finalize task needs from a block: its tensors and layer results.
struct StoredBlockOutput {
  std::vector<PackedTensor> tensors;
  std::vector<LayerResult> layers;
  std::string isa;  // The kernel level it was computed at ("" if unrecorded).
  // A mixture-of-experts block: tokens per expert on each split, and the
  // starved experts (BlockTaskOutput's).
  std::vector<int64_t> routed_calibration_tokens;
  std::vector<int64_t> routed_heldout_tokens;
  std::vector<int> starved_experts;
};
// Checks <prefix><suffix> (".safetensors", ".cal.safetensors" or
// ".heldout.safetensors") of a published block against the sha256 its
// layers.json recorded when the block's task wrote it. DataLoss, naming the
// file and both hashes, when it differs or none was recorded. Non-empty
// `expected_layers_sha256` (what the coordinator recorded when the block's
// task completed) is checked against layers.json itself first, so that the
// list of hashes cannot have changed either. `digests`, when set, remembers
// the file's sha256 for the next check.
absl::Status VerifyBlockFile(const std::string& dir, int block,
                             const std::string& suffix,
                             const std::string& expected_layers_sha256 = "",
                             FileSystem* fs = FileSystem::Default(),
                             FileDigests* digests = nullptr);

// Checks a block's published output as a whole, as its completion is
// recorded: layers.json lists the sha256 of the block's tensors and of every
// other file it published, and each file matches. Returns layers.json's
// sha256, which the coordinator keeps for the tasks that read the block.
absl::StatusOr<std::string> VerifyPublishedBlock(
    const std::string& dir, int block, FileSystem* fs = FileSystem::Default());

// The block whose published output a VerifyBlockFile error is about (a
// payload on the status), so that the coordinator can run that block's task
// again; nullopt for any other status.
std::optional<int> ChangedBlockOutput(const absl::Status& status);

// FailedPrecondition when the block was computed at another kernel level
// than the calling thread's (core/kernels/dispatch.h). DataLoss when the
// tensors file or layers.json is not the one the block's task wrote
// (VerifyBlockFile, with `expected_layers_sha256` as there).
absl::StatusOr<StoredBlockOutput> ReadBlockOutput(
    const std::string& dir, int block,
    const std::string& expected_layers_sha256 = "",
    FileSystem* fs = FileSystem::Default());

// ReadBlockOutput without the tensors (left empty, and their file unread):
// for readers of the layers' results alone, such as the finalize's
// completion, whose tensors are already packed.
absl::StatusOr<StoredBlockOutput> ReadBlockLayers(
    const std::string& dir, int block,
    const std::string& expected_layers_sha256 = "",
    FileSystem* fs = FileSystem::Default());

}  // namespace quant

#endif  // QUANT_CORE_PIPELINE_TASK_IO_H_

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
// Every file is written atomically (temporary name, then rename), so a
// reader sees a whole file or none. Writes go through a FileSystem (default:
// POSIX) so tests can inject storage faults.
#ifndef QUANT_CORE_PIPELINE_TASK_IO_H_
#define QUANT_CORE_PIPELINE_TASK_IO_H_

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

// Lossless JSON of a layer result without its QuantizedLayer (that is in
// the block's tensors): doubles round-trip exactly.
nlohmann::json LayerResultToTaskJson(const LayerResult& layer);
// InvalidArgument naming the missing or mistyped field.
absl::StatusOr<LayerResult> LayerResultFromTaskJson(const nlohmann::json& j);

// "<dir>/block-00003" for block 3: the prefix of its files.
std::string BlockOutputPrefix(const std::string& dir, int block);

// Writes the block's tensors, layer results and leaving hidden states (those
// only when `output` holds them: a task given sinks for its leaving states
// has written them to <dir>/block-NNNNN.{cal,heldout}.safetensors itself).
absl::Status WriteBlockOutput(const std::string& dir,
                              const BlockTaskOutput& output,
                              FileSystem* fs = FileSystem::Default());

// Moves block `block`'s files from `attempt_dir` into `work_dir` by rename
// (both on one file system), the layer results last: a reader that finds
// them finds the rest. Publishing the same block twice is harmless: every
// run of a block writes the same bytes. A failed publish leaves the layer
// results unpublished; files renamed before the failure are replaced by the
// next run's identical ones.
absl::Status PublishBlockOutput(const std::string& attempt_dir,
                                const std::string& work_dir, int block,
                                FileSystem* fs = FileSystem::Default());

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
// list of hashes cannot have changed either.
absl::Status VerifyBlockFile(const std::string& dir, int block,
                             const std::string& suffix,
                             const std::string& expected_layers_sha256 = "",
                             FileSystem* fs = FileSystem::Default());

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

}  // namespace quant

#endif  // QUANT_CORE_PIPELINE_TASK_IO_H_

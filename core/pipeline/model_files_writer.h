// Writes a checkpoint's tensors as model.safetensors, or as numbered shards
// with model.safetensors.index.json (the Hugging Face layout) when they
// exceed the shard size.
#ifndef QUANT_CORE_PIPELINE_MODEL_FILES_WRITER_H_
#define QUANT_CORE_PIPELINE_MODEL_FILES_WRITER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/base/file_system.h"
#include "core/pack/packed_tensor.h"

namespace quant {

// Bytes of tensor data per shard before a new one starts (a tensor larger
// than this gets a shard of its own). Hugging Face's default is 5 GB.
inline constexpr int64_t kDefaultMaxShardBytes = int64_t{4} << 30;

// Writes `tensors` (in order) into `dir` through `fs`; returns the names of
// the files written. InvalidArgument for a duplicate tensor name or a bad
// shard size.
absl::StatusOr<std::vector<std::string>> WriteModelTensors(
    const std::string& dir, const std::vector<PackedTensor>& tensors,
    int64_t max_shard_bytes = kDefaultMaxShardBytes,
    FileSystem* fs = FileSystem::Default());

}  // namespace quant

#endif  // QUANT_CORE_PIPELINE_MODEL_FILES_WRITER_H_

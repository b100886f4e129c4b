// model.safetensors or shards plus their index.
#include "core/pipeline/model_files_writer.h"

#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/base/file_util.h"
#include "core/base/status_macros.h"
#include "core/io/safetensors.h"
#include "nlohmann/json.hpp"

namespace quant {

absl::StatusOr<std::vector<std::string>> WriteModelTensors(
    const std::string& dir, const std::vector<PackedTensor>& tensors,
    int64_t max_shard_bytes, FileSystem* fs) {
  if (max_shard_bytes <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_shard_bytes is ", max_shard_bytes, "; must be > 0"));
  }
  std::set<std::string> names;
  for (const PackedTensor& t : tensors) {
    if (!names.insert(t.name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor ", t.name, " appears twice"));
    }
  }
  // Greedy shards in tensor order.
  std::vector<std::vector<const PackedTensor*>> shards(1);
  int64_t shard_bytes = 0;
  int64_t total_bytes = 0;
  for (const PackedTensor& t : tensors) {
    const int64_t size = static_cast<int64_t>(t.bytes.size());
    if (!shards.back().empty() && shard_bytes + size > max_shard_bytes) {
      shards.emplace_back();
      shard_bytes = 0;
    }
    shards.back().push_back(&t);
    shard_bytes += size;
    total_bytes += size;
  }
  auto write_shard = [&](const std::string& name,
                         const std::vector<const PackedTensor*>& shard) {
    std::vector<TensorToWrite> views;
    for (const PackedTensor* t : shard) {
      views.push_back({t->name, t->dtype, t->shape, t->bytes});
    }
    return WriteSafetensors(JoinPath(dir, name), views, {{"format", "pt"}}, fs);
  };
  if (shards.size() == 1) {
    QUANT_RETURN_IF_ERROR(write_shard("model.safetensors", shards[0]));
    return std::vector<std::string>{"model.safetensors"};
  }
  std::vector<std::string> written;
  nlohmann::json weight_map = nlohmann::json::object();
  for (size_t i = 0; i < shards.size(); ++i) {
    const std::string name =
        absl::StrFormat("model-%05d-of-%05d.safetensors", i + 1, shards.size());
    QUANT_RETURN_IF_ERROR(write_shard(name, shards[i]));
    for (const PackedTensor* t : shards[i]) weight_map[t->name] = name;
    written.push_back(name);
  }
  nlohmann::json index = {{"metadata", {{"total_size", total_bytes}}},
                          {"weight_map", std::move(weight_map)}};
  QUANT_RETURN_IF_ERROR(WriteFileAtomically(
      JoinPath(dir, "model.safetensors.index.json"), index.dump(2) + "\n", fs));
  written.push_back("model.safetensors.index.json");
  return written;
}

}  // namespace quant

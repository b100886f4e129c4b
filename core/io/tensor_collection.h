// The tensors of a checkpoint directory, whether in one model.safetensors or
// sharded through model.safetensors.index.json ("weight_map": name -> file).
#ifndef QUANT_CORE_IO_TENSOR_COLLECTION_H_
#define QUANT_CORE_IO_TENSOR_COLLECTION_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/base/file_system.h"
#include "core/base/tensor.h"
#include "core/io/safetensors.h"

namespace quant {

class TensorCollection {
 public:
  // Opens `dir`/model.safetensors.index.json if present, else
  // `dir`/model.safetensors. Shard file names must stay inside `dir`; every
  // tensor named in the index must exist in its shard, and a tensor in two
  // shards is an error.
  // Files are read through `fs` (not owned).
  static absl::StatusOr<std::unique_ptr<TensorCollection>> Open(
      const std::string& dir, const SafetensorsLimits& limits = {},
      FileSystem* fs = FileSystem::Default());

  struct Entry {
    const SafetensorsFile* file;
    const TensorInfo* info;
  };

  // Every tensor, sorted by name.
  std::vector<Entry> Entries() const;
  // nullptr info when absent.
  Entry Find(absl::string_view name) const;
  absl::StatusOr<FloatTensor> ReadFloat(absl::string_view name) const;

  const std::vector<std::unique_ptr<SafetensorsFile>>& files() const {
    return files_;
  }
  bool sharded() const { return sharded_; }

 private:
  TensorCollection() = default;

  bool sharded_ = false;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, Entry, std::less<>> by_name_;
};

}  // namespace quant

#endif  // QUANT_CORE_IO_TENSOR_COLLECTION_H_

// Opening a checkpoint directory: one safetensors file or an indexed set of
// shards, cross-checked against the index.
#include "core/io/tensor_collection.h"

#include <map>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "core/base/file_util.h"
#include "core/base/status_macros.h"
#include "core/base/strict_json.h"
#include "nlohmann/json.hpp"

namespace quant {
namespace {

using json = nlohmann::json;

constexpr char kSingleFile[] = "model.safetensors";
constexpr char kIndexFile[] = "model.safetensors.index.json";
// Index files list names only; real ones are well under a few MB.
constexpr size_t kMaxIndexBytes = size_t{64} << 20;

std::string Quoted(absl::string_view text) {
  return absl::StrCat("\"", absl::CHexEscape(text), "\"");
}

// A shard must be a plain file name inside the checkpoint directory.
absl::Status CheckShardName(const std::string& index_path,
                            const std::string& tensor,
                            const std::string& shard) {
  if (shard.empty() || shard == "." || shard == ".." ||
      shard.find('/') != std::string::npos ||
      shard.find('\\') != std::string::npos ||
      shard.find('\0') != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        index_path, ": tensor ", Quoted(tensor), " names shard ", Quoted(shard),
        ", which is not a plain file name inside the checkpoint directory"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<TensorCollection>> TensorCollection::Open(
    const std::string& dir, const SafetensorsLimits& limits, FileSystem* fs) {
  if (!IsDirectory(dir)) {
    return absl::NotFoundError(
        absl::StrCat("checkpoint directory ", dir, " does not exist"));
  }
  std::unique_ptr<TensorCollection> collection(new TensorCollection());
  const std::string index_path = JoinPath(dir, kIndexFile);

  if (!FileExists(index_path)) {
    const std::string single_path = JoinPath(dir, kSingleFile);
    if (!FileExists(single_path)) {
      return absl::NotFoundError(
          absl::StrCat("no ", kSingleFile, " or ", kIndexFile, " in ", dir));
    }
    QUANT_ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsFile> file,
                           SafetensorsFile::Open(single_path, limits, fs));
    for (const TensorInfo& info : file->tensors()) {
      collection->by_name_.emplace(info.name, Entry{file.get(), &info});
    }
    collection->files_.push_back(std::move(file));
    return collection;
  }

  collection->sharded_ = true;
  QUANT_ASSIGN_OR_RETURN(const std::string index_text,
                         fs->ReadFile(index_path, kMaxIndexBytes));
  absl::StatusOr<json> index =
      ParseJsonStrict(index_text, absl::StrCat(index_path));
  if (!index.ok()) return index.status();
  if (!index->is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(
        index_path, ": must hold a JSON object, not ", index->type_name()));
  }
  auto weight_map = index->find("weight_map");
  if (weight_map == index->end() || !weight_map->is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(index_path,
                     ": \"weight_map\" must be an object mapping tensor names "
                     "to shard files"));
  }

  // Shard file -> tensors the index puts there.
  std::map<std::string, std::vector<std::string>> shards;
  for (const auto& [tensor, shard] : weight_map->items()) {
    if (!shard.is_string()) {
      return absl::InvalidArgumentError(absl::StrCat(
          index_path, ": \"weight_map\" entry for tensor ", Quoted(tensor),
          " must be a string, not ", shard.type_name()));
    }
    const std::string& shard_name = shard.get_ref<const std::string&>();
    QUANT_RETURN_IF_ERROR(CheckShardName(index_path, tensor, shard_name));
    shards[shard_name].push_back(tensor);
  }

  std::map<std::string, std::string, std::less<>> owner;  // tensor -> shard
  for (const auto& [shard_name, listed] : shards) {
    const std::string shard_path = JoinPath(dir, shard_name);
    if (!FileExists(shard_path)) {
      return absl::NotFoundError(
          absl::StrCat(index_path, ": shard ", shard_path, " (holding tensor ",
                       Quoted(listed.front()), ") does not exist"));
    }
    QUANT_ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsFile> file,
                           SafetensorsFile::Open(shard_path, limits, fs));
    for (const std::string& tensor : listed) {
      if (file->Find(tensor) == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat(
            index_path, ": tensor ", Quoted(tensor), " is listed in shard ",
            shard_name, " but that file does not contain it"));
      }
    }
    for (const TensorInfo& info : file->tensors()) {
      auto [it, inserted] = owner.emplace(info.name, shard_name);
      if (!inserted) {
        return absl::InvalidArgumentError(absl::StrCat(
            index_path, ": tensor ", Quoted(info.name),
            " is stored in two shards, ", it->second, " and ", shard_name));
      }
    }
    collection->files_.push_back(std::move(file));
  }

  // A tensor stored in a shard but absent from the index means the index
  // and the shards disagree; loaders would silently skip it.
  for (const auto& [tensor, shard_name] : owner) {
    auto listed = weight_map->find(tensor);
    if (listed == weight_map->end()) {
      return absl::InvalidArgumentError(
          absl::StrCat(index_path, ": tensor ", Quoted(tensor), " in shard ",
                       shard_name, " is not listed in \"weight_map\""));
    }
  }
  for (const auto& file : collection->files_) {
    for (const TensorInfo& info : file->tensors()) {
      collection->by_name_.emplace(info.name, Entry{file.get(), &info});
    }
  }
  return collection;
}

std::vector<TensorCollection::Entry> TensorCollection::Entries() const {
  std::vector<Entry> entries;
  entries.reserve(by_name_.size());
  for (const auto& [name, entry] : by_name_) entries.push_back(entry);
  return entries;
}

TensorCollection::Entry TensorCollection::Find(absl::string_view name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? Entry{nullptr, nullptr} : it->second;
}

absl::StatusOr<FloatTensor> TensorCollection::ReadFloat(
    absl::string_view name) const {
  const Entry entry = Find(name);
  if (entry.info == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("tensor ", Quoted(name), " not found in the checkpoint"));
  }
  return entry.file->ReadFloat(name);
}

}  // namespace quant

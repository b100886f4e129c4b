// BPE model: loading, and the merge loop of the Rust tokenizers crate
// (a priority queue of candidate merges ordered by rank, then position).
#include "core/text/bpe_model.h"

#include <algorithm>
#include <queue>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/base/json_fields.h"
#include "core/base/status_macros.h"
#include "core/base/utf8.h"

namespace quant {
namespace {

using json_fields::Json;

// Ids above this are surely a corrupt file, and would cost a huge table.
constexpr int64_t kMaxTokenId = 16 * 1024 * 1024;
// Words longer than this are encoded each time rather than cached.
constexpr size_t kMaxCachedWordBytes = 256;
// The Rust crate's default cache capacity.
constexpr size_t kCacheCapacity = 10000;

uint64_t PairKey(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
         static_cast<uint32_t>(right);
}

// A symbol of the word being merged: a doubly linked list over an array.
struct Symbol {
  int32_t id;
  int prev;
  int next;
  size_t length;  // Bytes of the word it covers; 0 once merged away.
};

struct Candidate {
  int32_t rank;
  int position;
  int32_t merged_id;
  // std::priority_queue pops the largest: invert so the lowest rank, then
  // the leftmost position, comes first.
  bool operator<(const Candidate& other) const {
    if (rank != other.rank) return rank > other.rank;
    return position > other.position;
  }
};

}  // namespace

absl::StatusOr<std::unique_ptr<BpeModel>> BpeModel::FromJson(
    const Json& config, const std::string& path) {
  std::unique_ptr<BpeModel> model(new BpeModel());
  auto dropout = config.find("dropout");
  if (dropout != config.end() && !dropout->is_null() &&
      !(dropout->is_number() && dropout->get<double>() == 0.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat(json_fields::FieldPath(path, "dropout"),
                     ": BPE dropout is for training and is not supported"));
  }
  QUANT_ASSIGN_OR_RETURN(
      model->fuse_unk_,
      json_fields::GetBoolOr(config, "fuse_unk", false, path));
  QUANT_ASSIGN_OR_RETURN(
      model->byte_fallback_,
      json_fields::GetBoolOr(config, "byte_fallback", false, path));
  QUANT_ASSIGN_OR_RETURN(
      model->ignore_merges_,
      json_fields::GetBoolOr(config, "ignore_merges", false, path));
  QUANT_ASSIGN_OR_RETURN(
      model->continuing_subword_prefix_,
      json_fields::GetStringOr(config, "continuing_subword_prefix", "", path));
  QUANT_ASSIGN_OR_RETURN(
      model->end_of_word_suffix_,
      json_fields::GetStringOr(config, "end_of_word_suffix", "", path));

  auto vocab = config.find("vocab");
  if (vocab == config.end() || !vocab->is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(
        json_fields::FieldPath(path, "vocab"), ": expected an object"));
  }
  QUANT_RETURN_IF_ERROR(
      model->LoadVocab(*vocab, json_fields::FieldPath(path, "vocab")));
  auto merges = config.find("merges");
  if (merges == config.end() || !merges->is_array()) {
    return absl::InvalidArgumentError(absl::StrCat(
        json_fields::FieldPath(path, "merges"), ": expected an array"));
  }
  QUANT_RETURN_IF_ERROR(
      model->LoadMerges(*merges, json_fields::FieldPath(path, "merges")));

  QUANT_ASSIGN_OR_RETURN(
      const std::string unk_token,
      json_fields::GetStringOr(config, "unk_token", "", path));
  if (!unk_token.empty()) {
    model->unk_id_ = model->TokenToId(unk_token);
    if (!model->unk_id_.has_value()) {
      return absl::InvalidArgumentError(
          absl::StrCat(json_fields::FieldPath(path, "unk_token"), ": '",
                       unk_token, "' is not in the vocabulary"));
    }
  }
  for (int byte = 0; byte < 256; ++byte) {
    model->byte_token_ids_[byte] =
        model->TokenToId(absl::StrFormat("<0x%02X>", byte)).value_or(-1);
  }
  return model;
}

absl::Status BpeModel::LoadVocab(const Json& vocab, const std::string& path) {
  vocab_.reserve(vocab.size());
  int64_t max_id = -1;
  for (const auto& [token, id] : vocab.items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 ||
        id.get<int64_t>() > kMaxTokenId) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, "[\"", token, "\"]: expected an id in [0, ", kMaxTokenId, "]"));
    }
    if (!IsValidUtf8(token)) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": a token is not valid UTF-8"));
    }
    const int64_t value = id.get<int64_t>();
    vocab_[token] = static_cast<int32_t>(value);
    max_id = std::max(max_id, value);
  }
  id_to_token_.assign(static_cast<size_t>(max_id + 1), std::string());
  id_present_.assign(static_cast<size_t>(max_id + 1), false);
  for (const auto& [token, id] : vocab_) {
    id_to_token_[id] = token;
    id_present_[id] = true;
  }
  return absl::OkStatus();
}

absl::Status BpeModel::LoadMerges(const Json& merges, const std::string& path) {
  merges_.reserve(merges.size());
  const size_t prefix_length = continuing_subword_prefix_.size();
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const Json& entry = merges[rank];
    std::string left;
    std::string right;
    if (entry.is_string()) {
      // Older files: "left right", split at the one space.
      const std::string& line = entry.get_ref<const std::string&>();
      const size_t space = line.find(' ');
      if (space == std::string::npos ||
          line.find(' ', space + 1) != std::string::npos) {
        return absl::InvalidArgumentError(absl::StrCat(
            json_fields::IndexPath(path, rank), ": expected \"left right\"",
            " with one space, got \"", line, "\""));
      }
      left = line.substr(0, space);
      right = line.substr(space + 1);
    } else if (entry.is_array() && entry.size() == 2 && entry[0].is_string() &&
               entry[1].is_string()) {
      left = entry[0].get<std::string>();
      right = entry[1].get<std::string>();
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat(json_fields::IndexPath(path, rank),
                       ": expected \"left right\" or [left, right]"));
    }
    const std::optional<int32_t> left_id = TokenToId(left);
    const std::optional<int32_t> right_id = TokenToId(right);
    if (!left_id.has_value() || !right_id.has_value()) {
      return absl::InvalidArgumentError(absl::StrCat(
          json_fields::IndexPath(path, rank), ": token '",
          left_id.has_value() ? right : left, "' is not in the vocabulary"));
    }
    std::string merged = left;
    if (prefix_length > 0 &&
        absl::string_view(right).substr(0, prefix_length) ==
            continuing_subword_prefix_) {
      merged.append(right, prefix_length, std::string::npos);
    } else {
      merged += right;
    }
    const std::optional<int32_t> merged_id = TokenToId(merged);
    if (!merged_id.has_value()) {
      return absl::InvalidArgumentError(
          absl::StrCat(json_fields::IndexPath(path, rank), ": merged token '",
                       merged, "' is not in the vocabulary"));
    }
    // As in the Rust crate, a repeated pair keeps its last rank.
    merges_[PairKey(*left_id, *right_id)] =
        Merge{static_cast<int32_t>(rank), *merged_id};
  }
  return absl::OkStatus();
}

std::optional<int32_t> BpeModel::TokenToId(absl::string_view token) const {
  auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* BpeModel::IdToToken(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= id_to_token_.size() ||
      !id_present_[id]) {
    return nullptr;
  }
  return &id_to_token_[id];
}

const BpeModel::Merge* BpeModel::FindMerge(int32_t left, int32_t right) const {
  auto it = merges_.find(PairKey(left, right));
  return it == merges_.end() ? nullptr : &it->second;
}

void BpeModel::Tokenize(absl::string_view word,
                        std::vector<int32_t>* ids) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    // Llama 3: a word that is itself a token is taken whole.
    if (std::optional<int32_t> id = TokenToId(word)) {
      ids->push_back(*id);
      return;
    }
  }
  const bool cacheable = word.size() <= kMaxCachedWordBytes;
  if (cacheable) {
    MutexLock lock(&cache_mutex_);
    auto it = cache_.find(word);
    if (it != cache_.end()) {
      ids->insert(ids->end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int32_t> encoded = Encode(word);
  ids->insert(ids->end(), encoded.begin(), encoded.end());
  if (cacheable) {
    MutexLock lock(&cache_mutex_);
    if (cache_.size() < kCacheCapacity) {
      cache_.emplace(std::string(word), std::move(encoded));
    }
  }
}

std::vector<int32_t> BpeModel::Encode(absl::string_view word) const {
  // Initial symbols: one per character, or its bytes' <0xXX> tokens, or
  // the unknown token (runs of unknowns fused when fuse_unk is set).
  std::vector<Symbol> symbols;
  symbols.reserve(word.size());
  auto add_symbol = [&symbols](int32_t id, size_t length) {
    const int index = static_cast<int>(symbols.size());
    symbols.push_back(Symbol{id, index - 1, index + 1, length});
  };
  // A run of unknown characters not yet added (kept as plain fields: GCC
  // warns falsely about std::optional<std::pair> here).
  bool has_pending_unk = false;
  size_t pending_unk_length = 0;
  std::string piece;
  size_t pos = 0;
  while (pos < word.size()) {
    const size_t begin = pos;
    DecodeUtf8At(word, &pos);
    const size_t length = pos - begin;
    piece.clear();
    if (begin > 0) piece += continuing_subword_prefix_;
    piece.append(word.data() + begin, length);
    if (pos == word.size()) piece += end_of_word_suffix_;

    if (std::optional<int32_t> id = TokenToId(piece)) {
      if (has_pending_unk) {
        add_symbol(*unk_id_, pending_unk_length);
        has_pending_unk = false;
      }
      add_symbol(*id, length);
      continue;
    }
    if (byte_fallback_) {
      bool all_bytes_known = true;
      for (char c : piece) {
        if (byte_token_ids_[static_cast<unsigned char>(c)] < 0) {
          all_bytes_known = false;
        }
      }
      if (all_bytes_known) {
        // As in the Rust crate, byte tokens do not flush a pending unknown.
        for (char c : piece) {
          add_symbol(byte_token_ids_[static_cast<unsigned char>(c)], 1);
        }
        continue;
      }
    }
    if (unk_id_.has_value()) {
      if (has_pending_unk && fuse_unk_) {
        pending_unk_length += length;
      } else {
        if (has_pending_unk) add_symbol(*unk_id_, pending_unk_length);
        has_pending_unk = true;
        pending_unk_length = length;
      }
    }
    // Without an unknown token the character is dropped, as in the crate.
  }
  if (has_pending_unk) add_symbol(*unk_id_, pending_unk_length);
  if (symbols.empty()) return {};
  symbols.back().next = -1;

  std::priority_queue<Candidate> queue;
  for (size_t i = 0; i + 1 < symbols.size(); ++i) {
    if (const Merge* merge = FindMerge(symbols[i].id, symbols[i + 1].id)) {
      queue.push({merge->rank, static_cast<int>(i), merge->merged_id});
    }
  }
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& current = symbols[top.position];
    if (current.length == 0 || current.next < 0) continue;
    const int next_index = current.next;
    const Symbol right = symbols[next_index];
    // Skip entries made stale by an earlier merge.
    const Merge* merge = FindMerge(current.id, right.id);
    if (merge == nullptr || merge->merged_id != top.merged_id) continue;

    current.id = top.merged_id;
    current.length += right.length;
    current.next = right.next;
    symbols[next_index].length = 0;
    if (right.next >= 0) symbols[right.next].prev = top.position;

    if (current.prev >= 0) {
      if (const Merge* left_merge =
              FindMerge(symbols[current.prev].id, current.id)) {
        queue.push({left_merge->rank, current.prev, left_merge->merged_id});
      }
    }
    if (current.next >= 0) {
      if (const Merge* right_merge =
              FindMerge(current.id, symbols[current.next].id)) {
        queue.push({right_merge->rank, top.position, right_merge->merged_id});
      }
    }
  }
  std::vector<int32_t> ids;
  for (const Symbol& symbol : symbols) {
    if (symbol.length > 0) ids.push_back(symbol.id);
  }
  return ids;
}

}  // namespace quant

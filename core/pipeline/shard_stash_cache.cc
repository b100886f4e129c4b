// ShardStashCache: a byte-bounded, least-recently-kept store of the shard
// stashes a worker's round tasks leave for the next round.
#include "core/pipeline/shard_stash_cache.h"

#include "absl/strings/str_cat.h"

namespace quant {

std::string ShardStashCache::Key(const std::string& job_id,
                                 const std::string& work_dir, int block,
                                 bool calibration, int shard) {
  return absl::StrCat(job_id, "\n", work_dir, "\n", block, "/",
                      calibration ? "cal" : "heldout", "/", shard);
}

ShardRoundStash ShardStashCache::Take(const std::string& key) {
  MutexLock lock(&mu_);
  for (auto it = kept_.begin(); it != kept_.end(); ++it) {
    if (it->first != key) continue;
    ShardRoundStash stash = std::move(it->second);
    bytes_ -= stash.bytes();
    kept_.erase(it);
    return stash;
  }
  return ShardRoundStash();
}

void ShardStashCache::Put(const std::string& key, ShardRoundStash stash) {
  const int64_t size = stash.bytes();
  if (size == 0 || size > max_bytes_) return;
  MutexLock lock(&mu_);
  for (auto it = kept_.begin(); it != kept_.end(); ++it) {
    if (it->first != key) continue;
    bytes_ -= it->second.bytes();
    kept_.erase(it);
    break;
  }
  while (!kept_.empty() && bytes_ + size > max_bytes_) {
    bytes_ -= kept_.front().second.bytes();
    kept_.pop_front();
  }
  bytes_ += size;
  kept_.emplace_back(key, std::move(stash));
}

int64_t ShardStashCache::bytes() const {
  MutexLock lock(&mu_);
  return bytes_;
}

int ShardStashCache::entries() const {
  MutexLock lock(&mu_);
  return static_cast<int>(kept_.size());
}

}  // namespace quant

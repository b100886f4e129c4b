// RoundBlockCache: the one block a worker's round tasks keep between them.
#include "core/pipeline/round_block_cache.h"

#include "absl/strings/str_cat.h"

namespace quant {

std::string RoundBlockCache::Key(const std::string& job_id,
                                 const std::string& work_dir, int block) {
  return absl::StrCat(job_id, "\n", work_dir, "\n", block);
}

std::optional<RoundBlock> RoundBlockCache::Take(const std::string& key) {
  MutexLock lock(&mu_);
  if (!kept_.has_value() || key_ != key) return std::nullopt;
  std::optional<RoundBlock> block = std::move(kept_);
  kept_.reset();
  key_.clear();
  ++hits_;
  return block;
}

void RoundBlockCache::Put(const std::string& key, RoundBlock block) {
  MutexLock lock(&mu_);
  key_ = key;
  kept_ = std::move(block);
}

int RoundBlockCache::hits() const {
  MutexLock lock(&mu_);
  return hits_;
}

}  // namespace quant

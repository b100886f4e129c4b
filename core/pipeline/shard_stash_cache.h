// Keeps what a worker's shard tasks computed of their shards
// (ShardRoundStash: the attention context, the residual stream) for the
// same shard's next round, which the coordinator prefers to lease to the
// worker that ran the last one (docs/DATA_PARALLEL.md). Bounded in bytes,
// the least recently kept dropped first. A task that finds nothing (another
// worker ran the last round, the worker restarted, the entry was dropped)
// computes the block from the shard's entering states, with the same bytes.
#ifndef QUANT_CORE_PIPELINE_SHARD_STASH_CACHE_H_
#define QUANT_CORE_PIPELINE_SHARD_STASH_CACHE_H_

#include <cstdint>
#include <list>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "core/base/mutex.h"
#include "core/pipeline/block_task.h"

namespace quant {

class ShardStashCache {
 public:
  // `max_bytes` <= 0 keeps nothing.
  explicit ShardStashCache(int64_t max_bytes) : max_bytes_(max_bytes) {}
  ShardStashCache(const ShardStashCache&) = delete;
  ShardStashCache& operator=(const ShardStashCache&) = delete;

  // The key of one shard of one split of one block of one job.
  static std::string Key(const std::string& job_id, const std::string& work_dir,
                         int block, bool calibration, int shard);

  // Removes and returns what is kept under `key` (empty when nothing is),
  // so that two tasks never share one stash.
  ShardRoundStash Take(const std::string& key);
  // Keeps `stash` under `key`, dropping the least recently kept entries
  // while the total is over the bound (the new one too, alone over it). An
  // empty stash is not kept.
  void Put(const std::string& key, ShardRoundStash stash);

  int64_t bytes() const;
  int entries() const;

 private:
  const int64_t max_bytes_;
  mutable Mutex mu_;
  // Most recently kept last.
  std::list<std::pair<std::string, ShardRoundStash>> kept_ ABSL_GUARDED_BY(mu_);
  int64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace quant

#endif  // QUANT_CORE_PIPELINE_SHARD_STASH_CACHE_H_

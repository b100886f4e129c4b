// Keeps the block a worker's round tasks (round_job_tasks.h) last worked
// on: its checked float weights (reading, converting and checking every
// value is the slowest step of opening a block) and its state rebuilt from
// the reduces' deltas, so that the next round task of that block on this
// worker applies only the deltas published since. A worker runs a block's
// rounds one after another, so this saves most tasks the rebuild.
//
// It holds one block, taken out while a task runs and put back after: a
// worker's peak memory is what a running task holds anyway. Every delta a
// kept state applied is named with the sha256 it had; a task reuses the
// state only where each of those files still has that sha256 (checked as
// the task checks every round file it reads), else it rebuilds.
#ifndef QUANT_CORE_PIPELINE_ROUND_BLOCK_CACHE_H_
#define QUANT_CORE_PIPELINE_ROUND_BLOCK_CACHE_H_

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "core/base/mutex.h"
#include "core/forward/block_weights.h"
#include "core/model/linear_layers.h"
#include "core/pipeline/block_task.h"

namespace quant {

// One block as its round tasks load it.
struct RoundBlock {
  // BlockTaskInput's weights and previous (the previous release's layers).
  BlockWeights weights;
  std::map<LayerType, RowMatrixF> previous;
  // The state after state->groups_done reduces, and each delta file applied
  // to reach it (its name relative to the work directory, its sha256), in
  // order; nullopt when not kept.
  std::optional<BlockRoundState> state;
  std::vector<std::pair<std::string, std::string>> applied;
};

class RoundBlockCache {
 public:
  RoundBlockCache() = default;
  RoundBlockCache(const RoundBlockCache&) = delete;
  RoundBlockCache& operator=(const RoundBlockCache&) = delete;

  // The key of one block of one job.
  static std::string Key(const std::string& job_id, const std::string& work_dir,
                         int block);

  // Removes and returns the block kept under `key`; nullopt when another
  // (or none) is kept, so two tasks never share one.
  std::optional<RoundBlock> Take(const std::string& key);
  // Keeps `block` under `key` in place of whatever was kept.
  void Put(const std::string& key, RoundBlock block);

  // How many Take calls found their block (tests).
  int hits() const;

 private:
  mutable Mutex mu_;
  std::string key_ ABSL_GUARDED_BY(mu_);
  std::optional<RoundBlock> kept_ ABSL_GUARDED_BY(mu_);
  int hits_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace quant

#endif  // QUANT_CORE_PIPELINE_ROUND_BLOCK_CACHE_H_

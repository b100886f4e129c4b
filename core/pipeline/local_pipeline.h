// The whole job in one process: plan, calibration split, embeddings, every
// block task in order, then the finalize task. `quantctl quantize --local`
// runs this; the service runs the same tasks on workers.
#ifndef QUANT_CORE_PIPELINE_LOCAL_PIPELINE_H_
#define QUANT_CORE_PIPELINE_LOCAL_PIPELINE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/pipeline/block_task.h"
#include "core/pipeline/finalize_task.h"
#include "core/pipeline/job_tasks.h"
#include "core/recipe/recipe.h"
#include "nlohmann/json.hpp"

namespace quant {

struct LocalQuantizeOptions {
  std::string checkpoint_dir;
  std::string calibration_path;
  std::string tokenizer_dir;  // Empty: checkpoint_dir.
  std::string out_dir;        // Must not exist.
  Recipe recipe;
  int64_t max_shard_bytes = kDefaultMaxShardBytes;
  int eval_batch_windows = 8;
  // When set, every block task's output goes through files in this
  // directory (task_io.h), as it does between service workers, and a rerun
  // with the same directory, source, recipe and calibration set resumes:
  // blocks whose output is already there are read, not recomputed. A
  // directory made for another job is refused.
  std::string work_dir;
  // Hidden states held in memory between blocks (calibration and held-out
  // together). Larger ones stay in files (the work directory's block
  // outputs, else a folder beside out_dir removed at the end) and are read
  // a chunk at a time; the results are the same bytes either way.
  int64_t max_activation_bytes = kDefaultMaxActivationBytes;
  // Threads each block task runs on (BlockTaskInput::threads); the output
  // does not depend on it.
  int threads = 1;
};

// Receives progress; every method has a default that ignores it.
class PipelineObserver {
 public:
  virtual ~PipelineObserver() = default;
  virtual void OnStage(const std::string& /*what*/) {}
  virtual void OnBlockStart(int /*block*/, int /*blocks*/) {}
  // A block whose output was found in the work directory.
  virtual void OnBlockResumed(int /*block*/, int /*blocks*/) {}
  virtual void OnLayer(const LayerResult& /*layer*/) {}
  virtual void OnBlockDone(int /*block*/, int /*blocks*/, double /*seconds*/) {}
};

struct LocalQuantizeResult {
  nlohmann::json audit;
  nlohmann::json manifest;
  bool passed = false;  // The gate verdict.
  std::vector<std::string> warnings;
};

// Errors leave nothing at out_dir.
absl::StatusOr<LocalQuantizeResult> RunLocalQuantization(
    const LocalQuantizeOptions& options, PipelineObserver* observer = nullptr);

}  // namespace quant

#endif  // QUANT_CORE_PIPELINE_LOCAL_PIPELINE_H_

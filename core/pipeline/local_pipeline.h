// The whole job in one process: an in-process executor of the task plan the
// service runs on workers (job_tasks.h): every block task in order, then the
// finalize task, through the same files. `quantctl quantize --local` runs
// this, so a change to the task flow happens in one place.
#ifndef QUANT_CORE_PIPELINE_LOCAL_PIPELINE_H_
#define QUANT_CORE_PIPELINE_LOCAL_PIPELINE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/base/file_system.h"
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
  // The job's work directory (task_io.h layout): every block task publishes
  // its output there, as between service workers. When set, it is kept and
  // a rerun with the same directory, source, recipe, calibration set and
  // kernel level resumes: blocks whose output is already there are not
  // recomputed. A directory made for another job is refused. Empty: a
  // temporary folder beside out_dir, holding at most two blocks' hidden
  // states at a time, removed at the end.
  std::string work_dir;
  // Hidden states a block task holds in memory (calibration and held-out
  // together). Larger ones are spilled to files in the work directory and
  // read a chunk at a time; the results are the same bytes either way.
  int64_t max_activation_bytes = kDefaultMaxActivationBytes;
  // Threads each block task runs on (BlockTaskInput::threads); the output
  // does not depend on it.
  int threads = 1;
  // Every write of the run (work directory and output) goes through it
  // (not owned, never null); tests inject storage faults here.
  FileSystem* file_system = FileSystem::Default();
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

// Errors leave nothing at out_dir (nor a temporary work directory).
absl::StatusOr<LocalQuantizeResult> RunLocalQuantization(
    const LocalQuantizeOptions& options, PipelineObserver* observer = nullptr);

}  // namespace quant

#endif  // QUANT_CORE_PIPELINE_LOCAL_PIPELINE_H_

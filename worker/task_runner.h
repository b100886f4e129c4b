// One leased task run through core/: a quant.v1.Task (block, finalize, or
// a round task of a block: core/pipeline/round_job_tasks.h)
// becomes the core's JobTaskContext (paths from file:// URIs, the recipe
// from its proto, the calibration file checked against its sha256) and runs
// with progress reported as layers finish.
#ifndef QUANT_WORKER_TASK_RUNNER_H_
#define QUANT_WORKER_TASK_RUNNER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "core/base/file_digests.h"
#include "core/pipeline/job_inputs_cache.h"
#include "core/pipeline/job_tasks.h"
#include "core/pipeline/round_block_cache.h"
#include "core/pipeline/shard_stash_cache.h"
#include "quant/v1/worker.pb.h"

namespace quant::worker {

// Receives progress from the running task (from its thread).
struct TaskProgressSink {
  std::function<void(const std::string&)> on_stage;
  std::function<void(const v1::LayerAudit&)> on_layer;
  // The cores' work for a finished layer (MethodChoices' flops/seconds).
  std::function<void(double hessian_flops, double hessian_seconds,
                     double gptq_flops, double gptq_seconds)>
      on_core_work;
};

struct TaskOutcome {
  std::string output_uri;  // What CompleteTask reports.
  // Of the output's marker file (a block's layers.json, the manifest).
  std::string output_sha256;
  bool passed = false;  // Finalize: the gate verdict.
  // A shard task whose shard lies past its split's end: nothing published
  // (output_uri is where it would have been, output_sha256 empty).
  bool empty_shard = false;
};

// What the worker lends each task (see JobTaskContext).
struct TaskLimits {
  // Hidden states a block task holds in memory; it spills the rest to its
  // attempt area.
  int64_t max_activation_bytes = kDefaultMaxActivationBytes;
  // Threads a block task runs on.
  int threads = 1;
  // Keeps a job's opened inputs between its round tasks (not owned; null:
  // each task opens them).
  JobInputsCache* inputs_cache = nullptr;
  // Keeps what shard tasks computed for their shards' next rounds (not
  // owned; null: each round task computes its block from the shard's
  // entering states).
  ShardStashCache* shard_stashes = nullptr;
  // Keeps the block round tasks last loaded, and the sha256 of the files
  // they checked (not owned; null: each task loads and reads again).
  RoundBlockCache* round_blocks = nullptr;
  FileDigests* file_digests = nullptr;
};

// Errors: InvalidArgument / NotFound / DataLoss for bad input and
// ResourceExhausted for a full disk (not worth a retry), Cancelled when
// `cancelled` was set, others as the core returns them.
absl::StatusOr<TaskOutcome> RunTask(const v1::Task& task,
                                    const TaskProgressSink& sink,
                                    const std::atomic<bool>* cancelled,
                                    const TaskLimits& limits);

// Whether another attempt could succeed where this one failed.
bool IsRetryable(const absl::Status& status);

}  // namespace quant::worker

#endif  // QUANT_WORKER_TASK_RUNNER_H_

// Keeps the inputs of the job a process opened last, for its next task of
// the same job. A worker running a job's round tasks (round_job_tasks.h)
// runs many small tasks of one job in a row, and opening a job's inputs
// (reading its plan, tokenizing its calibration set) can cost more than a
// small task's work. The inputs are keyed by everything that opening them
// reads from the task's context, so a task of another job, or of the same
// job with other files, opens its own.
#ifndef QUANT_CORE_PIPELINE_JOB_INPUTS_CACHE_H_
#define QUANT_CORE_PIPELINE_JOB_INPUTS_CACHE_H_

#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "core/base/mutex.h"
#include "core/pipeline/job_tasks.h"

namespace quant {
namespace pipeline_internal {
struct JobInputs;
}  // namespace pipeline_internal

class JobInputsCache {
 public:
  JobInputsCache();
  ~JobInputsCache();
  JobInputsCache(const JobInputsCache&) = delete;
  JobInputsCache& operator=(const JobInputsCache&) = delete;

  // For core/pipeline: the inputs `context` names, opened by this call or
  // an earlier one with the same key (one job's at a time). A failed open
  // is not kept. Safe to call from several threads.
  absl::StatusOr<std::shared_ptr<const pipeline_internal::JobInputs>> Open(
      const JobTaskContext& context, const TaskControl& control);

  // How many calls opened the inputs rather than reused them.
  int opens() const;

 private:
  mutable Mutex mu_;
  std::string key_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<const pipeline_internal::JobInputs> inputs_
      ABSL_GUARDED_BY(mu_);
  int opens_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace quant

#endif  // QUANT_CORE_PIPELINE_JOB_INPUTS_CACHE_H_

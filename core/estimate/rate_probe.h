// A worker's rates (work_model.h), measured on the kernels it runs at the
// thread count its tasks use: a synthetic Llama block's forward, a
// Hessian's rank updates and a GPTQ solve, each small (well under a second
// together in a release build) and timed after a warm-up run. Small
// products run below a large model's rate; quantd's predictions scale by
// the job's finished tasks, so the probe needs to rank machines and give a
// first figure, not to be exact.
#ifndef QUANT_CORE_ESTIMATE_RATE_PROBE_H_
#define QUANT_CORE_ESTIMATE_RATE_PROBE_H_

#include "absl/status/statusor.h"
#include "core/base/thread_pool.h"
#include "core/estimate/work_model.h"

namespace quant {

// Runs on `pool` (inline when null) at the process's kernel level.
absl::StatusOr<WorkRates> MeasureWorkRates(ThreadPool* pool);

}  // namespace quant

#endif  // QUANT_CORE_ESTIMATE_RATE_PROBE_H_

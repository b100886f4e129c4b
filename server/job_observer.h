// What happens to jobs and tasks, for whoever watches from outside the
// store (the Prometheus metrics). JobLifecycle and the worker service call
// it after each change; every method defaults to nothing, and a call must
// not fail the change it reports.
#ifndef QUANT_SERVER_JOB_OBSERVER_H_
#define QUANT_SERVER_JOB_OBSERVER_H_

#include <string>

#include "absl/time/time.h"
#include "quant/v1/audit.pb.h"
#include "server/audit_reader.h"
#include "server/store/job_store.h"

namespace quant::server {

struct UpkeepResult;

class JobObserver {
 public:
  virtual ~JobObserver() = default;
  virtual void OnTaskLeased(const store::Task& /*task*/) {}
  // `duration`: since its lease, when this coordinator handed it out.
  virtual void OnTaskCompleted(const store::Task& /*task*/,
                               absl::Duration /*duration*/) {}
  virtual void OnTaskFailed(const store::Task& /*task*/, bool /*requeued*/) {}
  virtual void OnLayerFinished(const std::string& /*job_id*/,
                               const v1::LayerAudit& /*layer*/) {}
  virtual void OnProgress(const std::string& /*job_id*/) {}
  virtual void OnJobState(const std::string& /*job_id*/,
                          store::JobState /*state*/) {}
  // The published audit of a finished job (gates included).
  virtual void OnAudit(const std::string& /*job_id*/,
                       const PublishedAudit& /*audit*/) {}
  virtual void OnUpkeep(const UpkeepResult& /*result*/) {}
};

}  // namespace quant::server

#endif  // QUANT_SERVER_JOB_OBSERVER_H_

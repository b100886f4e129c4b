// A JobObserver that passes every call on to several (the metrics and the
// job ETA), in order.
#ifndef QUANT_SERVER_JOB_OBSERVER_LIST_H_
#define QUANT_SERVER_JOB_OBSERVER_LIST_H_

#include <string>
#include <utility>
#include <vector>

#include "server/job_observer.h"

namespace quant::server {

class JobObserverList : public JobObserver {
 public:
  // Not owned; each must outlive this.
  explicit JobObserverList(std::vector<JobObserver*> observers)
      : observers_(std::move(observers)) {}

  void OnTaskLeased(const store::Task& task) override {
    for (JobObserver* o : observers_) o->OnTaskLeased(task);
  }
  void OnTaskCompleted(const store::Task& task,
                       absl::Duration duration) override {
    for (JobObserver* o : observers_) o->OnTaskCompleted(task, duration);
  }
  void OnTaskFailed(const store::Task& task, bool requeued) override {
    for (JobObserver* o : observers_) o->OnTaskFailed(task, requeued);
  }
  void OnLayerFinished(const std::string& job_id,
                       const v1::LayerAudit& layer) override {
    for (JobObserver* o : observers_) o->OnLayerFinished(job_id, layer);
  }
  void OnProgress(const std::string& job_id) override {
    for (JobObserver* o : observers_) o->OnProgress(job_id);
  }
  void OnJobState(const std::string& job_id, store::JobState state) override {
    for (JobObserver* o : observers_) o->OnJobState(job_id, state);
  }
  void OnAudit(const std::string& job_id,
               const PublishedAudit& audit) override {
    for (JobObserver* o : observers_) o->OnAudit(job_id, audit);
  }
  void OnUpkeep(const UpkeepResult& result) override {
    for (JobObserver* o : observers_) o->OnUpkeep(result);
  }

 private:
  std::vector<JobObserver*> observers_;
};

}  // namespace quant::server

#endif  // QUANT_SERVER_JOB_OBSERVER_LIST_H_

// How long a job has run and how long it has left. A job's spec carries
// its work counted from its plan (core/estimate/work_model.h); the workers
// report their measured rates when they register; JobEta watches the tasks
// (a JobObserver) and keeps how long each finished one took on this
// coordinator. The prediction: each remaining task's work at the fleet's
// rates, scaled by (time the job's finished tasks took) / (time predicted
// for them), less what a running task has already run. Kept in memory: after
// a restart the scale starts again from the rates.
#ifndef QUANT_SERVER_JOB_ETA_H_
#define QUANT_SERVER_JOB_ETA_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/base/clock.h"
#include "core/base/mutex.h"
#include "core/estimate/work_model.h"
#include "core/recipe/recipe.h"
#include "quant/v1/service.pb.h"
#include "server/job_observer.h"
#include "server/job_spec.h"
#include "server/store/job_store.h"

namespace quant::server {

// The registered workers' rates: per kind, the median over the live
// workers that measured theirs.
struct FleetRates {
  WorkRates rates;
  int workers = 0;  // Live workers with measured rates.
};

// The median of each rate over `rates` that are known().
FleetRates MedianRates(const std::vector<WorkRates>& rates);

// What is known of a job's tasks' times, by task index.
struct TaskTimes {
  std::map<int, double> finished_seconds;  // Completed on this coordinator.
  std::map<int, double> running_seconds;   // Leased, how long ago.
};

// Seconds until the tasks of `work` not yet DONE in `tasks` are done, or
// nullopt when nothing gives a time (no rates and no finished task).
std::optional<double> PredictRemainingSeconds(
    const JobWork& work, Propagation propagation,
    const std::vector<store::Task>& tasks, const TaskTimes& times,
    const FleetRates& fleet);

class JobEta : public JobObserver {
 public:
  // `fleet` gives the registered workers' rates now. `clock` must outlive
  // this.
  JobEta(Clock* clock, std::function<FleetRates()> fleet);

  void OnTaskLeased(const store::Task& task) override;
  void OnTaskCompleted(const store::Task& task,
                       absl::Duration duration) override;
  void OnTaskFailed(const store::Task& task, bool requeued) override;
  void OnJobState(const std::string& job_id, store::JobState state) override;

  // Sets progress->elapsed_seconds and, when known, eta_seconds.
  void Fill(const store::Job& job, const JobSpec& spec,
            const std::vector<store::Task>& tasks,
            v1::Progress* progress) const;

  FleetRates Fleet() const { return fleet_ ? fleet_() : FleetRates(); }

 private:
  Clock* const clock_;
  const std::function<FleetRates()> fleet_;
  mutable Mutex mu_;
  // job -> task index -> lease start (ms on clock_).
  std::map<std::string, std::map<int, int64_t>> started_ms_
      ABSL_GUARDED_BY(mu_);
  // job -> task index -> seconds it took.
  std::map<std::string, std::map<int, double>> finished_seconds_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace quant::server

#endif  // QUANT_SERVER_JOB_ETA_H_

// The jobs the load test created, shared by its client threads: which
// request made each (for replays), the last state any client saw, and
// which are finished (for GetJobReport). The final check walks it to count
// lost jobs.
#ifndef QUANT_BENCH_LOAD_JOB_REGISTRY_H_
#define QUANT_BENCH_LOAD_JOB_REGISTRY_H_

#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "core/base/mutex.h"
#include "quant/v1/service.pb.h"

namespace quant::load {

struct CreatedJob {
  std::string id;
  v1::CreateJobRequest request;  // Replayed as is.
};

class JobRegistry {
 public:
  // False when `job.id` is already registered: a new request_id must make
  // a new job.
  bool Add(CreatedJob job);
  // Records a state seen in a response (states only move forward, so an
  // older response never undoes a terminal one).
  void Observe(const std::string& id, v1::JobState state);

  std::optional<CreatedJob> Random(std::mt19937_64& rng) const;
  std::optional<std::string> RandomFinished(std::mt19937_64& rng) const;
  // Ids of `ids` not yet seen terminal.
  std::vector<std::string> Pending(const std::vector<std::string>& ids) const;

  std::vector<std::string> Ids() const;
  size_t size() const;

 private:
  mutable Mutex mutex_;
  std::vector<CreatedJob> jobs_ ABSL_GUARDED_BY(mutex_);
  std::map<std::string, v1::JobState> states_ ABSL_GUARDED_BY(mutex_);
  std::vector<std::string> finished_ ABSL_GUARDED_BY(mutex_);
};

bool IsTerminal(v1::JobState state);

}  // namespace quant::load

#endif  // QUANT_BENCH_LOAD_JOB_REGISTRY_H_

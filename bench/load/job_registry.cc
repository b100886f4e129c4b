// JobRegistry: the created jobs and the states seen for them.
#include "bench/load/job_registry.h"

#include <utility>

namespace quant::load {

bool IsTerminal(v1::JobState state) {
  return state == v1::JOB_STATE_SUCCEEDED || state == v1::JOB_STATE_FAILED ||
         state == v1::JOB_STATE_CANCELLED;
}

bool JobRegistry::Add(CreatedJob job) {
  MutexLock lock(&mutex_);
  if (!states_.emplace(job.id, v1::JOB_STATE_QUEUED).second) return false;
  jobs_.push_back(std::move(job));
  return true;
}

void JobRegistry::Observe(const std::string& id, v1::JobState state) {
  MutexLock lock(&mutex_);
  auto it = states_.find(id);
  if (it == states_.end() || IsTerminal(it->second)) return;
  it->second = state;
  if (state == v1::JOB_STATE_SUCCEEDED) finished_.push_back(id);
}

std::optional<CreatedJob> JobRegistry::Random(std::mt19937_64& rng) const {
  MutexLock lock(&mutex_);
  if (jobs_.empty()) return std::nullopt;
  return jobs_[std::uniform_int_distribution<size_t>(0, jobs_.size() - 1)(rng)];
}

std::optional<std::string> JobRegistry::RandomFinished(
    std::mt19937_64& rng) const {
  MutexLock lock(&mutex_);
  if (finished_.empty()) return std::nullopt;
  return finished_[std::uniform_int_distribution<size_t>(
      0, finished_.size() - 1)(rng)];
}

std::vector<std::string> JobRegistry::Pending(
    const std::vector<std::string>& ids) const {
  MutexLock lock(&mutex_);
  std::vector<std::string> out;
  for (const std::string& id : ids) {
    auto it = states_.find(id);
    if (it != states_.end() && !IsTerminal(it->second)) out.push_back(id);
  }
  return out;
}

std::vector<std::string> JobRegistry::Ids() const {
  MutexLock lock(&mutex_);
  std::vector<std::string> out;
  for (const CreatedJob& job : jobs_) out.push_back(job.id);
  return out;
}

size_t JobRegistry::size() const {
  MutexLock lock(&mutex_);
  return jobs_.size();
}

}  // namespace quant::load

// JobEta and PredictRemainingSeconds; see job_eta.h.
#include "server/job_eta.h"

#include <algorithm>
#include <map>
#include <optional>
#include <utility>

namespace quant::server {
namespace {

// Rates to count work in when no worker measured any: only ratios of
// predicted times matter then, as the finished tasks give the scale.
constexpr double kNominalFlopsPerSecond = 1e10;

bool IsRoundTask(const store::Task& task) {
  return store::IsRoundTaskKind(task.kind);
}

// A task's share of its job's work: the finalize's, a block task's block,
// or a round task's equal share of its block (`round_tasks`: the tasks of
// each block run as rounds). A finalize in `gate_parts` parts: each part
// an equal share of its evaluation, which is nearly all of the
// finalize's work; the pack and the completion are not counted. nullopt
// for a task the work does not cover.
std::optional<TaskWork> WorkOf(const JobWork& work, const store::Task& task,
                               const std::map<int, int>& round_tasks,
                               int gate_parts) {
  if (task.kind == store::TaskKind::kGatePart) {
    TaskWork share = work.finalize;
    const double n = std::max(1, gate_parts);
    share.forward_flops /= n;
    share.hessian_flops /= n;
    share.gptq_flops /= n;
    return share;
  }
  if (task.kind == store::TaskKind::kFinalizePack) return std::nullopt;
  if (task.kind == store::TaskKind::kFinalize) {
    if (gate_parts > 0) return std::nullopt;
    return work.finalize;
  }
  if (task.block < 0 || task.block >= static_cast<int>(work.blocks.size())) {
    return std::nullopt;
  }
  TaskWork share = work.blocks[task.block];
  if (IsRoundTask(task)) {
    auto it = round_tasks.find(task.block);
    const double n = it == round_tasks.end() ? 1.0 : it->second;
    share.forward_flops /= n;
    share.hessian_flops /= n;
    share.gptq_flops /= n;
  }
  return share;
}

}  // namespace

FleetRates MedianRates(const std::vector<WorkRates>& rates) {
  std::vector<double> forward;
  std::vector<double> hessian;
  std::vector<double> gptq;
  for (const WorkRates& r : rates) {
    if (!r.known()) continue;
    forward.push_back(r.forward_flops_per_second);
    hessian.push_back(r.hessian_flops_per_second);
    gptq.push_back(r.gptq_flops_per_second);
  }
  FleetRates fleet;
  fleet.workers = static_cast<int>(forward.size());
  if (forward.empty()) return fleet;
  const auto median = [](std::vector<double>& v) {
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
  };
  fleet.rates.forward_flops_per_second = median(forward);
  fleet.rates.hessian_flops_per_second = median(hessian);
  fleet.rates.gptq_flops_per_second = median(gptq);
  return fleet;
}

std::optional<double> PredictRemainingSeconds(
    const JobWork& work, Propagation propagation,
    const std::vector<store::Task>& tasks, const TaskTimes& times,
    const FleetRates& fleet) {
  WorkRates rates = fleet.rates;
  const bool measured = fleet.workers > 0 && rates.known();
  if (!measured) {
    rates.forward_flops_per_second = kNominalFlopsPerSecond;
    rates.hessian_flops_per_second = kNominalFlopsPerSecond;
    rates.gptq_flops_per_second = kNominalFlopsPerSecond;
  }
  // Round tasks per block, and the most that run side by side (a
  // round's shard tasks).
  std::map<int, int> round_tasks;
  std::map<std::pair<int, int>, int> round_width;
  int widest_round = 1;
  int gate_parts = 0;
  for (const store::Task& task : tasks) {
    if (task.kind == store::TaskKind::kGatePart) ++gate_parts;
    if (!IsRoundTask(task)) continue;
    ++round_tasks[task.block];
    if (task.kind == store::TaskKind::kShardStats) {
      widest_round =
          std::max(widest_round, ++round_width[{task.block, task.group}]);
    }
  }
  // How far off the prediction was for the tasks that finished.
  double took = 0.0;
  double predicted = 0.0;
  for (const store::Task& task : tasks) {
    auto it = times.finished_seconds.find(task.index);
    const std::optional<TaskWork> w =
        WorkOf(work, task, round_tasks, gate_parts);
    if (it == times.finished_seconds.end() || !w.has_value() ||
        task.state != store::TaskState::kDone) {
      continue;
    }
    took += it->second;
    predicted += PredictSeconds(*w, rates);
  }
  double scale = 1.0;
  if (predicted > 0.0 && took > 0.0) {
    scale = took / predicted;
  } else if (!measured) {
    return std::nullopt;
  }
  double blocks = 0.0;
  int blocks_left = 0;
  double finalize = 0.0;
  int gate_parts_left = 0;
  for (const store::Task& task : tasks) {
    if (task.state == store::TaskState::kDone) continue;
    const std::optional<TaskWork> w =
        WorkOf(work, task, round_tasks, gate_parts);
    if (!w.has_value()) continue;
    double seconds = PredictSeconds(*w, rates) * scale;
    auto running = times.running_seconds.find(task.index);
    if (task.state == store::TaskState::kLeased &&
        running != times.running_seconds.end()) {
      seconds = std::max(0.0, seconds - running->second);
    }
    if (task.kind == store::TaskKind::kFinalize ||
        task.kind == store::TaskKind::kGatePart) {
      finalize += seconds;
      if (task.kind == store::TaskKind::kGatePart) ++gate_parts_left;
    } else {
      blocks += seconds;
      ++blocks_left;
    }
  }
  if (propagation == Propagation::kIndependent && blocks_left > 0) {
    blocks /= std::clamp(fleet.workers, 1, blocks_left);
  } else if (!round_tasks.empty() && blocks_left > 0) {
    // Rounds: a round's shard tasks side by side, the reduces alone; the
    // shard tasks hold most of a round's work.
    blocks /= std::clamp(fleet.workers, 1, widest_round);
  }
  // Gate parts run side by side.
  if (gate_parts_left > 0) {
    finalize /= std::clamp(fleet.workers, 1, gate_parts_left);
  }
  return blocks + finalize;
}

JobEta::JobEta(Clock* clock, std::function<FleetRates()> fleet)
    : clock_(clock), fleet_(std::move(fleet)) {}

void JobEta::OnTaskLeased(const store::Task& task) {
  MutexLock lock(&mu_);
  started_ms_[task.job_id][task.index] = clock_->NowMs();
}

void JobEta::OnTaskCompleted(const store::Task& task, absl::Duration duration) {
  MutexLock lock(&mu_);
  auto job = started_ms_.find(task.job_id);
  if (job != started_ms_.end()) job->second.erase(task.index);
  // Zero when leased before a restart of this coordinator: unknown.
  if (duration > absl::ZeroDuration()) {
    finished_seconds_[task.job_id][task.index] =
        absl::ToDoubleSeconds(duration);
  }
}

void JobEta::OnTaskFailed(const store::Task& task, bool /*requeued*/) {
  MutexLock lock(&mu_);
  auto job = started_ms_.find(task.job_id);
  if (job != started_ms_.end()) job->second.erase(task.index);
}

void JobEta::OnJobState(const std::string& job_id, store::JobState state) {
  if (!store::IsTerminal(state)) return;
  MutexLock lock(&mu_);
  started_ms_.erase(job_id);
  finished_seconds_.erase(job_id);
}

void JobEta::Fill(const store::Job& job, const JobSpec& spec,
                  const std::vector<store::Task>& tasks,
                  v1::Progress* progress) const {
  const bool terminal = store::IsTerminal(job.state);
  const int64_t now_ms = terminal ? job.updated_ms : clock_->NowMs();
  progress->set_elapsed_seconds(std::max<int64_t>(0, now_ms - job.created_ms) /
                                1000.0);
  if (job.state == store::JobState::kSucceeded) {
    progress->set_eta_seconds(0.0);
    return;
  }
  if (terminal || !spec.work.has_value()) return;
  TaskTimes times;
  {
    MutexLock lock(&mu_);
    auto finished = finished_seconds_.find(job.id);
    if (finished != finished_seconds_.end()) {
      times.finished_seconds = finished->second;
    }
    auto started = started_ms_.find(job.id);
    if (started != started_ms_.end()) {
      const int64_t now = clock_->NowMs();
      for (const auto& [index, ms] : started->second) {
        times.running_seconds[index] = std::max<int64_t>(0, now - ms) / 1000.0;
      }
    }
  }
  const std::optional<double> remaining = PredictRemainingSeconds(
      *spec.work, spec.recipe.propagation, tasks, times, Fleet());
  if (remaining.has_value()) progress->set_eta_seconds(*remaining);
}

}  // namespace quant::server

// WorkerServiceImpl: the worker protocol over the job store.
#include "server/worker_service.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <iterator>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/recipe_convert.h"
#include "core/base/file_uri.h"
#include "core/base/file_util.h"
#include "core/base/sha256.h"
#include "core/base/status_macros.h"
#include "core/kernels/isa.h"
#include "core/pipeline/block_task.h"
#include "core/pipeline/task_io.h"
#include "google/protobuf/util/time_util.h"
#include "server/grpc_status.h"
#include "server/job_events.h"
#include "server/job_request.h"
#include "server/job_spec.h"
#include "server/reported_layer_check.h"
#include "server/task_plan.h"
#include "server/uri_policy.h"

namespace quant::server {
namespace {

using google::protobuf::util::TimeUtil;

// A worker's kernel levels, checked: known names ("v4", also "x86-64-v4")
// given in their canonical form, lowest first, at most a handful.
absl::StatusOr<std::vector<std::string>> ValidIsaLevels(
    const google::protobuf::RepeatedPtrField<std::string>& levels) {
  if (levels.size() > 8) {
    return absl::InvalidArgumentError(
        absl::StrCat("isa_levels: at most 8, got ", levels.size()));
  }
  std::vector<std::string> out;
  int previous = -1;
  for (int i = 0; i < levels.size(); ++i) {
    absl::StatusOr<kernels::IsaLevel> level =
        kernels::ParseIsaName(levels.Get(i));
    if (!level.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("isa_levels[", i, "]: ", level.status().message()));
    }
    if (static_cast<int>(*level) <= previous) {
      return absl::InvalidArgumentError(absl::StrCat(
          "isa_levels[", i, "]: ", levels.Get(i),
          " is not above the level before it; list the levels lowest first"));
    }
    previous = static_cast<int>(*level);
    out.emplace_back(kernels::IsaName(*level));
  }
  return out;
}

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

absl::Status RequireLease(const std::string& lease_id) {
  if (lease_id.empty()) return absl::InvalidArgumentError("lease_id: required");
  return absl::OkStatus();
}

// FailTask messages are stored and served back: bounded like every stored
// field.
constexpr size_t kMaxErrorBytes = 64 << 10;

// The lease's task, when it is current and `worker_id` took it.
absl::StatusOr<store::Task> OwnedLease(store::JobStore& store,
                                       const std::string& lease_id,
                                       const std::string& worker_id) {
  QUANT_RETURN_IF_ERROR(RequireLease(lease_id));
  QUANT_ASSIGN_OR_RETURN(store::Task task, store.CurrentLease(lease_id));
  if (worker_id.empty()) {
    return absl::InvalidArgumentError(
        "worker_id: required (the id RegisterWorker gave)");
  }
  if (task.worker_id != worker_id) {
    return absl::PermissionDeniedError(
        absl::StrCat("lease ", lease_id, " belongs to another worker, not \"",
                     worker_id.substr(0, 80), "\""));
  }
  return task;
}

}  // namespace

WorkerServiceImpl::WorkerServiceImpl(JobLifecycle* lifecycle,
                                     const Authenticator* auth,
                                     WorkerServiceOptions options)
    : lifecycle_(lifecycle), auth_(auth), options_(options) {}

void WorkerServiceImpl::Touch(const std::string& worker_id, int leased_delta) {
  MutexLock lock(&mu_);
  auto it = workers_.find(worker_id);
  if (it == workers_.end()) return;
  it->second.last_seen_ms = NowMs();
  it->second.leased = std::max(0, it->second.leased + leased_delta);
}

absl::StatusOr<std::string> WorkerServiceImpl::CheckPublishedOutputs(
    const store::Task& task, const std::string& output_uri,
    const std::string& output_sha256, bool empty_shard) const {
  const ArtifactStore& artifacts = lifecycle_->artifacts();
  // What the task publishes (worker/task_runner.cc), and the file whose
  // presence says it was published (written last, renamed into place).
  std::string expected;
  std::string marker;
  std::string work;
  // A block task, or the last reduce of a block run as rounds: the block.
  const bool block_output =
      task.kind == store::TaskKind::kBlock ||
      (task.kind == store::TaskKind::kReduce && !RoundFileOf(task));
  const std::optional<std::string> round_file = RoundFileOf(task);
  if (empty_shard && (task.kind != store::TaskKind::kShardStats &&
                      task.kind != store::TaskKind::kShardOutput)) {
    return absl::InvalidArgumentError(
        absl::StrCat("empty_shard: task ", task.index, " is a ",
                     store::TaskKindName(task.kind), " task, not a shard's"));
  }
  if (block_output || round_file.has_value()) {
    QUANT_ASSIGN_OR_RETURN(
        work, FileUriPath(artifacts.JobWorkUri(task.job_id), "work_uri"));
  }
  if (block_output) {
    const std::string prefix = BlockOutputPrefix(work, task.block);
    expected = absl::StrCat("file://", prefix);
    marker = prefix + ".layers.json";
  } else if (round_file.has_value()) {
    marker = JoinPath(work, *round_file);
    expected = absl::StrCat("file://", marker);
  } else {
    expected = artifacts.CheckpointUri(task.job_id);
    QUANT_ASSIGN_OR_RETURN(const std::string dir,
                           FileUriPath(expected, "artifact_uri"));
    marker = JoinPath(dir, "manifest.json");
  }
  if (output_uri != expected) {
    return absl::InvalidArgumentError(absl::StrCat(
        "output_uri: \"", output_uri.substr(0, 256), "\" is not where task ",
        task.index, " publishes (\"", expected, "\")"));
  }
  if (empty_shard) {
    if (!output_sha256.empty()) {
      return absl::InvalidArgumentError(
          "output_sha256: an empty shard published nothing to hash");
    }
    return std::string();
  }
  if (!FileExists(marker)) {
    return absl::FailedPreconditionError(
        absl::StrCat("output_uri: task ", task.index, " of job ", task.job_id,
                     " reports completion but ", marker,
                     " does not exist: nothing was published"));
  }
  if (!output_sha256.empty()) {
    QUANT_RETURN_IF_ERROR(
        CheckSha256(output_sha256.substr(0, 80), "output_sha256"));
  }
  // Every file the block's readers will read is checked now: what is
  // recorded DONE verifies.
  absl::StatusOr<std::string> recorded =
      block_output ? VerifyPublishedBlock(work, task.block)
                   : Sha256File(marker);
  if (recorded.ok() && !output_sha256.empty() && *recorded != output_sha256) {
    recorded = absl::DataLossError(absl::StrCat(
        marker, ": sha256 is ", *recorded, ", the worker reports writing ",
        output_sha256, ": the file changed since it was published"));
  }
  if (!recorded.ok()) {
    return absl::Status(
        recorded.status().code(),
        absl::StrCat("task ", task.index, " of job ", task.job_id,
                     ": completion refused: ", recorded.status().message()));
  }
  return recorded;
}

absl::Duration WorkerServiceImpl::EndLease(const std::string& lease_id) {
  std::string worker;
  absl::Duration took = absl::ZeroDuration();
  {
    MutexLock lock(&mu_);
    auto started = lease_started_.find(lease_id);
    if (started != lease_started_.end()) {
      took = absl::Now() - started->second;
      lease_started_.erase(started);
    }
    lease_layers_.erase(lease_id);
    auto it = lease_workers_.find(lease_id);
    if (it == lease_workers_.end()) return took;
    worker = it->second;
    lease_workers_.erase(it);
  }
  Touch(worker, -1);
  return took;
}

std::vector<WorkerInfo> WorkerServiceImpl::Workers() const {
  MutexLock lock(&mu_);
  std::vector<WorkerInfo> out;
  for (const auto& [id, info] : workers_) out.push_back(info);
  return out;
}

absl::StatusOr<v1::RegisterWorkerResponse> WorkerServiceImpl::DoRegister(
    const v1::RegisterWorkerRequest& request) {
  if (request.name().empty() || request.name().size() > 256) {
    return absl::InvalidArgumentError("name: required, at most 256 bytes");
  }
  if (request.slots() < 1 || request.slots() > 1024) {
    return absl::InvalidArgumentError(
        absl::StrCat("slots: must be in 1..1024, got ", request.slots()));
  }
  if (request.version().size() > 128) {
    return absl::InvalidArgumentError(absl::StrCat(
        "version: ", request.version().size(), " bytes; at most 128"));
  }
  absl::StatusOr<std::vector<std::string>> levels =
      ValidIsaLevels(request.isa_levels());
  if (!levels.ok()) return levels.status();
  WorkerInfo info;
  info.name = request.name();
  info.slots = request.slots();
  info.version = request.version();
  info.isa_levels = *std::move(levels);
  const v1::WorkRates& rates = request.rates();
  for (const auto& [name, value] :
       {std::pair<const char*, double>{"forward_flops_per_second",
                                       rates.forward_flops_per_second()},
        {"hessian_flops_per_second", rates.hessian_flops_per_second()},
        {"gptq_flops_per_second", rates.gptq_flops_per_second()}}) {
    if (!std::isfinite(value) || value < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rates.", name, ": must be a finite number >= 0, got ", value));
    }
  }
  info.rates.forward_flops_per_second = rates.forward_flops_per_second();
  info.rates.hessian_flops_per_second = rates.hessian_flops_per_second();
  info.rates.gptq_flops_per_second = rates.gptq_flops_per_second();
  info.last_seen_ms = NowMs();
  {
    MutexLock lock(&mu_);
    // Forget workers long gone (a worker that restarts registers anew, so
    // without this the registry only grows).
    const int64_t now = NowMs();
    for (auto it = workers_.begin(); it != workers_.end();) {
      const bool gone =
          it->second.leased == 0 &&
          now - it->second.last_seen_ms > options_.forget_worker_after_ms;
      it = gone ? workers_.erase(it) : std::next(it);
    }
    if (static_cast<int>(workers_.size()) >= options_.max_workers) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "RegisterWorker: ", workers_.size(),
          " workers are registered (--max_workers ", options_.max_workers,
          "); idle ones are forgotten after ",
          options_.forget_worker_after_ms / 1000, " s"));
    }
    // The start time keeps ids unique across coordinator restarts.
    static const int64_t started_ms = NowMs();
    info.id = absl::StrCat("worker-", started_ms, "-", next_worker_++);
    workers_[info.id] = info;
  }
  v1::RegisterWorkerResponse response;
  response.set_worker_id(info.id);
  response.set_heartbeat_interval_ms(options_.heartbeat_ms);
  response.set_lease_duration_ms(options_.lease_ms);
  return response;
}

absl::StatusOr<v1::Task> WorkerServiceImpl::TaskProto(
    const store::Lease& lease) {
  absl::StatusOr<JobSpec> spec = JobSpecFromJson(lease.job_spec_json);
  if (!spec.ok()) return spec.status();
  const ArtifactStore& artifacts = lifecycle_->artifacts();
  const store::Task& task = lease.task;
  v1::Task out;
  out.set_job_id(task.job_id);
  out.set_index(task.index);
  switch (task.kind) {
    case store::TaskKind::kBlock:
      out.set_kind(v1::TASK_KIND_BLOCK);
      break;
    case store::TaskKind::kFinalize:
      out.set_kind(v1::TASK_KIND_FINALIZE);
      break;
    case store::TaskKind::kShardStats:
      out.set_kind(v1::TASK_KIND_SHARD_STATS);
      break;
    case store::TaskKind::kReduce:
      out.set_kind(v1::TASK_KIND_REDUCE);
      break;
    case store::TaskKind::kShardOutput:
      out.set_kind(v1::TASK_KIND_SHARD_OUTPUT);
      break;
    case store::TaskKind::kFinalizePack:
      out.set_kind(v1::TASK_KIND_FINALIZE_PACK);
      break;
    case store::TaskKind::kGatePart:
      out.set_kind(v1::TASK_KIND_GATE_PART);
      break;
  }
  out.set_block(task.block);
  if (task.group >= 0) out.set_group(task.group);
  if (task.split != store::TaskSplit::kNone) {
    out.set_split(task.split == store::TaskSplit::kCalibration
                      ? v1::TASK_SPLIT_CALIBRATION
                      : v1::TASK_SPLIT_HELDOUT);
    out.set_shard(task.shard);
  }
  if (task.kind == store::TaskKind::kGatePart) out.set_shard(task.shard);
  out.set_gate_parts(spec->gate_parts);
  out.set_layer(task.layer);
  out.set_round_layer_reduces(spec->rounds.has_value() &&
                              spec->rounds->layer_reduces);
  out.set_round_heldout_later(spec->rounds.has_value() &&
                              spec->rounds->heldout_later);
  out.set_attempt(task.attempts);
  // Resolved at submit, under an allowed root: workers need not resolve
  // URIs or know the roots.
  out.set_checkpoint_uri(absl::StrCat("file://", spec->checkpoint_path));
  *out.mutable_recipe() = common::RecipeToProto(spec->recipe);
  out.set_calibration_sha256(spec->calibration_sha256);
  out.set_chat_template_sha256(spec->chat_template_sha256);
  out.set_tasks_sha256(spec->tasks_sha256);
  if (spec->calibration_sources.empty()) {
    out.set_calibration_uri(absl::StrCat("file://", spec->calibration_path));
  }
  for (const CalibrationSourceSpec& source : spec->calibration_sources) {
    v1::CalibrationSourceRef* ref = out.add_calibration_sources();
    ref->set_uri(absl::StrCat("file://", source.path));
    ref->set_sha256(source.sha256);
    ref->set_weight(source.weight);
  }
  out.set_work_uri(artifacts.JobWorkUri(task.job_id));
  out.set_attempt_uri(
      artifacts.AttemptUri(task.job_id, task.index, task.attempts));
  out.set_artifact_uri(artifacts.CheckpointUri(task.job_id));
  if (!spec->previous_job_id.empty()) {
    out.set_previous_uri(artifacts.CheckpointUri(spec->previous_job_id));
  } else if (!spec->previous_path.empty()) {
    out.set_previous_uri(absl::StrCat("file://", spec->previous_path));
  }
  out.set_isa(lease.job_isa);
  for (const std::string& root : options_.read_roots) out.add_read_roots(root);
  // What every finished block published, so that a reader can tell its
  // output changed since.
  QUANT_ASSIGN_OR_RETURN(const std::vector<store::Task> tasks,
                         lifecycle_->store().ListTasks(task.job_id));
  for (const store::Task& t : tasks) {
    if (t.state != store::TaskState::kDone || t.output_sha256.empty()) {
      continue;
    }
    const std::optional<std::string> round_file = RoundFileOf(t);
    if (round_file.has_value()) {
      // The work files a task may read: a round task its block's round
      // files and the previous block's; a gate part the staged record; the
      // finalize that record and the parts.
      const bool finalize_file = t.kind == store::TaskKind::kFinalizePack ||
                                 t.kind == store::TaskKind::kGatePart;
      const bool reads =
          finalize_file
              ? task.kind == store::TaskKind::kGatePart ||
                    task.kind == store::TaskKind::kFinalize
              : IsRoundTaskKind(task.kind) &&
                    (t.block == task.block || t.block + 1 == task.block);
      if (reads) {
        (*out.mutable_round_file_sha256())[*round_file] = t.output_sha256;
      }
    } else if (t.kind == store::TaskKind::kBlock ||
               t.kind == store::TaskKind::kReduce) {
      (*out.mutable_block_output_sha256())[t.block] = t.output_sha256;
    }
  }
  return out;
}

absl::StatusOr<v1::LeaseTaskResponse> WorkerServiceImpl::DoLeaseTask(
    const v1::LeaseTaskRequest& request,
    const std::function<bool()>& cancelled) {
  if (request.worker_id().empty()) {
    return absl::InvalidArgumentError("worker_id: required");
  }
  {
    MutexLock lock(&mu_);
    if (workers_.count(request.worker_id()) == 0) {
      return absl::NotFoundError(
          absl::StrCat("worker_id: unknown worker \"", request.worker_id(),
                       "\" (the coordinator restarted?); register again"));
    }
  }
  absl::StatusOr<std::vector<std::string>> levels =
      ValidIsaLevels(request.isa_levels());
  if (!levels.ok()) return levels.status();
  Touch(request.worker_id(), 0);
  const int64_t wait_ms =
      std::clamp<int64_t>(request.wait_ms(), 0, options_.max_wait_ms);
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
  ChangeSignal& signal = lifecycle_->signal();
  while (true) {
    const uint64_t seen = signal.generation();
    absl::StatusOr<std::optional<store::Lease>> lease =
        lifecycle_->store().LeaseTask(request.worker_id(), options_.lease_ms,
                                      *levels);
    if (!lease.ok()) return lease.status();
    if (lease->has_value()) {
      const store::Lease& got = **lease;
      if (got.job_started) {
        if (absl::Status s = lifecycle_->StateChanged(
                got.task.job_id, store::JobState::kRunning);
            !s.ok()) {
          return s;
        }
      }
      absl::StatusOr<v1::Task> task = TaskProto(got);
      if (!task.ok()) return task.status();
      {
        MutexLock lock(&mu_);
        lease_workers_[got.lease_id] = request.worker_id();
        lease_started_[got.lease_id] = absl::Now();
      }
      lifecycle_->observer().OnTaskLeased(got.task);
      Touch(request.worker_id(), +1);
      v1::LeaseTaskResponse response;
      *response.mutable_task() = *std::move(task);
      response.set_lease_id(got.lease_id);
      *response.mutable_lease_expire_time() =
          TimeUtil::MillisecondsToTimestamp(got.expires_ms);
      return response;
    }
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline || signal.stopping() || (cancelled && cancelled())) {
      return v1::LeaseTaskResponse();
    }
    // Wake on any change, and at least every second: leases also expire by
    // time alone.
    signal.WaitFor(seen,
                   std::min<std::chrono::milliseconds>(
                       std::chrono::duration_cast<std::chrono::milliseconds>(
                           deadline - now),
                       std::chrono::milliseconds(1000)));
  }
}

absl::StatusOr<v1::HeartbeatResponse> WorkerServiceImpl::DoHeartbeat(
    const v1::HeartbeatRequest& request) {
  QUANT_ASSIGN_OR_RETURN(
      const store::Task leased,
      OwnedLease(lifecycle_->store(), request.lease_id(), request.worker_id()));
  const v1::TaskProgress& progress = request.progress();
  if (progress.layers_total() < 0 || progress.layers_done() < 0 ||
      progress.layers_done() > progress.layers_total()) {
    return absl::InvalidArgumentError(
        absl::StrCat("progress: layers_done ", progress.layers_done(),
                     " of layers_total ", progress.layers_total()));
  }
  // Every reported row must be one the task can produce; a row already
  // recorded for this lease (a beat resent after a lost answer) is dropped.
  std::vector<const v1::LayerAudit*> new_layers;
  // A block's last reduce reports the block's other layers too when the
  // job's reduces left the held-out audits to it.
  bool audits_block = false;
  if (leased.kind == store::TaskKind::kReduce &&
      leased.group == kBlockRoundGroups - 1 &&
      !progress.finished_layers().empty()) {
    QUANT_ASSIGN_OR_RETURN(const store::Job job,
                           lifecycle_->store().GetJob(leased.job_id));
    QUANT_ASSIGN_OR_RETURN(const JobSpec spec, JobSpecFromJson(job.spec_json));
    audits_block = spec.rounds.has_value() && spec.rounds->heldout_later;
  }
  {
    MutexLock lock(&mu_);
    std::set<std::string>& seen = lease_layers_[request.lease_id()];
    std::set<std::string> in_this_beat;
    for (const v1::LayerAudit& layer : progress.finished_layers()) {
      QUANT_RETURN_IF_ERROR(CheckReportedLayer(layer, leased, audits_block));
      if (seen.count(layer.name()) == 0 &&
          in_this_beat.insert(layer.name()).second) {
        new_layers.push_back(&layer);
      }
    }
    seen.insert(in_this_beat.begin(), in_this_beat.end());
  }
  const double fraction = progress.layers_total() == 0
                              ? 0.0
                              : static_cast<double>(progress.layers_done()) /
                                    progress.layers_total();
  absl::StatusOr<store::HeartbeatResult> beat =
      lifecycle_->store().Heartbeat(request.lease_id(), fraction);
  if (!beat.ok()) return beat.status();
  {
    MutexLock lock(&mu_);
    auto it = lease_workers_.find(request.lease_id());
    if (it != lease_workers_.end()) {
      auto worker = workers_.find(it->second);
      if (worker != workers_.end()) worker->second.last_seen_ms = NowMs();
    }
  }
  const std::string& job_id = beat->task.job_id;
  if (!beat->job_cancelled) {
    for (const v1::LayerAudit* layer : new_layers) {
      // A pending row (a reduce that left the held-out audit to the block's
      // last reduce) moves the progress only: the job's events and metrics
      // get the layer once, complete.
      if (layer->heldout_pending()) continue;
      if (absl::Status s =
              AppendLayerEvent(lifecycle_->store(), job_id, *layer);
          !s.ok()) {
        return s;
      }
      lifecycle_->observer().OnLayerFinished(job_id, *layer);
    }
    if (!new_layers.empty()) {
      const std::string current = absl::StrCat(
          store::DescribeTaskWork(beat->task), ": ", progress.current_layer());
      if (absl::Status s = lifecycle_->Progress(job_id, current); !s.ok()) {
        return s;
      }
    }
  }
  v1::HeartbeatResponse response;
  response.set_cancelled(beat->job_cancelled);
  *response.mutable_lease_expire_time() =
      TimeUtil::MillisecondsToTimestamp(beat->expires_ms);
  return response;
}

absl::Status WorkerServiceImpl::DoCompleteTask(
    const v1::CompleteTaskRequest& request) {
  QUANT_ASSIGN_OR_RETURN(
      const store::Task leased,
      OwnedLease(lifecycle_->store(), request.lease_id(), request.worker_id()));
  if (request.output_uri().empty()) {
    return absl::InvalidArgumentError("output_uri: required");
  }
  QUANT_ASSIGN_OR_RETURN(
      const std::string output_sha256,
      CheckPublishedOutputs(leased, request.output_uri(),
                            request.output_sha256(), request.empty_shard()));
  absl::StatusOr<store::CompleteTaskResult> done =
      lifecycle_->store().CompleteTask(request.lease_id(), request.output_uri(),
                                       output_sha256);
  if (!done.ok()) return done.status();
  const absl::Duration took = EndLease(request.lease_id());
  const store::Task& task = done->task;
  lifecycle_->observer().OnTaskCompleted(task, took);
  lifecycle_->signal().Notify();  // Dependants may be runnable now.
  if (done->all_tasks_done) return lifecycle_->FinishJob(task.job_id);
  if (!IsRoundTaskKind(task.kind)) {
    return lifecycle_->Progress(
        task.job_id, absl::StrCat(store::DescribeTaskWork(task), " done"));
  }
  QUANT_ASSIGN_OR_RETURN(const std::vector<store::Task> tasks,
                         lifecycle_->store().ListTasks(task.job_id));
  return lifecycle_->Progress(task.job_id, DescribeRoundProgress(tasks, task));
}

absl::Status WorkerServiceImpl::DoFailTask(const v1::FailTaskRequest& request) {
  QUANT_RETURN_IF_ERROR(
      OwnedLease(lifecycle_->store(), request.lease_id(), request.worker_id())
          .status());
  if (request.error().empty()) {
    return absl::InvalidArgumentError("error: required");
  }
  std::string error = request.error().substr(0, kMaxErrorBytes);
  if (request.error().size() > kMaxErrorBytes) {
    absl::StrAppend(&error, "... (", request.error().size(), " bytes, cut)");
  }
  // Blocks to compute again: their tasks, by index, in this job's plan.
  std::vector<int> rerun;
  if (request.rerun_blocks_size() > 0 || request.rerun_round_files_size() > 0) {
    QUANT_ASSIGN_OR_RETURN(
        const store::Task leased,
        lifecycle_->store().CurrentLease(request.lease_id()));
    QUANT_ASSIGN_OR_RETURN(const std::vector<store::Task> tasks,
                           lifecycle_->store().ListTasks(leased.job_id));
    auto add = [&](const std::function<bool(const store::Task&)>& matches,
                   const std::string& what) -> absl::Status {
      auto it = std::find_if(tasks.begin(), tasks.end(), matches);
      if (it == tasks.end() ||
          std::find(rerun.begin(), rerun.end(), it->index) != rerun.end()) {
        return absl::InvalidArgumentError(absl::StrCat(
            what, " of job ", leased.job_id, " (or is listed twice)"));
      }
      rerun.push_back(it->index);
      return absl::OkStatus();
    };
    for (const int block : request.rerun_blocks()) {
      // The block's task, or its last reduce when it ran as rounds.
      QUANT_RETURN_IF_ERROR(add(
          [&](const store::Task& t) {
            return t.block == block &&
                   (t.kind == store::TaskKind::kBlock ||
                    (t.kind == store::TaskKind::kReduce && !RoundFileOf(t)));
          },
          absl::StrCat("rerun_blocks: ", block, " is not a block")));
    }
    for (const std::string& file : request.rerun_round_files()) {
      QUANT_RETURN_IF_ERROR(
          add([&](const store::Task& t) { return RoundFileOf(t) == file; },
              absl::StrCat("rerun_round_files: \"", file.substr(0, 128),
                           "\" is not a round file")));
    }
  }
  absl::StatusOr<store::FailTaskResult> failed =
      lifecycle_->store().FailTask(request.lease_id(), error, rerun);
  if (!failed.ok()) return failed.status();
  EndLease(request.lease_id());
  for (const int index : failed->rerun) {
    // Shown on the job's events, so the rerun is visible.
    QUANT_RETURN_IF_ERROR(lifecycle_->Progress(
        failed->task.job_id,
        absl::StrCat("task ", index, " runs again: task ", failed->task.index,
                     " found its output changed on disk")));
  }
  lifecycle_->observer().OnTaskFailed(failed->task, failed->requeued);
  const std::string& job_id = failed->task.job_id;
  if (failed->job_failed) {
    return lifecycle_->StateChanged(job_id, store::JobState::kFailed);
  }
  if (!request.retryable()) {
    absl::StatusOr<store::Job> job = lifecycle_->store().GetJob(job_id);
    if (!job.ok()) return job.status();
    if (store::IsTerminal(job->state)) return absl::OkStatus();
    return lifecycle_->FailJob(
        job_id, absl::StrCat("task ", failed->task.index, " failed: ", error));
  }
  lifecycle_->signal().Notify();  // Requeued.
  return absl::OkStatus();
}

grpc::Status WorkerServiceImpl::RegisterWorker(
    grpc::ServerContext* context, const v1::RegisterWorkerRequest* request,
    v1::RegisterWorkerResponse* response) {
  return ReplyIfAllowed(Allow(*context), response,
                        [&] { return DoRegister(*request); });
}

grpc::Status WorkerServiceImpl::LeaseTask(grpc::ServerContext* context,
                                          const v1::LeaseTaskRequest* request,
                                          v1::LeaseTaskResponse* response) {
  return ReplyIfAllowed(Allow(*context), response, [&] {
    return DoLeaseTask(*request, [context] { return context->IsCancelled(); });
  });
}

grpc::Status WorkerServiceImpl::Heartbeat(grpc::ServerContext* context,
                                          const v1::HeartbeatRequest* request,
                                          v1::HeartbeatResponse* response) {
  return ReplyIfAllowed(Allow(*context), response,
                        [&] { return DoHeartbeat(*request); });
}

grpc::Status WorkerServiceImpl::CompleteTask(
    grpc::ServerContext* context, const v1::CompleteTaskRequest* request,
    v1::CompleteTaskResponse* response) {
  return ReplyIfAllowed(Allow(*context), response,
                        [&] { return DoCompleteTask(*request); });
}

grpc::Status WorkerServiceImpl::FailTask(grpc::ServerContext* context,
                                         const v1::FailTaskRequest* request,
                                         v1::FailTaskResponse* response) {
  return ReplyIfAllowed(Allow(*context), response,
                        [&] { return DoFailTask(*request); });
}

}  // namespace quant::server

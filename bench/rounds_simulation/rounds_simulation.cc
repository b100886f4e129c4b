// The report and self-check of quant-rounds-simulation; see
// rounds_simulation.h.
#include "bench/rounds_simulation/rounds_simulation.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "core/base/status_macros.h"

namespace quant {
namespace rounds_sim {
namespace {

std::string Bytes(double bytes) {
  constexpr double kMiB = 1024.0 * 1024.0;
  constexpr double kGiB = 1024.0 * kMiB;
  constexpr double kTiB = 1024.0 * kGiB;
  if (bytes >= kTiB) return absl::StrFormat("%.2f TiB", bytes / kTiB);
  if (bytes >= kGiB) return absl::StrFormat("%.2f GiB", bytes / kGiB);
  return absl::StrFormat("%.1f MiB", bytes / kMiB);
}

bool Same(double a, double b) {
  return std::fabs(a - b) <= 1e-9 * std::max(std::fabs(a), std::fabs(b));
}

double Gbps(double bytes_per_second) { return bytes_per_second * 8.0 / 1e9; }

// One block's totals over its tasks.
struct BlockTotals {
  int tasks = 0;
  double read = 0.0;
  double written = 0.0;
  double seconds = 0.0;  // Alone, summed.

  bool SameAs(const BlockTotals& o) const {
    return tasks == o.tasks && Same(read, o.read) && Same(written, o.written) &&
           Same(seconds, o.seconds);
  }
};

void PrintBlocks(const Plan& plan, const Resources& resources, int blocks,
                 std::FILE* out) {
  std::vector<BlockTotals> totals(blocks + 1);  // The last: the finalize.
  for (const PlannedTask& task : plan.tasks) {
    BlockTotals& t = totals[task.block >= 0 ? task.block : blocks];
    ++t.tasks;
    t.read += task.bytes_read;
    t.written += task.bytes_written;
    t.seconds += TaskSecondsAlone(task, resources);
  }
  absl::FPrintF(out, "%-16s %6s %11s %11s %12s\n", "per block", "tasks", "read",
                "written", "1-worker s");
  auto row = [&](const std::string& name, const BlockTotals& t) {
    absl::FPrintF(out, "%-16s %6d %11s %11s %12.1f\n", name, t.tasks,
                  Bytes(t.read), Bytes(t.written), t.seconds);
  };
  for (int b = 0; b < blocks;) {
    int last = b;
    while (last + 1 < blocks && totals[last + 1].SameAs(totals[b])) ++last;
    row(last == b ? absl::StrCat("block ", b)
                  : absl::StrCat("blocks ", b, "-", last, " each"),
        totals[b]);
    b = last + 1;
  }
  row("finalize", totals[blocks]);
}

// One line per kind of task of block `block` (alike tasks counted once).
void PrintTaskDetail(const Plan& plan, const Resources& resources, int block,
                     std::FILE* out) {
  absl::FPrintF(out, "%-32s %8s %8s %8s %9s %11s %11s %9s\n",
                absl::StrCat("tasks of block ", block), "fwd TF", "hess TF",
                "gptq TF", "compute s", "read", "written", "alone s");
  const PlannedTask* first = nullptr;
  int count = 0;
  auto flush = [&]() {
    if (first == nullptr) return;
    std::string name = first->Name();
    if (first->shard >= 0 && count > 1) {
      name = absl::StrCat(name.substr(0, name.rfind(',')), ", *) x", count);
    }
    absl::FPrintF(
        out, "%-32s %8.3f %8.3f %8.3f %9.2f %11s %11s %9.2f\n", name,
        first->work.forward_flops / 1e12, first->work.hessian_flops / 1e12,
        first->work.gptq_flops / 1e12, ComputeSeconds(*first, resources),
        Bytes(first->bytes_read), Bytes(first->bytes_written),
        TaskSecondsAlone(*first, resources));
  };
  for (const PlannedTask& task : plan.tasks) {
    if (task.block != block) continue;
    const bool alike = first != nullptr && task.kind == first->kind &&
                       task.group == first->group &&
                       task.calibration == first->calibration &&
                       Same(task.bytes_read, first->bytes_read) &&
                       Same(TaskSecondsAlone(task, resources),
                            TaskSecondsAlone(*first, resources));
    if (alike) {
      ++count;
      continue;
    }
    flush();
    first = &task;
    count = 1;
  }
  flush();
}

}  // namespace

absl::Status ApplyModel(absl::string_view model, JobShape* shape) {
  if (model == "llama3-8b") {
    shape->blocks = 32;
    shape->hidden = 4096;
    shape->intermediate = 14336;
    shape->heads = 32;
    shape->kv_heads = 8;
    shape->vocab = 128256;
  } else if (model == "llama3-70b") {
    shape->blocks = 80;
    shape->hidden = 8192;
    shape->intermediate = 28672;
    shape->heads = 64;
    shape->kv_heads = 8;
    shape->vocab = 128256;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown model \"", model, "\": llama3-8b, llama3-70b or custom"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int>> ParseWorkerCounts(absl::string_view list) {
  std::vector<int> counts;
  for (absl::string_view item : absl::StrSplit(list, ',')) {
    int count = 0;
    if (!absl::SimpleAtoi(item, &count) || count < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--workers: \"", item, "\" is not a positive worker count"));
    }
    counts.push_back(count);
  }
  return counts;
}

absl::Status PrintSimulation(const SimulationOptions& options, std::FILE* out) {
  const JobShape& s = options.shape;
  const Resources& r = options.resources;
  QUANT_RETURN_IF_ERROR(CheckResources(r));
  if (options.workers.empty()) {
    return absl::InvalidArgumentError("no worker counts to simulate");
  }
  Plan plan;
  if (options.block_tasks) {
    QUANT_ASSIGN_OR_RETURN(plan, PlanBlockTasks(s));
  } else {
    QUANT_ASSIGN_OR_RETURN(plan, PlanRounds(s));
  }
  // The finalize's compute: its one task, or its parts together.
  double finalize_seconds = 0.0;
  for (const PlannedTask& task : plan.tasks) {
    if (task.block < 0) finalize_seconds += ComputeSeconds(task, r);
  }
  absl::FPrintF(out, "quant-rounds-simulation: %s, %s\n", options.model,
                options.block_tasks ? "block tasks (the old plan)"
                                    : "rounds (shard_stats/reduce/"
                                      "shard_output)");
  absl::FPrintF(out,
                "model: %d blocks, hidden %d, intermediate %d, heads %d "
                "(kv %d, head_dim %d), vocab %d\n",
                s.blocks, s.hidden, s.intermediate, s.heads, s.kv_heads,
                s.hidden / s.heads, s.vocab);
  absl::FPrintF(out,
                "tokens: %d calibration + %d held-out sequences x %d; "
                "shards of 16: S_c = %d, S_h = %d\n",
                s.calibration_sequences, s.heldout_sequences, s.seq_len,
                plan.calibration_shards, plan.heldout_shards);
  absl::FPrintF(
      out,
      "per worker: forward %g, hessian %g, gptq %g GFLOP/s; network %g Gb/s; "
      "storage %s shared\n",
      r.rates.forward_flops_per_second / 1e9,
      r.rates.hessian_flops_per_second / 1e9,
      r.rates.gptq_flops_per_second / 1e9, Gbps(r.network_bytes_per_second),
      r.storage_bytes_per_second > 0.0
          ? absl::StrFormat("%g Gb/s", Gbps(r.storage_bytes_per_second))
          : std::string("unlimited"));
  absl::FPrintF(
      out,
      "task overhead %g s; finalize %.1f s (%s%s); damp auto %s; "
      "shard stash %s; GPTQ %d-bit group %d; checkpoint %g B/weight\n",
      r.task_overhead_seconds, finalize_seconds,
      s.finalize_seconds >= 0.0 ? "--finalize_s" : "work_model's gate flops",
      s.gate_parts > 0 ? absl::StrCat(", in ", s.gate_parts, " gate parts")
                       : std::string(),
      s.damp_auto ? "on" : "off", s.shard_stash ? "on" : "off", s.bits,
      s.group_size, s.checkpoint_bytes_per_weight);
  absl::FPrintF(out,
                "plan: %d tasks; sum of task times %.0f s; critical path "
                "%.0f s\n",
                plan.tasks.size(), SumOfTaskSeconds(plan, r),
                CriticalPathSeconds(plan, r));
  absl::FPrintF(out, "%7s %9s %7s %8s %11s %11s %8s %8s %8s %8s\n", "workers",
                "wall s", "wall h", "speedup", "read", "written", "compute",
                "network", "storage", "busiest");
  double one_worker = 0.0;
  for (int workers : options.workers) {
    if (one_worker == 0.0) {
      QUANT_ASSIGN_OR_RETURN(const SimulationResult base, Simulate(plan, r, 1));
      one_worker = base.wall_seconds;
    }
    QUANT_ASSIGN_OR_RETURN(const SimulationResult run,
                           Simulate(plan, r, workers));
    absl::FPrintF(out,
                  "%7d %9.0f %7.2f %7.2fx %11s %11s %7.0f%% %7.0f%% %7.0f%% "
                  "%8s\n",
                  workers, run.wall_seconds, run.wall_seconds / 3600.0,
                  one_worker / run.wall_seconds, Bytes(run.bytes_read),
                  Bytes(run.bytes_written), 100.0 * run.compute_utilization,
                  100.0 * run.network_utilization,
                  100.0 * run.storage_utilization, run.Busiest());
  }
  PrintBlocks(plan, r, s.blocks, out);
  if (options.task_detail) {
    PrintTaskDetail(plan, r, std::min(1, s.blocks - 1), out);
  }
  return absl::OkStatus();
}

namespace {

class Checker {
 public:
  explicit Checker(std::FILE* out) : out_(out) {}

  void Near(const std::string& name, double got, double expected) {
    const bool ok =
        std::fabs(got - expected) <= 1e-9 * std::max(1.0, std::fabs(expected));
    absl::FPrintF(out_, "%s %s: got %.9g, expected %.9g\n",
                  ok ? "ok  " : "FAIL", name, got, expected);
    if (!ok && first_failure_.empty()) first_failure_ = name;
  }
  void AtLeast(const std::string& name, double got, double bound) {
    const bool ok = got >= bound * (1.0 - 1e-9);
    absl::FPrintF(out_, "%s %s: got %.9g, at least %.9g\n",
                  ok ? "ok  " : "FAIL", name, got, bound);
    if (!ok && first_failure_.empty()) first_failure_ = name;
  }
  void Fail(const std::string& name, const absl::Status& status) {
    absl::FPrintF(out_, "FAIL %s: %s\n", name, status.ToString());
    if (first_failure_.empty()) first_failure_ = name;
  }
  absl::Status Result() const {
    if (first_failure_.empty()) return absl::OkStatus();
    return absl::InternalError(
        absl::StrCat("self-check failed, first at: ", first_failure_));
  }

 private:
  std::FILE* out_;
  std::string first_failure_;
};

JobShape SmallJob() {
  JobShape shape;
  shape.blocks = 3;
  shape.hidden = 256;
  shape.intermediate = 704;
  shape.heads = 4;
  shape.kv_heads = 2;
  shape.vocab = 512;
  shape.calibration_sequences = 40;  // Shards of 16, 16 and 8.
  shape.heldout_sequences = 20;      // 16 and 4.
  shape.seq_len = 128;
  shape.group_size = 32;
  shape.damp_auto = true;
  return shape;
}

Resources SmallResources() {
  Resources r;
  r.rates.forward_flops_per_second = 2e9;
  r.rates.hessian_flops_per_second = 3e9;
  r.rates.gptq_flops_per_second = 1e9;
  r.network_bytes_per_second = 2e8;
  r.storage_bytes_per_second = 3e8;
  r.task_overhead_seconds = 0.25;
  return r;
}

void CheckModelJobs(Checker* check) {
  const Resources r = SmallResources();
  Resources unlimited = r;
  unlimited.storage_bytes_per_second = 0.0;
  absl::StatusOr<Plan> rounds = PlanRounds(SmallJob());
  if (!rounds.ok()) return check->Fail("PlanRounds", rounds.status());
  // 4 (S_c + S_h) shard tasks, 7 reduces (q, k, v; o; gate, up; down)
  // and S_c + S_h outputs per block (none for the last), and the finalize.
  check->Near("rounds task count (3 blocks, S_c 3, S_h 2)",
              rounds->tasks.size(), 3 * (4 * 5 + 7 + 5) - 5 + 1);
  JobShape whole_groups = SmallJob();
  whole_groups.layer_reduces = false;
  absl::StatusOr<Plan> whole = PlanRounds(whole_groups);
  if (!whole.ok()) return check->Fail("PlanRounds", whole.status());
  check->Near("rounds task count, a reduce per group", whole->tasks.size(),
              3 * (4 * 6 + 5) - 5 + 1);
  absl::StatusOr<SimulationResult> one = Simulate(*rounds, r, 1);
  if (!one.ok()) return check->Fail("1 worker", one.status());
  check->Near("1 worker: wall == sum of task times", one->wall_seconds,
              SumOfTaskSeconds(*rounds, r));
  const int all = static_cast<int>(rounds->tasks.size());
  absl::StatusOr<SimulationResult> many = Simulate(*rounds, unlimited, all);
  if (!many.ok()) return check->Fail("unlimited workers", many.status());
  check->Near(
      "as many workers as tasks, storage unlimited: wall == "
      "critical path",
      many->wall_seconds, CriticalPathSeconds(*rounds, unlimited));
  absl::StatusOr<SimulationResult> shared = Simulate(*rounds, r, all);
  if (!shared.ok()) return check->Fail("shared storage", shared.status());
  check->AtLeast(
      "as many workers as tasks, shared storage: wall >= "
      "critical path",
      shared->wall_seconds, CriticalPathSeconds(*rounds, r));
  absl::StatusOr<Plan> blocks = PlanBlockTasks(SmallJob());
  if (!blocks.ok()) return check->Fail("PlanBlockTasks", blocks.status());
  absl::StatusOr<SimulationResult> chained = Simulate(*blocks, r, 4);
  if (!chained.ok()) return check->Fail("block tasks", chained.status());
  check->Near("block tasks, 4 workers: wall == sum (a chain)",
              chained->wall_seconds, SumOfTaskSeconds(*blocks, r));
}

// The shard stash: one block's shard tasks and outputs run its forward
// pass once, and gate/up once more (the output round starts from the kept
// residual), on every token of a calibration shard; without the stash,
// rounds 1..3 each rerun the block up to their group and the output the
// whole block.
void CheckShardStash(Checker* check) {
  JobShape shape = SmallJob();
  shape.blocks = 2;  // Block 0 has shard outputs.
  double forward[2] = {0.0, 0.0};
  double prefix[4] = {0.0, 0.0, 0.0,
                      0.0};  // Per token, from the no-stash plan.
  for (const bool stash : {false, true}) {
    shape.shard_stash = stash;
    absl::StatusOr<Plan> plan = PlanRounds(shape);
    if (!plan.ok()) return check->Fail("PlanRounds", plan.status());
    for (const PlannedTask& task : plan->tasks) {
      if (task.block != 0 || !task.calibration || task.shard != 0) continue;
      const double per_token =
          task.work.forward_flops / static_cast<double>(task.tokens);
      if (task.kind == TaskKind::kShardStats) {
        if (!stash) prefix[task.group] = per_token;
        forward[stash] += per_token;
      } else if (task.kind == TaskKind::kShardOutput) {
        forward[stash] += per_token;
      }
    }
  }
  // Without: prefix[0..3] + the whole block; with: the block + gate/up.
  const double block =
      forward[0] - (prefix[0] + prefix[1] + prefix[2] + prefix[3]);
  check->Near("shard stash: a shard's rounds run the block once + gate/up",
              forward[1], block + (prefix[3] - prefix[2]));
  check->AtLeast("shard stash: without it, more than 2 forward passes",
                 forward[0], 2.0 * block);
}

// One block, one calibration and one held-out shard, 2 workers, storage
// unlimited: each round's two shard tasks run side by side, then its
// reduces (one per layer of q, k, v and of gate, up: in plan order, each
// to the worker free first); then the finalize.
void CheckOneBlock(Checker* check) {
  JobShape shape = SmallJob();
  shape.blocks = 1;
  shape.calibration_sequences = 16;
  shape.heldout_sequences = 16;
  shape.heldout_later = false;  // Each round waits for both shards.
  Resources r = SmallResources();
  r.storage_bytes_per_second = 0.0;
  absl::StatusOr<Plan> plan = PlanRounds(shape);
  if (!plan.ok()) return check->Fail("PlanRounds, 1 block", plan.status());
  check->Near("1 block, 1+1 shards: task count", plan->tasks.size(), 16);
  double expected = 0.0;
  double shard_max = 0.0;
  double free_at[2] = {0.0, 0.0};  // The workers, during a round's reduces.
  auto end_reduces = [&] {
    expected += shard_max + std::max(free_at[0], free_at[1]);
    shard_max = 0.0;
    free_at[0] = free_at[1] = 0.0;
  };
  for (const PlannedTask& task : plan->tasks) {
    const double seconds = TaskSecondsAlone(task, r);
    if (task.kind == TaskKind::kShardStats) {
      if (free_at[0] > 0.0 || free_at[1] > 0.0) end_reduces();
      shard_max = std::max(shard_max, seconds);
    } else if (task.kind == TaskKind::kReduce) {
      double& first_free = free_at[0] <= free_at[1] ? free_at[0] : free_at[1];
      first_free += seconds;
    } else {
      end_reduces();
      expected += seconds;
    }
  }
  absl::StatusOr<SimulationResult> run = Simulate(*plan, r, 2);
  if (!run.ok()) return check->Fail("1 block, 2 workers", run.status());
  check->Near(
      "1 block, 1+1 shards, 2 workers: sum over rounds of "
      "max(shards) + the reduces on 2 workers, + finalize",
      run->wall_seconds, expected);
}

// Gate parts: the finalize's compute split evenly over the parts; on 2
// workers (storage unlimited) the 2 parts run side by side at the job's
// end, so the wall changes by pack + one part + completion - finalize.
void CheckGateParts(Checker* check) {
  JobShape shape = SmallJob();
  shape.blocks = 1;
  Resources r = SmallResources();
  r.storage_bytes_per_second = 0.0;
  absl::StatusOr<Plan> one = PlanRounds(shape);
  shape.gate_parts = 2;
  absl::StatusOr<Plan> parts = PlanRounds(shape);
  if (!one.ok() || !parts.ok()) {
    return check->Fail("PlanRounds, gate parts",
                       one.ok() ? parts.status() : one.status());
  }
  check->Near("gate parts: 3 more tasks", parts->tasks.size(),
              one->tasks.size() + 3);
  const PlannedTask& finalize = one->tasks.back();
  const size_t n = parts->tasks.size();
  const PlannedTask& pack = parts->tasks[n - 4];
  const PlannedTask& part = parts->tasks[n - 3];
  const PlannedTask& completion = parts->tasks[n - 1];
  check->Near("gate parts: the parts' compute is the finalize's",
              ComputeSeconds(parts->tasks[n - 3], r) +
                  ComputeSeconds(parts->tasks[n - 2], r),
              ComputeSeconds(finalize, r));
  absl::StatusOr<SimulationResult> whole = Simulate(*one, r, 2);
  absl::StatusOr<SimulationResult> split = Simulate(*parts, r, 2);
  if (!whole.ok() || !split.ok()) {
    return check->Fail("gate parts, 2 workers",
                       whole.ok() ? split.status() : whole.status());
  }
  check->Near(
      "gate parts, 2 workers: wall + pack + a part + completion "
      "- finalize",
      split->wall_seconds,
      whole->wall_seconds + TaskSecondsAlone(pack, r) +
          TaskSecondsAlone(part, r) + TaskSecondsAlone(completion, r) -
          TaskSecondsAlone(finalize, r));
}

// Held-out audits in the block's last reduce: a reduce waits for its
// calibration shards only, the last one for every round's held-out shards
// too; the same tasks, and on 2 workers no later than waiting for both.
void CheckHeldoutLater(Checker* check) {
  JobShape shape = SmallJob();
  shape.blocks = 2;
  Resources r = SmallResources();
  r.storage_bytes_per_second = 0.0;
  double wall[2] = {0.0, 0.0};
  for (const bool later : {false, true}) {
    shape.heldout_later = later;
    absl::StatusOr<Plan> plan = PlanRounds(shape);
    if (!plan.ok()) return check->Fail("PlanRounds", plan.status());
    int last_reduce_heldout = 0;
    int other_reduce_heldout = 0;
    for (const PlannedTask& task : plan->tasks) {
      if (task.kind != TaskKind::kReduce || task.block != 0) continue;
      for (const int dep : task.deps) {
        const PlannedTask& from = plan->tasks[dep];
        if (from.kind != TaskKind::kShardStats || from.calibration) continue;
        (task.group == 3 ? last_reduce_heldout : other_reduce_heldout) += 1;
      }
    }
    const std::string name = later ? "held-out later" : "held-out first";
    // SmallJob: 2 held-out shards; 6 reduces before the last.
    check->Near(name + ": held-out shards the last reduce waits for",
                last_reduce_heldout, later ? 8 : 2);
    check->Near(name + ": held-out shards the other reduces wait for",
                other_reduce_heldout, later ? 0 : 12);
    absl::StatusOr<SimulationResult> two = Simulate(*plan, r, 2);
    if (!two.ok()) return check->Fail(name, two.status());
    wall[later] = two->wall_seconds;
  }
  check->AtLeast("held-out later, 2 workers: no later than held-out first",
                 wall[0], wall[1]);
}

// Two independent tasks on shared storage as fast as a link (1 GB/s),
// overhead 0.5 s, compute 1 s; A reads 1 GB, B 2 GB. On 2 workers both
// read at 0.5 GB/s until A's read ends at 0.5 + 2 = 2.5 s; B's last GB
// then takes 1 s: B ends at 3.5 + 1 = 4.5 s, A at 2.5 + 1 = 3.5 s. On 1
// worker: (0.5 + 1 + 1) + (0.5 + 2 + 1) = 6 s.
void CheckContention(Checker* check) {
  Plan plan;
  for (double gb : {1.0, 2.0}) {
    PlannedTask task;
    task.block = 0;
    task.fixed_seconds = 1.0;
    task.bytes_read = gb * 1e9;
    plan.tasks.push_back(task);
  }
  Resources r;
  r.rates.forward_flops_per_second = 1e9;
  r.rates.hessian_flops_per_second = 1e9;
  r.rates.gptq_flops_per_second = 1e9;
  r.network_bytes_per_second = 1e9;
  r.storage_bytes_per_second = 1e9;
  r.task_overhead_seconds = 0.5;
  absl::StatusOr<SimulationResult> two = Simulate(plan, r, 2);
  if (!two.ok()) return check->Fail("contention", two.status());
  check->Near("shared storage, 2 workers: A ends", two->finish[0], 3.5);
  check->Near("shared storage, 2 workers: wall", two->wall_seconds, 4.5);
  absl::StatusOr<SimulationResult> one = Simulate(plan, r, 1);
  if (!one.ok()) return check->Fail("contention", one.status());
  check->Near("shared storage, 1 worker: wall", one->wall_seconds, 6.0);
}

// The shard file sizes of docs/DATA_PARALLEL.md: 488 MiB per Llama-3-8B
// calibration shard and block (four groups, no damp: auto).
void CheckShardBytes(Checker* check) {
  JobShape shape;
  const absl::Status status = ApplyModel("llama3-8b", &shape);
  if (!status.ok()) return check->Fail("llama3-8b", status);
  absl::StatusOr<Plan> plan = PlanRounds(shape);
  if (!plan.ok()) return check->Fail("PlanRounds llama3-8b", plan.status());
  double written = 0.0;
  for (const PlannedTask& task : plan->tasks) {
    if (task.kind == TaskKind::kShardStats && task.block == 0 &&
        task.calibration && task.shard == 0) {
      written += task.bytes_written;
    }
  }
  check->Near("llama3-8b: shard files per calibration shard and block, MiB",
              std::round(written / (1024.0 * 1024.0)), 488.0);
  check->Near("llama3-8b: tasks (52 per block, 43 in the last, finalize)",
              plan->tasks.size(), 52 * 32 - 9 + 1);
}

}  // namespace

absl::Status SelfCheck(std::FILE* out) {
  Checker check(out);
  CheckModelJobs(&check);
  CheckOneBlock(&check);
  CheckHeldoutLater(&check);
  CheckGateParts(&check);
  CheckShardStash(&check);
  CheckContention(&check);
  CheckShardBytes(&check);
  return check.Result();
}

}  // namespace rounds_sim
}  // namespace quant

// The plans (PlanRounds, PlanBlockTasks), their work and volumes, and the
// scheduler simulation; see round_schedule.h.
#include "bench/rounds_simulation/round_schedule.h"

#include <algorithm>
#include <limits>
#include <set>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/model/linear_layers.h"
#include "core/pipeline/hidden_state_stream.h"
#include "core/pipeline/quantization_plan.h"

namespace quant {
namespace rounds_sim {
namespace {

constexpr int kGroups = 4;  // attn_in, attn_out, mlp_in, mlp_out.
constexpr double kFloatBytes = 4.0;

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Sequences in shard `shard` of a split of `sequences`.
int64_t ShardSequences(int64_t sequences, int shard) {
  return std::min<int64_t>(kShardSequences,
                           sequences - shard * kShardSequences);
}

// The lower triangle of a K x K float32 sum (shard_sums_file.h).
double TriangleBytes(int64_t k) {
  return static_cast<double>(k) * static_cast<double>(k + 1) / 2.0 *
         kFloatBytes;
}

double Product(const LinearLayerSpec& spec) {
  return static_cast<double>(spec.out_features) *
         static_cast<double>(spec.in_features);
}

int64_t ScaleGroups(const JobShape& shape, int64_t k) {
  return shape.group_size > 0 ? CeilDiv(k, shape.group_size) : 1;
}

// What the plan needs of one block (every block is alike).
struct BlockCosts {
  std::vector<LinearLayerSpec> groups[kGroups];
  int64_t k[kGroups] = {0, 0, 0, 0};
  double forward_per_token = 0.0;    // BlockForwardFlopsPerToken.
  double prefix_per_token[kGroups];  // Up to group g's input.
  double weight_bytes = 0.0;         // The checkpoint's block.
  // A layer's RoundDeltaFile, by group and the layer's index in it.
  std::vector<double> delta_bytes[kGroups];
  double packed_bytes = 0.0;  // The block's packed tensors.
};

BlockCosts CostBlock(const JobShape& shape, const ModelConfig& config) {
  BlockCosts c;
  double linear = 0.0;
  for (const LinearLayerSpec& spec : ListLinearLayers(config, 0)) {
    const int g = static_cast<int>(spec.input_group);
    c.groups[g].push_back(spec);
    c.k[g] = spec.in_features;
    linear += 2.0 * Product(spec);
  }
  c.forward_per_token = BlockForwardFlopsPerToken(config, shape.seq_len);
  const double attention = c.forward_per_token - linear;
  double prefix = 0.0;
  for (int g = 0; g < kGroups; ++g) {
    // Attention runs between attn_in's layers and attn_out's input.
    if (g == 1) prefix += attention;
    c.prefix_per_token[g] = prefix;
    for (const LinearLayerSpec& spec : c.groups[g]) {
      prefix += 2.0 * Product(spec);
      const double n = static_cast<double>(spec.out_features);
      const double k = static_cast<double>(spec.in_features);
      const double scale_groups =
          static_cast<double>(ScaleGroups(shape, spec.in_features));
      // Codes (uint8), scales and zeros (float32), g_idx and order (int32).
      c.delta_bytes[g].push_back(n * k + 2.0 * scale_groups * n * kFloatBytes +
                                 2.0 * k * 4.0);
      // Packed codes, fp16 scales, packed zeros, g_idx.
      c.packed_bytes += n * k * shape.bits / 8.0 + scale_groups * n * 2.0 +
                        scale_groups * n * shape.bits / 8.0 + k * 4.0;
      c.weight_bytes += n * k * shape.checkpoint_bytes_per_weight;
    }
  }
  // The two RMSNorm weights.
  c.weight_bytes += 2.0 * static_cast<double>(shape.hidden) *
                    shape.checkpoint_bytes_per_weight;
  return c;
}

// work_model's count of the job; the plans take its finalize (the gates).
absl::StatusOr<JobWork> WorkModelCount(const JobShape& shape) {
  const ModelConfig config = ShapeConfig(shape);
  const Recipe recipe = ShapeRecipe(shape);
  QUANT_ASSIGN_OR_RETURN(const QuantizationPlan plan,
                         PlanQuantization(config, recipe));
  return EstimateJobWork(config, recipe, plan);
}

// A reduce's work on group g: GPTQ's solves (one per damp: auto grid
// point) and the audit from the Hessians (OutputErrorEvaluator::FromHessian,
// as with more tokens than K): per split, ‖XWᵀ‖², the method's and RTN's
// error, each a quadratic form of N·K² multiply-adds, at the forward rate.
// `layer` >= 0: that layer of the group alone.
TaskWork ReduceWork(const JobShape& shape, const BlockCosts& costs, int g,
                    int layer) {
  const double solves =
      shape.damp_auto
          ? static_cast<double>(ShapeRecipe(shape).damp.auto_grid.size())
          : 1.0;
  const double audited_splits = shape.heldout_sequences > 0 ? 2.0 : 1.0;
  TaskWork work;
  for (size_t i = 0; i < costs.groups[g].size(); ++i) {
    if (layer >= 0 && static_cast<size_t>(layer) != i) continue;
    const LinearLayerSpec& spec = costs.groups[g][i];
    work.gptq_flops += solves * GptqFlops(spec.out_features, spec.in_features);
    work.forward_flops += audited_splits * 3.0 * 2.0 * Product(spec) *
                          static_cast<double>(spec.in_features);
  }
  return work;
}

// The finalize after `deps`: one task, or with shape.gate_parts a pack
// (reads every block's packed tensors, writes the staged checkpoint),
// the parts (each reads the staged checkpoint and scores its share) and
// the completion (renames; its reads of parts and layers are small).
void AppendFinalize(const JobShape& shape, const JobWork& job,
                    const BlockCosts& costs, std::vector<int> deps,
                    std::vector<PlannedTask>* tasks) {
  const double packed = costs.packed_bytes * shape.blocks;
  const int parts = std::max(1, shape.gate_parts);
  PlannedTask evaluation;
  if (shape.finalize_seconds >= 0.0) {
    evaluation.fixed_seconds = shape.finalize_seconds / parts;
  } else {
    evaluation.work = job.finalize;
    evaluation.work.forward_flops /= parts;
    evaluation.work.hessian_flops /= parts;
    evaluation.work.gptq_flops /= parts;
  }
  evaluation.bytes_read = packed;
  if (shape.gate_parts < 1) {
    evaluation.kind = TaskKind::kFinalize;
    evaluation.deps = std::move(deps);
    tasks->push_back(std::move(evaluation));
    return;
  }
  PlannedTask pack;
  pack.kind = TaskKind::kFinalizePack;
  pack.deps = std::move(deps);
  pack.bytes_read = packed;
  pack.bytes_written = packed;
  tasks->push_back(std::move(pack));
  const int pack_index = static_cast<int>(tasks->size()) - 1;
  PlannedTask completion;
  completion.kind = TaskKind::kFinalize;
  for (int p = 0; p < parts; ++p) {
    PlannedTask part = evaluation;
    part.kind = TaskKind::kGatePart;
    part.shard = p;
    part.deps = {pack_index};
    completion.deps.push_back(static_cast<int>(tasks->size()));
    tasks->push_back(std::move(part));
  }
  tasks->push_back(std::move(completion));
}

}  // namespace

absl::Status CheckJobShape(const JobShape& shape) {
  if (shape.blocks < 1 || shape.hidden < 1 || shape.intermediate < 1 ||
      shape.heads < 1 || shape.kv_heads < 1 || shape.vocab < 1) {
    return absl::InvalidArgumentError(
        "blocks, hidden, intermediate, heads, kv_heads and vocab must be "
        "positive");
  }
  if (shape.hidden % shape.heads != 0 || shape.heads % shape.kv_heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "hidden (", shape.hidden, ") must be a multiple of heads (",
        shape.heads, "), and heads of kv_heads (", shape.kv_heads, ")"));
  }
  if (shape.calibration_sequences < 1 || shape.heldout_sequences < 0 ||
      shape.seq_len < 1) {
    return absl::InvalidArgumentError(
        "calibration_sequences and seq_len must be positive, "
        "heldout_sequences at least 0");
  }
  if (shape.gate_parts < 0 || shape.gate_parts > 1024) {
    return absl::InvalidArgumentError("gate_parts must be in 0..1024");
  }
  if (shape.group_size < 0 || shape.bits < 1 || shape.bits > 8 ||
      shape.checkpoint_bytes_per_weight < 0.0) {
    return absl::InvalidArgumentError(
        "group_size must be >= 0, bits in 1..8, checkpoint bytes >= 0");
  }
  return absl::OkStatus();
}

ModelConfig ShapeConfig(const JobShape& shape) {
  ModelConfig config;
  config.architecture = Architecture::kLlama;
  config.model_type = "llama";
  config.hidden_size = shape.hidden;
  config.intermediate_size = shape.intermediate;
  config.num_hidden_layers = shape.blocks;
  config.num_attention_heads = shape.heads;
  config.num_key_value_heads = shape.kv_heads;
  config.head_dim = static_cast<int>(shape.hidden / shape.heads);
  config.vocab_size = shape.vocab;
  config.max_position_embeddings = shape.seq_len;
  return config;
}

Recipe ShapeRecipe(const JobShape& shape) {
  Recipe recipe;
  recipe.method = QuantMethod::kGptq;
  recipe.bits = shape.bits;
  recipe.group_size = shape.group_size;
  recipe.damp.automatic = shape.damp_auto;
  recipe.calibration.samples = shape.calibration_sequences;
  recipe.calibration.seq_len = shape.seq_len;
  // work_model reads 0 as "as many as calibration" (its finalize and block
  // tasks then count held-out work a job without held-out shards lacks).
  recipe.calibration.heldout_samples = shape.heldout_sequences;
  return recipe;
}

const char* TaskKindName(TaskKind kind) {
  switch (kind) {
    case TaskKind::kShardStats:
      return "shard_stats";
    case TaskKind::kReduce:
      return "reduce";
    case TaskKind::kShardOutput:
      return "shard_output";
    case TaskKind::kBlock:
      return "block";
    case TaskKind::kFinalize:
      return "finalize";
    case TaskKind::kFinalizePack:
      return "finalize_pack";
    case TaskKind::kGatePart:
      return "gate_part";
  }
  return "?";
}

std::string PlannedTask::Name() const {
  const char* split = calibration ? "cal" : "heldout";
  switch (kind) {
    case TaskKind::kShardStats:
      return absl::StrCat("shard_stats(", block, ", ", group, ", ", split, ", ",
                          shard, ")");
    case TaskKind::kReduce:
      return layer >= 0
                 ? absl::StrCat("reduce(", block, ", ", group, ", ", layer, ")")
                 : absl::StrCat("reduce(", block, ", ", group, ")");
    case TaskKind::kShardOutput:
      return absl::StrCat("shard_output(", block, ", ", split, ", ", shard,
                          ")");
    case TaskKind::kBlock:
      return absl::StrCat("block(", block, ")");
    case TaskKind::kFinalize:
      return "finalize";
    case TaskKind::kFinalizePack:
      return "finalize_pack";
    case TaskKind::kGatePart:
      return absl::StrCat("gate_part(", shard, ")");
  }
  return "?";
}

absl::StatusOr<Plan> PlanRounds(const JobShape& shape) {
  QUANT_RETURN_IF_ERROR(CheckJobShape(shape));
  QUANT_ASSIGN_OR_RETURN(const JobWork job, WorkModelCount(shape));
  const ModelConfig config = ShapeConfig(shape);
  const BlockCosts costs = CostBlock(shape, config);
  const int64_t seq_len = shape.seq_len;
  const int64_t sequences[2] = {shape.calibration_sequences,
                                shape.heldout_sequences};
  Plan plan;
  plan.rounds = true;
  plan.calibration_shards =
      static_cast<int>(CeilDiv(sequences[0], kShardSequences));
  plan.heldout_shards =
      static_cast<int>(CeilDiv(sequences[1], kShardSequences));
  const int shards[2] = {plan.calibration_shards, plan.heldout_shards};
  // The previous block's shard_output tasks, per split and shard.
  std::vector<int> previous_output[2];
  std::vector<int> last_reduces;
  for (int b = 0; b < shape.blocks; ++b) {
    std::vector<int> previous_reduces;
    double deltas_before = 0.0;      // Deltas of rounds 0..g-1.
    std::vector<int> heldout_stats;  // With heldout_later: the last reduce's.
    for (int g = 0; g < kGroups; ++g) {
      std::vector<int> stats;
      double triangles = 0.0;
      for (int split = 0; split < 2; ++split) {
        for (int s = 0; s < shards[split]; ++s) {
          PlannedTask task;
          task.kind = TaskKind::kShardStats;
          task.block = b;
          task.group = g;
          task.calibration = split == 0;
          task.shard = s;
          task.tokens = ShardSequences(sequences[split], s) * seq_len;
          if (g == 0) {
            if (b > 0) task.deps = {previous_output[split][s]};
          } else {
            task.deps = previous_reduces;
          }
          const double tokens = static_cast<double>(task.tokens);
          task.work.forward_flops =
              tokens *
              (shape.shard_stash && g > 0
                   ? costs.prefix_per_token[g] - costs.prefix_per_token[g - 1]
                   : costs.prefix_per_token[g]);
          task.work.hessian_flops = HessianFlops(task.tokens, costs.k[g]);
          task.bytes_read = costs.weight_bytes +
                            tokens * shape.hidden * kFloatBytes + deltas_before;
          // damp: auto's train and validation parts beside the sum.
          task.bytes_written = TriangleBytes(costs.k[g]) *
                               (split == 0 && shape.damp_auto ? 3.0 : 1.0);
          triangles += task.bytes_written;
          if (shape.heldout_later && split == 1) {
            heldout_stats.push_back(static_cast<int>(plan.tasks.size()));
          } else {
            stats.push_back(static_cast<int>(plan.tasks.size()));
          }
          plan.tasks.push_back(std::move(task));
        }
      }
      if (g == kGroups - 1) {
        stats.insert(stats.end(), heldout_stats.begin(), heldout_stats.end());
      }
      previous_reduces.clear();
      const int layers = static_cast<int>(costs.groups[g].size());
      const bool by_layer = shape.layer_reduces && layers > 1;
      double group_delta = 0.0;
      for (const double bytes : costs.delta_bytes[g]) group_delta += bytes;
      for (int layer = by_layer ? 0 : -1; layer < (by_layer ? layers : 0);
           ++layer) {
        PlannedTask reduce;
        reduce.kind = TaskKind::kReduce;
        reduce.block = b;
        reduce.group = g;
        reduce.layer = layer;
        reduce.deps = stats;
        reduce.work = ReduceWork(shape, costs, g, layer);
        reduce.bytes_read = costs.weight_bytes + deltas_before + triangles;
        reduce.bytes_written =
            layer >= 0 ? costs.delta_bytes[g][layer] : group_delta;
        if (g == kGroups - 1) reduce.bytes_written += costs.packed_bytes;
        previous_reduces.push_back(static_cast<int>(plan.tasks.size()));
        plan.tasks.push_back(std::move(reduce));
      }
      deltas_before += group_delta;
    }
    // The last group (down_proj) is one reduce, which publishes the block.
    const int previous_reduce = previous_reduces.back();
    last_reduces.push_back(previous_reduce);
    if (b == shape.blocks - 1) break;  // Nothing reads the last outputs.
    for (int split = 0; split < 2; ++split) {
      previous_output[split].clear();
      for (int s = 0; s < shards[split]; ++s) {
        PlannedTask task;
        task.kind = TaskKind::kShardOutput;
        task.block = b;
        task.calibration = split == 0;
        task.shard = s;
        task.tokens = ShardSequences(sequences[split], s) * seq_len;
        task.deps = {previous_reduce};
        const double tokens = static_cast<double>(task.tokens);
        // From the kept residual: the MLP (gate/up again, then down).
        task.work.forward_flops =
            tokens * (shape.shard_stash
                          ? costs.forward_per_token - costs.prefix_per_token[2]
                          : costs.forward_per_token);
        const double states = tokens * shape.hidden * kFloatBytes;
        task.bytes_read = costs.weight_bytes + states + deltas_before;
        task.bytes_written = states;
        previous_output[split].push_back(static_cast<int>(plan.tasks.size()));
        plan.tasks.push_back(std::move(task));
      }
    }
  }
  AppendFinalize(shape, job, costs, last_reduces, &plan.tasks);
  return plan;
}

absl::StatusOr<Plan> PlanBlockTasks(const JobShape& shape) {
  QUANT_RETURN_IF_ERROR(CheckJobShape(shape));
  QUANT_ASSIGN_OR_RETURN(const JobWork job, WorkModelCount(shape));
  const BlockCosts costs = CostBlock(shape, ShapeConfig(shape));
  Plan plan;
  plan.rounds = false;
  const double all_tokens = static_cast<double>(shape.calibration_sequences +
                                                shape.heldout_sequences) *
                            shape.seq_len;
  const double states =
      all_tokens * static_cast<double>(shape.hidden) * kFloatBytes;
  std::vector<int> blocks;
  for (int b = 0; b < shape.blocks; ++b) {
    PlannedTask task;
    task.kind = TaskKind::kBlock;
    task.block = b;
    if (b > 0) task.deps = {b - 1};
    // The same counts as the rounds without their recomputation: the
    // block's forward twice over every token (the inputs captured group by
    // group, then the leaving states), each group's Hessian of both splits
    // once, and the reduces' work.
    task.work.forward_flops = 2.0 * all_tokens * costs.forward_per_token;
    for (int g = 0; g < kGroups; ++g) {
      task.work.hessian_flops +=
          HessianFlops(static_cast<int64_t>(all_tokens), costs.k[g]);
      task.work += ReduceWork(shape, costs, g, -1);
    }
    task.bytes_read = costs.weight_bytes + states;
    task.bytes_written =
        costs.packed_bytes + (b < shape.blocks - 1 ? states : 0.0);
    blocks.push_back(b);
    plan.tasks.push_back(std::move(task));
  }
  AppendFinalize(shape, job, costs, blocks, &plan.tasks);
  return plan;
}

absl::Status CheckResources(const Resources& resources) {
  if (!resources.rates.known()) {
    return absl::InvalidArgumentError(
        "the forward, hessian and gptq rates must be positive");
  }
  if (!(resources.network_bytes_per_second > 0.0) ||
      resources.storage_bytes_per_second < 0.0 ||
      resources.task_overhead_seconds < 0.0) {
    return absl::InvalidArgumentError(
        "network must be positive, storage >= 0 (0: unlimited), the task "
        "overhead >= 0");
  }
  return absl::OkStatus();
}

double ComputeSeconds(const PlannedTask& task, const Resources& resources) {
  return PredictSeconds(task.work, resources.rates) + task.fixed_seconds;
}

namespace {

double AloneRate(const Resources& resources) {
  return resources.storage_bytes_per_second > 0.0
             ? std::min(resources.network_bytes_per_second,
                        resources.storage_bytes_per_second)
             : resources.network_bytes_per_second;
}

}  // namespace

double TaskSecondsAlone(const PlannedTask& task, const Resources& resources) {
  const double rate = AloneRate(resources);
  return resources.task_overhead_seconds + task.bytes_read / rate +
         ComputeSeconds(task, resources) + task.bytes_written / rate;
}

double SumOfTaskSeconds(const Plan& plan, const Resources& resources) {
  double sum = 0.0;
  for (const PlannedTask& task : plan.tasks) {
    sum += TaskSecondsAlone(task, resources);
  }
  return sum;
}

double CriticalPathSeconds(const Plan& plan, const Resources& resources) {
  std::vector<double> finish(plan.tasks.size(), 0.0);
  double longest = 0.0;
  for (size_t i = 0; i < plan.tasks.size(); ++i) {
    double start = 0.0;
    for (int dep : plan.tasks[i].deps) start = std::max(start, finish[dep]);
    finish[i] = start + TaskSecondsAlone(plan.tasks[i], resources);
    longest = std::max(longest, finish[i]);
  }
  return longest;
}

const char* SimulationResult::Busiest() const {
  // Ties go to the shared resource first.
  if (storage_utilization >= network_utilization &&
      storage_utilization >= compute_utilization && storage_utilization > 0) {
    return "storage";
  }
  return network_utilization >= compute_utilization ? "network" : "compute";
}

namespace {

enum Phase { kOverhead = 0, kRead, kCompute, kWrite, kDone };

struct Running {
  int task = 0;
  int phase = kOverhead;
  double remaining = 0.0;  // Seconds, or bytes in kRead and kWrite.
};

bool IsTransfer(int phase) { return phase == kRead || phase == kWrite; }

// Moves `r` to the first phase from `phase` on with something to do.
void EnterPhase(const PlannedTask& task, const Resources& resources, int phase,
                Running* r) {
  for (r->phase = phase; r->phase < kDone; ++r->phase) {
    switch (r->phase) {
      case kOverhead:
        r->remaining = resources.task_overhead_seconds;
        break;
      case kRead:
        r->remaining = task.bytes_read;
        break;
      case kCompute:
        r->remaining = ComputeSeconds(task, resources);
        break;
      case kWrite:
        r->remaining = task.bytes_written;
        break;
    }
    if (r->remaining > 0.0) return;
  }
  r->remaining = 0.0;
}

}  // namespace

absl::StatusOr<SimulationResult> Simulate(const Plan& plan,
                                          const Resources& resources,
                                          int workers) {
  QUANT_RETURN_IF_ERROR(CheckResources(resources));
  if (workers < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("workers must be at least 1, not ", workers));
  }
  const int n = static_cast<int>(plan.tasks.size());
  SimulationResult result;
  result.workers = workers;
  result.start.assign(n, 0.0);
  result.finish.assign(n, 0.0);
  std::vector<int> waiting(n, 0);
  std::vector<std::vector<int>> dependents(n);
  std::set<int> ready;  // Runnable, by plan order.
  for (int i = 0; i < n; ++i) {
    const PlannedTask& task = plan.tasks[i];
    for (int dep : task.deps) {
      if (dep < 0 || dep >= i) {
        return absl::InternalError(absl::StrCat(
            task.Name(), " depends on task ", dep, ", not an earlier one"));
      }
      dependents[dep].push_back(i);
    }
    waiting[i] = static_cast<int>(task.deps.size());
    if (waiting[i] == 0) ready.insert(i);
    result.compute_seconds += ComputeSeconds(task, resources);
    result.overhead_seconds += resources.task_overhead_seconds;
    result.bytes_read += task.bytes_read;
    result.bytes_written += task.bytes_written;
  }
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<Running> running;  // Kept in plan order.
  double now = 0.0;
  int done = 0;
  while (done < n) {
    // Free workers lease the first runnable tasks in plan order.
    while (static_cast<int>(running.size()) < workers && !ready.empty()) {
      Running r;
      r.task = *ready.begin();
      ready.erase(ready.begin());
      result.start[r.task] = now;
      EnterPhase(plan.tasks[r.task], resources, kOverhead, &r);
      running.push_back(r);
    }
    if (running.empty()) {
      return absl::InternalError("the plan has tasks that can never run");
    }
    std::sort(
        running.begin(), running.end(),
        [](const Running& a, const Running& b) { return a.task < b.task; });
    int transfers = 0;
    for (const Running& r : running) transfers += IsTransfer(r.phase) ? 1 : 0;
    double rate = resources.network_bytes_per_second;
    if (resources.storage_bytes_per_second > 0.0 && transfers > 0) {
      rate = std::min(rate, resources.storage_bytes_per_second / transfers);
    }
    // The next phase to end.
    std::vector<double> left(running.size(), inf);
    double step = inf;
    for (size_t i = 0; i < running.size(); ++i) {
      const Running& r = running[i];
      left[i] = r.phase == kDone      ? 0.0
                : IsTransfer(r.phase) ? r.remaining / rate
                                      : r.remaining;
      step = std::min(step, left[i]);
    }
    // Phases ending within rounding of the first end with it.
    const double tolerance = 1e-12 * std::max(1.0, now + step);
    now += step;
    std::vector<int> finished;
    std::vector<Running> still;
    for (size_t i = 0; i < running.size(); ++i) {
      Running r = running[i];
      const PlannedTask& task = plan.tasks[r.task];
      if (left[i] <= step + tolerance) {
        EnterPhase(task, resources, r.phase + 1, &r);
      } else {
        r.remaining -= IsTransfer(r.phase) ? rate * step : step;
      }
      if (r.phase == kDone) {
        finished.push_back(r.task);
      } else {
        still.push_back(r);
      }
    }
    running = std::move(still);
    for (int t : finished) {  // In plan order.
      result.finish[t] = now;
      ++done;
      for (int next : dependents[t]) {
        if (--waiting[next] == 0) ready.insert(next);
      }
    }
  }
  result.wall_seconds = now;
  if (now > 0.0) {
    const double bytes = result.bytes_read + result.bytes_written;
    result.compute_utilization = result.compute_seconds / (workers * now);
    result.network_utilization =
        bytes / (resources.network_bytes_per_second * workers * now);
    if (resources.storage_bytes_per_second > 0.0) {
      result.storage_utilization =
          bytes / (resources.storage_bytes_per_second * now);
    }
  }
  return result;
}

}  // namespace rounds_sim
}  // namespace quant

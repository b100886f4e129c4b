// How much work a job is, counted before it runs, and how long that takes
// at measured rates. A job's work is split the way its tasks are: each
// decoder block's task, then the finalize. Each task's work is counted in
// floating-point operations of three kinds, because each runs at its own
// rate on a machine: the forward passes (matrix products of the block's
// linear layers and attention), the Hessians' rank updates, and the GPTQ
// solves. A worker measures the three rates on the kernels it runs
// (rate_probe.h); seconds = the sum of each kind's flops over its rate.
//
// The counts follow what the block task does (block_task.cc): it runs the
// calibration and held-out windows through the block with the original
// weights (capturing each group's inputs), again group by group with the
// quantized weights (the next block's input), and audits every layer on
// both splits against the method and round-to-nearest (three products per
// layer); AWQ adds a product per grid point and layer; GPTQ with damping
// `auto` solves once per grid point. The finalize runs the held-out
// windows through the whole model twice (unquantized and packed, lm_head
// included) for the gates. The counts are a model, not a promise: quantd
// scales its predictions by how long a job's finished tasks really took.
#ifndef QUANT_CORE_ESTIMATE_WORK_MODEL_H_
#define QUANT_CORE_ESTIMATE_WORK_MODEL_H_

#include <cstdint>
#include <vector>

#include "core/model/model_config.h"
#include "core/pipeline/quantization_plan.h"
#include "core/recipe/recipe.h"

namespace quant {

// Measured by a worker on its kernels at its thread count; 0 = unknown.
struct WorkRates {
  double forward_flops_per_second = 0.0;
  double hessian_flops_per_second = 0.0;
  double gptq_flops_per_second = 0.0;

  bool known() const {
    return forward_flops_per_second > 0.0 && hessian_flops_per_second > 0.0 &&
           gptq_flops_per_second > 0.0;
  }
};

struct TaskWork {
  double forward_flops = 0.0;
  double hessian_flops = 0.0;
  double gptq_flops = 0.0;

  TaskWork& operator+=(const TaskWork& other);
};

struct JobWork {
  // At most: the recipe's windows times seq_len (a calibration set that
  // runs out of text gives fewer).
  int64_t calibration_tokens = 0;
  int64_t heldout_tokens = 0;
  std::vector<TaskWork> blocks;  // One per decoder block, in order.
  TaskWork finalize;

  TaskWork Total() const;
};

// Flops of one token through one block's forward: 2·N·K per linear layer
// and causal attention over a window of `seq_len` (on average (seq_len+1)/2
// positions, a product for the scores and one for the values).
double BlockForwardFlopsPerToken(const ModelConfig& config, int seq_len);

// Flops of the Hessian's rank update over `tokens` rows of width `k` (one
// triangle: tokens·k·(k+1)).
double HessianFlops(int64_t tokens, int64_t k);

// Flops of one GPTQ solve of an [n, k] layer: the factorization and inverse
// (about k³) and the column sweep with its updates (2·n·k²).
double GptqFlops(int64_t n, int64_t k);

// The job's work under `plan` (PlanQuantization of `recipe` over `config`).
JobWork EstimateJobWork(const ModelConfig& config, const Recipe& recipe,
                        const QuantizationPlan& plan);

// Seconds for `work` at `rates` (which must be known()).
double PredictSeconds(const TaskWork& work, const WorkRates& rates);

}  // namespace quant

#endif  // QUANT_CORE_ESTIMATE_WORK_MODEL_H_

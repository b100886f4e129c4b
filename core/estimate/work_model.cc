// EstimateJobWork and the flop counts it is made of; see work_model.h.
#include "core/estimate/work_model.h"

#include <set>

#include "core/model/linear_layers.h"

namespace quant {

TaskWork& TaskWork::operator+=(const TaskWork& other) {
  forward_flops += other.forward_flops;
  hessian_flops += other.hessian_flops;
  gptq_flops += other.gptq_flops;
  return *this;
}

TaskWork JobWork::Total() const {
  TaskWork total = finalize;
  for (const TaskWork& block : blocks) total += block;
  return total;
}

double BlockForwardFlopsPerToken(const ModelConfig& config, int seq_len) {
  double linear = 0.0;
  for (const LinearLayerSpec& spec : ListLinearLayers(config, 0)) {
    linear += 2.0 * static_cast<double>(spec.out_features) *
              static_cast<double>(spec.in_features);
  }
  const int head_dim =
      config.head_dim > 0
          ? config.head_dim
          : static_cast<int>(config.hidden_size / config.num_attention_heads);
  const double attended = (static_cast<double>(seq_len) + 1.0) / 2.0;
  // Scores q·k and the weighted sum of v: 2 flops per multiply-add each.
  const double attention =
      4.0 * config.num_attention_heads * head_dim * attended;
  return linear + attention;
}

double HessianFlops(int64_t tokens, int64_t k) {
  return static_cast<double>(tokens) * static_cast<double>(k) *
         static_cast<double>(k + 1);
}

double GptqFlops(int64_t n, int64_t k) {
  const double kd = static_cast<double>(k);
  return kd * kd * kd + 2.0 * static_cast<double>(n) * kd * kd;
}

JobWork EstimateJobWork(const ModelConfig& config, const Recipe& recipe,
                        const QuantizationPlan& plan) {
  const CalibrationSettings& c = recipe.calibration;
  JobWork work;
  work.calibration_tokens = static_cast<int64_t>(c.samples) * c.seq_len;
  work.heldout_tokens =
      static_cast<int64_t>(c.heldout_samples > 0 ? c.heldout_samples
                                                 : c.samples) *
      c.seq_len;
  const double cal = static_cast<double>(work.calibration_tokens);
  const double all = cal + static_cast<double>(work.heldout_tokens);
  const double per_token = BlockForwardFlopsPerToken(config, c.seq_len);
  for (int block = 0; block < static_cast<int>(plan.blocks.size()); ++block) {
    TaskWork task;
    // Original weights (capture), then quantized ones (propagation).
    task.forward_flops = 2.0 * all * per_token;
    std::set<InputGroup> calibrated;
    for (const LinearLayerSpec& spec : ListLinearLayers(config, block)) {
      auto it = plan.blocks[block].find(spec.type);
      if (it == plan.blocks[block].end() || it->second.keep_unquantized) {
        continue;
      }
      const LayerSettings& s = it->second;
      const double product = 2.0 * static_cast<double>(spec.out_features) *
                             static_cast<double>(spec.in_features);
      // The audit: original, method and RTN outputs on both splits.
      task.forward_flops += 3.0 * all * product;
      if (s.method == QuantMethod::kAwq) {
        task.forward_flops +=
            cal * product * static_cast<double>(recipe.awq_alpha_grid.size());
      }
      if (calibrated.insert(spec.input_group).second) {
        task.hessian_flops +=
            HessianFlops(work.calibration_tokens, spec.in_features);
      }
      if (s.method == QuantMethod::kGptq) {
        const double solves =
            s.damp.automatic ? static_cast<double>(recipe.damp.auto_grid.size())
                             : 1.0;
        task.gptq_flops +=
            solves * GptqFlops(spec.out_features, spec.in_features);
      }
    }
    work.blocks.push_back(task);
  }
  // The gates: every block and lm_head, unquantized and packed.
  const double lm_head = 2.0 * static_cast<double>(config.hidden_size) *
                         static_cast<double>(config.vocab_size);
  work.finalize.forward_flops =
      2.0 * static_cast<double>(work.heldout_tokens) *
      (static_cast<double>(plan.blocks.size()) * per_token + lm_head);
  return work;
}

double PredictSeconds(const TaskWork& work, const WorkRates& rates) {
  return work.forward_flops / rates.forward_flops_per_second +
         work.hessian_flops / rates.hessian_flops_per_second +
         work.gptq_flops / rates.gptq_flops_per_second;
}

}  // namespace quant

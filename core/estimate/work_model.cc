// EstimateJobWork and the flop counts it is made of; see work_model.h.
#include "core/estimate/work_model.h"

#include <map>
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
  if (config.IsMoeBlock(0)) {
    // The router, and each token's top-k experts (gate, up, down).
    const MoeConfig& moe = *config.moe;
    linear += 2.0 * static_cast<double>(config.hidden_size) *
              static_cast<double>(moe.num_experts);
    linear += static_cast<double>(moe.experts_per_token) * 3.0 * 2.0 *
              static_cast<double>(config.hidden_size) *
              static_cast<double>(moe.expert_intermediate_size);
  }
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

namespace {

// A mixture-of-experts block's experts: each on the tokens routed to it
// (tokens x top-k / experts on average), or on every calibration token
// under routing: all_experts; audited on its routed held-out tokens.
void AddExpertWork(const ModelConfig& config, const Recipe& recipe,
                   const std::map<LayerType, LayerSettings>& settings,
                   int block, double cal, double all, TaskWork* task) {
  const MoeConfig& moe = *config.moe;
  const double share = static_cast<double>(moe.experts_per_token) /
                       static_cast<double>(moe.num_experts);
  const bool every_token = recipe.moe.has_value() &&
                           recipe.moe->routing == ExpertRouting::kAllExperts;
  const double routed_cal = every_token ? cal : cal * share;
  const double routed_all = routed_cal + (all - cal) * share;
  for (const LinearLayerSpec& spec : ListExpertLayers(config, block)) {
    auto it = settings.find(spec.type);
    if (it == settings.end() || it->second.keep_unquantized) continue;
    const double product = 2.0 * static_cast<double>(spec.out_features) *
                           static_cast<double>(spec.in_features);
    task->forward_flops += 3.0 * routed_all * product;
    if (spec.type != LayerType::kUpProj) {  // gate and up share one.
      task->hessian_flops +=
          HessianFlops(static_cast<int64_t>(routed_cal), spec.in_features);
    }
    if (it->second.method == QuantMethod::kGptq) {
      const double solves =
          it->second.damp.automatic
              ? static_cast<double>(recipe.damp.auto_grid.size())
              : 1.0;
      task->gptq_flops +=
          solves * GptqFlops(spec.out_features, spec.in_features);
    }
  }
}

}  // namespace

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
    if (static_cast<size_t>(block) < plan.expert_blocks.size() &&
        config.IsMoeBlock(block)) {
      AddExpertWork(config, recipe, plan.expert_blocks[block], block, cal, all,
                    &task);
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

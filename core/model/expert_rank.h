// The seed documents' Hessian rank arithmetic for a mixture-of-experts
// model, done before any work: how many calibration tokens an average
// expert's layers see under natural routing (tokens x top-k / experts), set
// against the input widths K of its layers. Below K an expert's Hessian
// cannot be full rank, damping dominates and GPTQ behaves much like RTN.
#ifndef QUANT_CORE_MODEL_EXPERT_RANK_H_
#define QUANT_CORE_MODEL_EXPERT_RANK_H_

#include <cstdint>
#include <optional>
#include <string>

#include "core/model/model_config.h"

namespace quant {

struct ExpertRankEstimate {
  int64_t block_tokens = 0;  // Calibration tokens through each block.
  int num_experts = 0;
  int experts_per_token = 0;
  // block_tokens * experts_per_token / num_experts: what an average
  // expert sees under natural routing; rare experts see fewer.
  double tokens_per_expert = 0;
  int64_t gate_up_k = 0;  // K of an expert's gate/up: hidden_size.
  int64_t down_k = 0;     // K of its down: the expert intermediate size.
  // The widest dense layer's K (a dense down_proj where the model has one,
  // else the attention's widest input), which sees every token.
  int64_t widest_dense_k = 0;

  // The average expert's tokens are below the K of its gate/up or down.
  bool gate_up_rank_deficient() const {
    return tokens_per_expert < static_cast<double>(gate_up_k);
  }
  bool down_rank_deficient() const {
    return tokens_per_expert < static_cast<double>(down_k);
  }
  // Calibration tokens that would give an average expert K tokens for its
  // widest layer: block_tokens scaled by max(K) / tokens_per_expert.
  int64_t TokensForFullRank() const;
};

// Empty for a dense model.
std::optional<ExpertRankEstimate> EstimateExpertRank(const ModelConfig& config,
                                                     int64_t block_tokens);

// "experts: T calibration tokens x top-k / E experts = N tokens per expert
// on average under natural routing (rare experts see fewer)", no newline:
// the first line of DescribeExpertRank and the start of the plan's warning.
std::string ExpertTokensSentence(const ExpertRankEstimate& estimate);

// Lines for a person, e.g.
//   experts: 262144 calibration tokens x top-2 / 64 experts = 8192 tokens
//   per expert on average (rare experts see fewer); K = 4096 (gate/up),
//   14336 (down): down is rank-deficient below 14336 tokens; ...
std::string DescribeExpertRank(const ExpertRankEstimate& estimate);

}  // namespace quant

#endif  // QUANT_CORE_MODEL_EXPERT_RANK_H_

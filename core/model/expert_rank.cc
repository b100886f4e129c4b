// Tokens per expert against the input widths of the experts' layers.
#include "core/model/expert_rank.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace quant {

int64_t ExpertRankEstimate::TokensForFullRank() const {
  if (tokens_per_expert <= 0) return 0;
  const double widest = static_cast<double>(std::max(gate_up_k, down_k));
  return static_cast<int64_t>(std::ceil(static_cast<double>(block_tokens) *
                                        widest / tokens_per_expert));
}

std::optional<ExpertRankEstimate> EstimateExpertRank(const ModelConfig& config,
                                                     int64_t block_tokens) {
  if (!config.moe.has_value()) return std::nullopt;
  ExpertRankEstimate estimate;
  estimate.block_tokens = block_tokens;
  estimate.num_experts = config.moe->num_experts;
  estimate.experts_per_token = config.moe->experts_per_token;
  estimate.tokens_per_expert = static_cast<double>(block_tokens) *
                               config.moe->experts_per_token /
                               config.moe->num_experts;
  estimate.gate_up_k = config.hidden_size;
  estimate.down_k = config.moe->expert_intermediate_size;
  bool dense_mlp = false;
  for (int b = 0; b < config.num_hidden_layers; ++b) {
    dense_mlp = dense_mlp || !config.IsMoeBlock(b);
  }
  estimate.widest_dense_k = std::max(config.hidden_size, config.q_size());
  if (dense_mlp) {
    estimate.widest_dense_k =
        std::max(estimate.widest_dense_k, config.intermediate_size);
  }
  return estimate;
}

std::string ExpertTokensSentence(const ExpertRankEstimate& e) {
  return absl::StrFormat(
      "experts: %d calibration tokens x top-%d / %d experts = %.0f tokens "
      "per expert on average under natural routing (rare experts see "
      "fewer)",
      e.block_tokens, e.experts_per_token, e.num_experts, e.tokens_per_expert);
}

std::string DescribeExpertRank(const ExpertRankEstimate& e) {
  std::string out = absl::StrCat(ExpertTokensSentence(e), "\n");
  auto verdict = [&](const char* layers, int64_t k, bool deficient) {
    return absl::StrFormat(
        "  %s: K = %d, %s\n", layers, k,
        deficient
            ? absl::StrFormat("rank-deficient (%.0f tokens < K): "
                              "damping dominates, GPTQ near RTN",
                              e.tokens_per_expert)
            : absl::StrFormat("%.1f tokens per input dimension",
                              e.tokens_per_expert / static_cast<double>(k)));
  };
  absl::StrAppend(
      &out, verdict("expert gate/up", e.gate_up_k, e.gate_up_rank_deficient()),
      verdict("expert down", e.down_k, e.down_rank_deficient()));
  absl::StrAppend(&out,
                  absl::StrFormat("  widest dense layer: K = %d, %d tokens\n",
                                  e.widest_dense_k, e.block_tokens));
  if (e.gate_up_rank_deficient() || e.down_rank_deficient()) {
    absl::StrAppend(&out,
                    absl::StrFormat("  an average expert reaches K at about %d "
                                    "calibration tokens\n",
                                    e.TokensForFullRank()));
  }
  return out;
}

}  // namespace quant

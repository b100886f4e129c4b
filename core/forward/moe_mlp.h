// The MLP of a mixture-of-experts block, as transformers'
// Qwen3MoeSparseMoeBlock and MixtralSparseMoeBlock compute it: the router's
// softmax over experts, each token sent to its top-k experts (the k weights
// renormalised where the config says so), its output the weighted sum of those
// experts' SwiGLU outputs. Each expert runs on the rows routed to it only,
// gathered into one matrix, so the cost is top-k experts per token, not every
// expert.
#ifndef QUANT_CORE_FORWARD_MOE_MLP_H_
#define QUANT_CORE_FORWARD_MOE_MLP_H_

#include <cstdint>
#include <vector>

#include "core/forward/block_weights.h"
#include "core/model/model_config.h"
#include "core/quant/matrix_types.h"

namespace quant {

// Where each token goes: for every expert, the rows of the input routed to
// it (ascending) and the weight each of those rows gives its output.
struct MoeRouting {
  std::vector<std::vector<int64_t>> rows;   // [expert] -> token rows
  std::vector<std::vector<float>> weights;  // [expert] -> routing weights

  // How many tokens each expert received; they add up to top-k x tokens.
  std::vector<int64_t> TokensPerExpert() const;
};

// Routes the rows of `mlp_input` [tokens, hidden] with `router` [experts,
// hidden]. The softmax runs in double and top-k takes the higher
// probability first, the lower expert index on a tie.
MoeRouting RouteTokens(const MoeConfig& moe, const RowMatrixF& router,
                       const ConstRowMatrixRef& mlp_input);

// down(silu(gate(x)) * up(x)) for the rows of `x`.
RowMatrixF RunExpert(const ExpertWeights& expert, const ConstRowMatrixRef& x);

// The MoE MLP's output for `mlp_input` [tokens, hidden] (the residual is not
// added). `routing`, when not null, receives where the tokens went.
RowMatrixF RunMoeMlp(const MoeConfig& moe, const MoeMlpWeights& weights,
                     const ConstRowMatrixRef& mlp_input,
                     MoeRouting* routing = nullptr);

}  // namespace quant

#endif  // QUANT_CORE_FORWARD_MOE_MLP_H_

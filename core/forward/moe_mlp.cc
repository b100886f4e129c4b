// Routing tokens to experts and running each expert on its gathered rows.
#include "core/forward/moe_mlp.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>

#include "core/forward/block_forward.h"

namespace quant {

std::vector<int64_t> MoeRouting::TokensPerExpert() const {
  std::vector<int64_t> counts;
  counts.reserve(rows.size());
  for (const std::vector<int64_t>& expert_rows : rows) {
    counts.push_back(static_cast<int64_t>(expert_rows.size()));
  }
  return counts;
}

MoeRouting RouteTokens(const MoeConfig& moe, const RowMatrixF& router,
                       const ConstRowMatrixRef& mlp_input) {
  const int experts = static_cast<int>(router.rows());
  const int top_k = moe.experts_per_token;
  const RowMatrixF logits = mlp_input * router.transpose();
  MoeRouting routing;
  routing.rows.resize(experts);
  routing.weights.resize(experts);
  std::vector<double> probs(experts);
  std::vector<int> order(experts);
  for (int64_t t = 0; t < logits.rows(); ++t) {
    double max_logit = logits(t, 0);
    for (int e = 1; e < experts; ++e) {
      max_logit = std::max(max_logit, static_cast<double>(logits(t, e)));
    }
    double sum = 0;
    for (int e = 0; e < experts; ++e) {
      probs[e] = std::exp(static_cast<double>(logits(t, e)) - max_logit);
      sum += probs[e];
    }
    for (int e = 0; e < experts; ++e) probs[e] /= sum;
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(
        order.begin(), order.begin() + top_k, order.end(), [&](int a, int b) {
          return probs[a] > probs[b] || (probs[a] == probs[b] && a < b);
        });
    double chosen = 0;
    for (int i = 0; i < top_k; ++i) chosen += probs[order[i]];
    const double scale = moe.norm_topk_prob ? 1.0 / chosen : 1.0;
    for (int i = 0; i < top_k; ++i) {
      routing.rows[order[i]].push_back(t);
      routing.weights[order[i]].push_back(
          static_cast<float>(probs[order[i]] * scale));
    }
  }
  return routing;
}

RowMatrixF RunExpert(const ExpertWeights& expert, const ConstRowMatrixRef& x) {
  return ApplyLinear(
      SwiGlu(ApplyLinear(x, expert.gate), ApplyLinear(x, expert.up)),
      expert.down);
}

RowMatrixF RunMoeMlp(const MoeConfig& moe, const MoeMlpWeights& weights,
                     const ConstRowMatrixRef& mlp_input, MoeRouting* routing) {
  MoeRouting routed = RouteTokens(moe, weights.router, mlp_input);
  RowMatrixF out = RowMatrixF::Zero(mlp_input.rows(), mlp_input.cols());
  // Experts in index order, so each row's sum has one fixed order.
  for (size_t e = 0; e < routed.rows.size(); ++e) {
    const std::vector<int64_t>& rows = routed.rows[e];
    if (rows.empty()) continue;
    RowMatrixF gathered(static_cast<int64_t>(rows.size()), mlp_input.cols());
    for (size_t i = 0; i < rows.size(); ++i) {
      gathered.row(static_cast<int64_t>(i)) = mlp_input.row(rows[i]);
    }
    const RowMatrixF expert_out = RunExpert(weights.experts[e], gathered);
    for (size_t i = 0; i < rows.size(); ++i) {
      out.row(rows[i]) +=
          routed.weights[e][i] * expert_out.row(static_cast<int64_t>(i));
    }
  }
  if (routing != nullptr) *routing = std::move(routed);
  return out;
}

}  // namespace quant

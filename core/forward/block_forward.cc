// The Llama decoder block, stage by stage.
#include "core/forward/block_forward.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/forward/moe_mlp.h"

namespace quant {
namespace {

// RMSNorm of each head_dim-wide slice of each row (qwen3's q_norm/k_norm).
void NormalizeHeads(const Eigen::VectorXf& weight, double eps, int head_dim,
                    RowMatrixF* x) {
  const Eigen::Index heads = x->cols() / head_dim;
  for (Eigen::Index r = 0; r < x->rows(); ++r) {
    for (Eigen::Index h = 0; h < heads; ++h) {
      auto slice = x->row(r).segment(h * head_dim, head_dim);
      const float inv_rms = 1.0f / std::sqrt(slice.squaredNorm() / head_dim +
                                             static_cast<float>(eps));
      slice = (slice.array() * inv_rms * weight.transpose().array()).matrix();
    }
  }
}

}  // namespace

RowMatrixF RmsNorm(const ConstRowMatrixRef& x, const Eigen::VectorXf& weight,
                   double eps) {
  RowMatrixF out(x.rows(), x.cols());
  const float cols = static_cast<float>(x.cols());
  for (Eigen::Index r = 0; r < x.rows(); ++r) {
    const float inv_rms = 1.0f / std::sqrt(x.row(r).squaredNorm() / cols +
                                           static_cast<float>(eps));
    out.row(r) =
        (x.row(r).array() * inv_rms * weight.transpose().array()).matrix();
  }
  return out;
}

RowMatrixF ApplyLinear(const ConstRowMatrixRef& x, const LinearWeights& layer) {
  RowMatrixF out = x * layer.weight.transpose();
  if (layer.bias.size() > 0) out.rowwise() += layer.bias.transpose();
  return out;
}

RowMatrixF AttentionInput(const ModelConfig& config,
                          const BlockWeights& weights,
                          const ConstRowMatrixRef& hidden) {
  return RmsNorm(hidden, weights.input_norm, config.rms_norm_eps);
}

RowMatrixF AttentionContext(const ModelConfig& config,
                            const BlockWeights& weights, const RopeTable& rope,
                            int seq_len,
                            const ConstRowMatrixRef& attention_input) {
  const int head_dim = config.head_dim;
  const int heads = config.num_attention_heads;
  const int heads_per_kv = heads / config.num_key_value_heads;
  RowMatrixF q =
      ApplyLinear(attention_input, weights.Linear(LayerType::kQProj));
  RowMatrixF k =
      ApplyLinear(attention_input, weights.Linear(LayerType::kKProj));
  const RowMatrixF v =
      ApplyLinear(attention_input, weights.Linear(LayerType::kVProj));
  if (config.qk_norm) {
    NormalizeHeads(weights.q_norm, config.rms_norm_eps, head_dim, &q);
    NormalizeHeads(weights.k_norm, config.rms_norm_eps, head_dim, &k);
  }
  const Eigen::Index batch = attention_input.rows() / seq_len;
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  RowMatrixF context(attention_input.rows(), config.q_size());
  RowMatrixF scores(seq_len, seq_len);
  // Mistral's sliding window: query t sees keys t - window + 1 .. t.
  const int window =
      config.sliding_window.has_value() && *config.sliding_window < seq_len
          ? static_cast<int>(*config.sliding_window)
          : seq_len;
  for (Eigen::Index b = 0; b < batch; ++b) {
    const Eigen::Index row0 = b * seq_len;
    rope.Apply(head_dim, q.middleRows(row0, seq_len));
    rope.Apply(head_dim, k.middleRows(row0, seq_len));
    for (int h = 0; h < heads; ++h) {
      const int kv = h / heads_per_kv;
      const auto qh = q.block(row0, h * head_dim, seq_len, head_dim);
      const auto kh = k.block(row0, kv * head_dim, seq_len, head_dim);
      const auto vh = v.block(row0, kv * head_dim, seq_len, head_dim);
      scores.noalias() = (qh * kh.transpose()) * scale;
      for (int t = 0; t < seq_len; ++t) {
        // Causal softmax over positions first..t.
        const int first = std::max(0, t - window + 1);
        auto row = scores.row(t).segment(first, t + 1 - first);
        const float max = row.maxCoeff();
        row = (row.array() - max).exp().matrix();
        row /= row.sum();
        scores.row(t).head(first).setZero();
        scores.row(t).tail(seq_len - t - 1).setZero();
      }
      context.block(row0, h * head_dim, seq_len, head_dim).noalias() =
          scores * vh;
    }
  }
  return context;
}

RowMatrixF AttentionResidual(const BlockWeights& weights,
                             const ConstRowMatrixRef& hidden,
                             const ConstRowMatrixRef& context) {
  RowMatrixF out = ApplyLinear(context, weights.Linear(LayerType::kOProj));
  out += hidden;
  return out;
}

RowMatrixF MlpInput(const ModelConfig& config, const BlockWeights& weights,
                    const ConstRowMatrixRef& residual) {
  return RmsNorm(residual, weights.post_attention_norm, config.rms_norm_eps);
}

RowMatrixF SwiGlu(RowMatrixF gate, const ConstRowMatrixRef& up) {
  // silu(g) = g * sigmoid(g)
  gate = (gate.array() / (1.0f + (-gate.array()).exp()) * up.array()).matrix();
  return gate;
}

RowMatrixF MlpHidden(const BlockWeights& weights,
                     const ConstRowMatrixRef& mlp_input) {
  return SwiGlu(ApplyLinear(mlp_input, weights.Linear(LayerType::kGateProj)),
                ApplyLinear(mlp_input, weights.Linear(LayerType::kUpProj)));
}

RowMatrixF MlpResidual(const BlockWeights& weights,
                       const ConstRowMatrixRef& residual,
                       const ConstRowMatrixRef& mlp_hidden) {
  RowMatrixF out =
      ApplyLinear(mlp_hidden, weights.Linear(LayerType::kDownProj));
  out += residual;
  return out;
}

RowMatrixF RunBlock(const ModelConfig& config, const BlockWeights& weights,
                    const RopeTable& rope, int seq_len,
                    const ConstRowMatrixRef& hidden) {
  const RowMatrixF attention_input = AttentionInput(config, weights, hidden);
  const RowMatrixF context =
      AttentionContext(config, weights, rope, seq_len, attention_input);
  const RowMatrixF residual = AttentionResidual(weights, hidden, context);
  const RowMatrixF mlp_input = MlpInput(config, weights, residual);
  if (weights.moe.has_value()) {
    RowMatrixF out = RunMoeMlp(*config.moe, *weights.moe, mlp_input);
    out += residual;
    return out;
  }
  const RowMatrixF mlp_hidden = MlpHidden(weights, mlp_input);
  return MlpResidual(weights, residual, mlp_hidden);
}

}  // namespace quant

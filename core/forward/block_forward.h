// The Llama decoder block, split into the stages a block-by-block quantizer
// needs: each stage returns the input of the next linear layer group, so a
// caller can observe it (for Hessians) and replace the group's weights before
// running the next stage. Order: [q,k,v] -> o -> [gate,up] -> down.
//
// Hidden states are [batch * seq_len, hidden]: `batch` sequences of equal
// length, rows of one sequence contiguous, row t of a sequence at position t.
#ifndef QUANT_CORE_FORWARD_BLOCK_FORWARD_H_
#define QUANT_CORE_FORWARD_BLOCK_FORWARD_H_

#include "core/forward/block_weights.h"
#include "core/forward/rope.h"
#include "core/model/model_config.h"
#include "core/quant/matrix_types.h"

namespace quant {

// y = x / rms(x) * weight, row by row.
RowMatrixF RmsNorm(const ConstRowMatrixRef& x, const Eigen::VectorXf& weight,
                   double eps);

// x Wᵀ + b.
RowMatrixF ApplyLinear(const ConstRowMatrixRef& x, const LinearWeights& layer);

// Input of q/k/v: RMSNorm(hidden).
RowMatrixF AttentionInput(const ModelConfig& config,
                          const BlockWeights& weights,
                          const ConstRowMatrixRef& hidden);

// Input of o_proj: causal grouped-query attention over q/k/v of
// `attention_input`, [batch * seq_len, heads * head_dim].
RowMatrixF AttentionContext(const ModelConfig& config,
                            const BlockWeights& weights, const RopeTable& rope,
                            int seq_len,
                            const ConstRowMatrixRef& attention_input);

// hidden + o_proj(context): the residual stream after attention.
RowMatrixF AttentionResidual(const BlockWeights& weights,
                             const ConstRowMatrixRef& hidden,
                             const ConstRowMatrixRef& context);

// Input of gate/up: RMSNorm(residual).
RowMatrixF MlpInput(const ModelConfig& config, const BlockWeights& weights,
                    const ConstRowMatrixRef& residual);

// silu(gate) * up, element by element.
RowMatrixF SwiGlu(RowMatrixF gate, const ConstRowMatrixRef& up);

// Input of down_proj: silu(gate(x)) * up(x).
RowMatrixF MlpHidden(const BlockWeights& weights,
                     const ConstRowMatrixRef& mlp_input);

// residual + down_proj(mlp_hidden): the block's output.
RowMatrixF MlpResidual(const BlockWeights& weights,
                       const ConstRowMatrixRef& residual,
                       const ConstRowMatrixRef& mlp_hidden);

// The whole block in one call; a mixture-of-experts block (weights.moe set)
// routes its MLP (core/forward/moe_mlp.h).
RowMatrixF RunBlock(const ModelConfig& config, const BlockWeights& weights,
                    const RopeTable& rope, int seq_len,
                    const ConstRowMatrixRef& hidden);

}  // namespace quant

#endif  // QUANT_CORE_FORWARD_BLOCK_FORWARD_H_

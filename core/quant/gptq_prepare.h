// The steps GPTQ does before its column loop, shared by the blocked and the
// reference implementation: input checks, dead columns, act-order, damping
// with retries and the Cholesky factorization; the rows of U (Uᵀ U = H_γ⁻¹)
// on demand; and the step after the loop, writing codes in storage order.
//
// U without an explicit inverse: with J the reversal permutation and
// J H J = L Lᵀ, U = J L⁻¹ J. Row i of U is row K-1-i of L⁻¹ reversed, the
// solution of a triangular system with Lᵀ's leading (K-i) x (K-i) block, so a
// block of rows costs (K-i)²·rows and all of U K³/3 — the same as the
// reference's second Cholesky, without its explicit inverse (K³) and without
// ever holding U whole.
#ifndef QUANT_CORE_QUANT_GPTQ_PREPARE_H_
#define QUANT_CORE_QUANT_GPTQ_PREPARE_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "core/quant/gptq_options.h"
#include "core/quant/matrix_types.h"

namespace quant {

struct GptqWorkspace {
  // [N, K] column-major working weights in quantization order, dead columns
  // zeroed.
  Eigen::MatrixXf w;
  // [K, K] lower Cholesky factor of J H_γ J in quantization order (only the
  // lower triangle is meaningful).
  Eigen::MatrixXf l;
  std::vector<int32_t> order;  // order[p] = storage column quantized p-th.
  // Static groups only: [groups, N] parameters from the unpermuted weights.
  RowMatrixF static_scales;
  RowMatrixF static_zeros;
  double damp_used = 0.0;
  int damp_retries = 0;
  int64_t dead_columns = 0;
};

absl::StatusOr<GptqWorkspace> PrepareGptq(const ConstRowMatrixRef& weights,
                                          const ConstRowMatrixRef& hessian,
                                          const GptqOptions& options);

// Rows [first, first + count) of U restricted to columns [first, K): a
// count x (K - first) matrix, `rows(t, c)` = U(first + t, first + c). Entries
// left of the diagonal are zero. For a diagonal H every off-diagonal entry is
// exactly zero. The solves run in fixed tiles of kGptqSolveTile rows of U,
// spread over `pool` (inline when null).
void UpperFactorRows(const Eigen::MatrixXf& l, int64_t first, int64_t count,
                     Eigen::MatrixXf* rows, ThreadPool* pool = nullptr);

// Codes [N, K] and per-group parameters [groups, N], both in quantization
// order (groups by position p / group_size, or static groups), turned into a
// QuantizedLayer in storage order.
QuantizedLayer AssembleGptqLayer(
    const GptqWorkspace& ws, const GridSpec& grid, bool static_groups,
    const Eigen::Matrix<uint8_t, Eigen::Dynamic, Eigen::Dynamic>& codes,
    const RowMatrixF& scales, const RowMatrixF& zeros);

}  // namespace quant

#endif  // QUANT_CORE_QUANT_GPTQ_PREPARE_H_

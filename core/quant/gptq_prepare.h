// The steps GPTQ does before its column loop, shared by the blocked and the
// reference implementation: input checks, dead columns, act-order, damping
// with retries and the Cholesky factorization; the rows of U (Uᵀ U = H_γ⁻¹)
// on demand; and the step after the loop, writing codes in storage order.
//
// U without H⁻¹: with J the reversal permutation and J H J = L Lᵀ,
// U = J L⁻¹ J, so row i of U is row K-1-i of L⁻¹ reversed. L⁻¹ replaces L in
// place by a blocked triangular inversion (LAPACK's xTRTRI order, K³/3, as
// triangular products and solves that run at GEMM speed): the same work as
// the reference's second Cholesky, without its explicit inverse (K³) and
// with no second K x K matrix.
#ifndef QUANT_CORE_QUANT_GPTQ_PREPARE_H_
#define QUANT_CORE_QUANT_GPTQ_PREPARE_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "core/quant/gptq_options.h"
#include "core/quant/matrix_types.h"

namespace quant {

// What GPTQ prepares from H alone, shared by every weight matrix quantized
// on that H (a group's layers: GptqLayers in gptq.h).
struct GptqFactor {
  // [K, K] L⁻¹, the inverse of the lower Cholesky factor of J H_γ J, in
  // quantization order (only the lower triangle is meaningful).
  Eigen::MatrixXf l_inverse;
  std::vector<int32_t> order;  // order[p] = storage column quantized p-th.
  std::vector<int64_t> dead;   // Storage columns with diag H = 0.
  double damp_used = 0.0;
  int damp_retries = 0;
};

// One weight matrix made ready for GPTQ's column loop on a factor.
struct GptqWeights {
  // [N, K] column-major working weights in quantization order, dead columns
  // zeroed.
  Eigen::MatrixXf w;
  // Static groups only: [groups, N] parameters from the unpermuted weights.
  RowMatrixF static_scales;
  RowMatrixF static_zeros;
};

// Checks the options and H [k, k] (naming options.layer_name), then the
// damped factorization with retries.
absl::StatusOr<GptqFactor> PrepareGptqFactor(const ConstRowMatrixRef& hessian,
                                             int64_t k,
                                             const GptqOptions& options);
// `weights` [N, k] must be finite (CheckFiniteWeights) and have the
// factor's k columns.
GptqWeights PrepareGptqWeights(const ConstRowMatrixRef& weights,
                               const GptqFactor& factor,
                               const GptqOptions& options);

// Both for one matrix, as the reference runs them.
struct GptqWorkspace {
  Eigen::MatrixXf w;          // GptqWeights::w
  Eigen::MatrixXf l_inverse;  // GptqFactor::l_inverse
  std::vector<int32_t> order;
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
// count x (K - first) matrix, `rows(t, c)` = U(first + t, first + c), read
// from L⁻¹. Entries left of the diagonal are zero. For a diagonal H every
// off-diagonal entry is exactly zero.
void UpperFactorRows(const Eigen::MatrixXf& l_inverse, int64_t first,
                     int64_t count, Eigen::MatrixXf* rows);

// The lower triangle of *l (a lower-triangular factor with a non-zero
// diagonal) becomes its inverse; its upper triangle is left undefined. The
// trailing inverse is built first, then one block column of kInverseBlock
// columns at a time from the right; each block column's triangular product
// runs in fixed tiles of kGptqSolveTile columns and its solve in fixed
// tiles of kInverseBlock rows over `pool` (inline when null), so the result
// is the same on any thread count.
inline constexpr int64_t kInverseBlock = 128;
void InvertLowerTriangularInPlace(Eigen::MatrixXf* l,
                                  ThreadPool* pool = nullptr);

// Codes [N, K] and per-group parameters [groups, N], both in quantization
// order (groups by position p / group_size, or static groups), turned into a
// QuantizedLayer in storage order. Its copies run in strips over `pool`
// (inline when null); the result is the same on any thread count.
QuantizedLayer AssembleGptqLayer(
    const std::vector<int32_t>& order, const GridSpec& grid, bool static_groups,
    const Eigen::Matrix<uint8_t, Eigen::Dynamic, Eigen::Dynamic>& codes,
    const RowMatrixF& scales, const RowMatrixF& zeros,
    ThreadPool* pool = nullptr);

}  // namespace quant

#endif  // QUANT_CORE_QUANT_GPTQ_PREPARE_H_

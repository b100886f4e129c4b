// GPTQ (Frantar et al. 2023), blocked: columns are quantized in order (or by
// descending diag H with act-order), each rounding error is pushed into the
// later columns through the rows of U (Uᵀ U = H_γ⁻¹), inside a block of
// block_size columns immediately and into the rest of the matrix once per
// block as a matrix-matrix product. Group parameters come from the
// already-updated weights at each group start (or are fixed up front with
// static groups). An exactly diagonal H gives RTN bit for bit (without
// act-order, or with static groups: act-order's own groups are different
// groups, not a different algorithm). Dead columns (diag H = 0) are zeroed
// and get diag 1, as in the reference.
//
// H is any positive multiple of XᵀX (see hessian.h); damping is relative to
// mean(diag H), so the scale does not matter.
#ifndef QUANT_CORE_QUANT_GPTQ_H_
#define QUANT_CORE_QUANT_GPTQ_H_

#include <vector>

#include "absl/status/statusor.h"
#include "core/quant/gptq_options.h"
#include "core/quant/matrix_types.h"

namespace quant {

// Errors: bad options, non-finite weights or H, shape mismatch (all naming
// options.layer_name), or FailedPrecondition when the Cholesky still fails
// after max_damp_retries raises of γ.
absl::StatusOr<GptqResult> QuantizeGptq(const ConstRowMatrixRef& weights,
                                        const ConstRowMatrixRef& hessian,
                                        const GptqOptions& options);

// Several matrices of K columns on one H (a layer group's layers): one
// damped factorization, then each matrix's column loop in its own arrays
// and tiles, side by side over options.pool. Each result is exactly
// QuantizeGptq's for that matrix alone, so a group's layers may be
// quantized together or one task each with the same bytes.
absl::StatusOr<std::vector<GptqResult>> QuantizeGptqLayers(
    const std::vector<ConstRowMatrixRef>& weights,
    const ConstRowMatrixRef& hessian, const GptqOptions& options);

// Damping `auto`: quantizes with H_train at every γ in `damp_grid`, measures
// the output error tr(E H_val Eᵀ) on the validation split, and returns the
// result at the γ with the smallest error (the first on ties).
struct DampSearchResult {
  GptqResult result;  // Quantized with H_train at the chosen γ.
  double chosen_damp = 0.0;
  std::vector<double> damp_grid;
  std::vector<double> validation_error;  // tr(E H_val Eᵀ) per grid entry.
};
absl::StatusOr<DampSearchResult> QuantizeGptqAutoDamp(
    const ConstRowMatrixRef& weights, const ConstRowMatrixRef& hessian_train,
    const ConstRowMatrixRef& hessian_validation,
    const std::vector<double>& damp_grid, const GptqOptions& options);

// The default grid for `auto`.
std::vector<double> DefaultDampGrid();

}  // namespace quant

#endif  // QUANT_CORE_QUANT_GPTQ_H_

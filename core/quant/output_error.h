// Layer output error ‖X(W−Q)ᵀ‖²_F evaluated either from the activations X
// directly or from H = XᵀX as tr(E H Eᵀ) (the seed's identity), whichever is
// cheaper: T·K·N against K²·N multiply-adds. Both equal the direct definition.
#ifndef QUANT_CORE_QUANT_OUTPUT_ERROR_H_
#define QUANT_CORE_QUANT_OUTPUT_ERROR_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "core/base/thread_pool.h"
#include "core/quant/matrix_types.h"

namespace quant {

class OutputErrorEvaluator {
 public:
  // H must be the UNNORMALISED XᵀX of `token_count` tokens for OutputMse to
  // mean the per-entry MSE (ratios do not care).
  static absl::StatusOr<OutputErrorEvaluator> FromHessian(
      const ConstRowMatrixRef& hessian, int64_t token_count);
  // Keeps X when T <= K, otherwise forms H once.
  static absl::StatusOr<OutputErrorEvaluator> FromActivations(
      const ConstRowMatrixRef& activations);

  // ‖X(W−Q)ᵀ‖²_F. Rows are taken in fixed tiles, spread over `pool`
  // (inline when null) and summed in tile order: the same on any thread
  // count.
  double SquaredError(const ConstRowMatrixRef& weights,
                      const ConstRowMatrixRef& quantized,
                      ThreadPool* pool = nullptr) const;
  // ‖X Mᵀ‖²_F for any [N, K] matrix M (e.g. the weight itself).
  double SquaredNorm(const ConstRowMatrixRef& m,
                     ThreadPool* pool = nullptr) const;
  // Mean over the T×N entries of (X(W−Q)ᵀ)².
  double OutputMse(const ConstRowMatrixRef& weights,
                   const ConstRowMatrixRef& quantized) const;
  // ‖X(W−Q)ᵀ‖_F / ‖XWᵀ‖_F (0 when XWᵀ is zero and so is the error).
  double RelativeError(const ConstRowMatrixRef& weights,
                       const ConstRowMatrixRef& quantized) const;

  // The [count, count] diagonal block of H = XᵀX starting at `begin`.
  RowMatrixF GramBlock(int64_t begin, int64_t count) const;
  // H itself when this evaluator holds it (null when it holds X).
  const RowMatrixF* hessian() const {
    return use_hessian_ ? &matrix_ : nullptr;
  }

  int64_t token_count() const { return tokens_; }
  int64_t k() const { return k_; }
  bool uses_hessian() const { return use_hessian_; }

 private:
  OutputErrorEvaluator() = default;
  // Σ over rows r of m_r·H·m_rᵀ (or ‖X mᵀ‖²) where m = rows(first, count),
  // taken kErrorRowTile rows at a time: no [N, K] temporary, products in
  // float by the GEMM, each row's sum in double.
  template <typename Rows>
  double SumOfSquares(int64_t rows, const Rows& rows_of,
                      ThreadPool* pool) const;
  bool use_hessian_ = true;
  int64_t tokens_ = 0;
  int64_t k_ = 0;
  RowMatrixF matrix_;  // H [K, K] or X [T, K].
};

}  // namespace quant

#endif  // QUANT_CORE_QUANT_OUTPUT_ERROR_H_

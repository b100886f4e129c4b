// Cholesky factorization of a symmetric positive definite matrix, blocked so
// that its trailing updates (nearly all of its flops) spread over a pool.
//
// GPTQ factors every layer group's damped Hessian; Eigen's LLT ran it on
// one thread while the others waited (docs/PERFORMANCE.md). This is the
// same right-looking algorithm as Eigen's blocked LLT (a panel factored in
// place, the panel's column below it solved, the trailing lower triangle
// updated), with the solve split into fixed tiles of rows and the update
// into fixed square tiles, so the factor is the same on any thread count.
#ifndef QUANT_CORE_QUANT_CHOLESKY_H_
#define QUANT_CORE_QUANT_CHOLESKY_H_

#include <Eigen/Core>
#include <cstdint>

#include "core/base/thread_pool.h"

namespace quant {

// Panel width (as Eigen's LLT picks for matrices of 1024 columns and more)
// and the square tile of the trailing update.
inline constexpr int64_t kCholeskyPanel = 128;
inline constexpr int64_t kCholeskyTile = 256;

// The lower triangle of *a (square; only its lower triangle is read)
// becomes L with L·Lᵀ = A. Returns false when A is not numerically
// positive definite (a panel's factorization fails); *a is then left
// partly overwritten. The strict upper triangle is not touched.
bool CholeskyLowerInPlace(Eigen::MatrixXf* a, ThreadPool* pool = nullptr);
bool CholeskyLowerInPlace(Eigen::MatrixXd* a, ThreadPool* pool = nullptr);

}  // namespace quant

#endif  // QUANT_CORE_QUANT_CHOLESKY_H_

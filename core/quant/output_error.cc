// Output error from activations or from their Gram matrix.
#include "core/quant/output_error.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"

namespace quant {

absl::StatusOr<OutputErrorEvaluator> OutputErrorEvaluator::FromHessian(
    const ConstRowMatrixRef& hessian, int64_t token_count) {
  if (hessian.rows() != hessian.cols() || !hessian.allFinite()) {
    return absl::InvalidArgumentError(
        absl::StrCat("output error: Hessian must be square and finite, got ",
                     hessian.rows(), " x ", hessian.cols()));
  }
  OutputErrorEvaluator e;
  e.use_hessian_ = true;
  e.tokens_ = token_count;
  e.k_ = hessian.rows();
  e.matrix_ = hessian;
  return e;
}

absl::StatusOr<OutputErrorEvaluator> OutputErrorEvaluator::FromActivations(
    const ConstRowMatrixRef& activations) {
  if (!activations.allFinite()) {
    return absl::InvalidArgumentError(
        "output error: activations are not finite");
  }
  OutputErrorEvaluator e;
  e.tokens_ = activations.rows();
  e.k_ = activations.cols();
  e.use_hessian_ = activations.rows() > activations.cols();
  if (e.use_hessian_) {
    Eigen::MatrixXf lower = Eigen::MatrixXf::Zero(e.k_, e.k_);
    lower.selfadjointView<Eigen::Lower>().rankUpdate(activations.transpose());
    e.matrix_ = lower.selfadjointView<Eigen::Lower>();
  } else {
    e.matrix_ = activations;
  }
  return e;
}

namespace {

// Rows of M handled per GEMM: enough for the product to run at GEMM speed,
// few enough that the tile and its product stay small next to M.
constexpr int64_t kErrorRowTile = 256;

}  // namespace

template <typename Rows>
double OutputErrorEvaluator::SumOfSquares(int64_t rows, const Rows& rows_of,
                                          ThreadPool* pool) const {
  const int64_t tiles = (rows + kErrorRowTile - 1) / kErrorRowTile;
  std::vector<double> partial(static_cast<size_t>(tiles), 0.0);
  ParallelFor(pool, tiles, [&](int64_t t) {
    const int64_t first = t * kErrorRowTile;
    const int64_t count = std::min(kErrorRowTile, rows - first);
    RowMatrixF tile;
    rows_of(first, count, &tile);
    double sum = 0.0;
    if (use_hessian_) {
      // tr(M H Mᵀ) = Σ_r (M H)_r · M_r.
      const RowMatrixF product = tile * matrix_;
      for (int64_t r = 0; r < count; ++r) {
        sum += (product.row(r).cast<double>().array() *
                tile.row(r).cast<double>().array())
                   .sum();
      }
    } else {
      const RowMatrixF product = matrix_ * tile.transpose();
      sum = product.cast<double>().squaredNorm();
    }
    partial[static_cast<size_t>(t)] = sum;
  });
  double sum = 0.0;
  for (double p : partial) sum += p;  // In tile order: any thread count.
  return sum;
}

double OutputErrorEvaluator::SquaredNorm(const ConstRowMatrixRef& m,
                                         ThreadPool* pool) const {
  return SumOfSquares(
      m.rows(),
      [&](int64_t first, int64_t count, RowMatrixF* tile) {
        *tile = m.middleRows(first, count);
      },
      pool);
}

double OutputErrorEvaluator::SquaredError(const ConstRowMatrixRef& weights,
                                          const ConstRowMatrixRef& quantized,
                                          ThreadPool* pool) const {
  return SumOfSquares(
      weights.rows(),
      [&](int64_t first, int64_t count, RowMatrixF* tile) {
        *tile = weights.middleRows(first, count) -
                quantized.middleRows(first, count);
      },
      pool);
}

double OutputErrorEvaluator::OutputMse(
    const ConstRowMatrixRef& weights,
    const ConstRowMatrixRef& quantized) const {
  const double count =
      static_cast<double>(tokens_) * static_cast<double>(weights.rows());
  return count > 0 ? SquaredError(weights, quantized) / count : 0.0;
}

double OutputErrorEvaluator::RelativeError(
    const ConstRowMatrixRef& weights,
    const ConstRowMatrixRef& quantized) const {
  const double ref = SquaredNorm(weights);
  const double err = SquaredError(weights, quantized);
  if (ref == 0.0)
    return err == 0.0 ? 0.0 : std::numeric_limits<double>::infinity();
  return std::sqrt(err / ref);
}

RowMatrixF OutputErrorEvaluator::GramBlock(int64_t begin, int64_t count) const {
  if (use_hessian_) return matrix_.block(begin, begin, count, count);
  const auto x = matrix_.middleCols(begin, count);
  return x.transpose() * x;
}

}  // namespace quant

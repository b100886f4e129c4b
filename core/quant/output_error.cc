// Output error from activations or from their Gram matrix.
#include "core/quant/output_error.h"

#include <cmath>
#include <limits>

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

double OutputErrorEvaluator::SquaredNorm(const ConstRowMatrixRef& m) const {
  if (use_hessian_) {
    // tr(M H Mᵀ) = sum((M H) ∘ M), products in float, the sum in double.
    const RowMatrixF mh = m * matrix_;
    return (mh.cast<double>().array() * m.cast<double>().array()).sum();
  }
  const RowMatrixF y = matrix_ * m.transpose();
  return y.cast<double>().squaredNorm();
}

double OutputErrorEvaluator::SquaredError(
    const ConstRowMatrixRef& weights,
    const ConstRowMatrixRef& quantized) const {
  const RowMatrixF e = weights - quantized;
  return SquaredNorm(e);
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

// Input checks shared by every quantizer.
#include "core/quant/layer_checks.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace quant {

bool AllFinite(const ConstRowMatrixRef& m) {
  // x·0 is 0 for every finite x and NaN for NaN and ±Inf, and a plain sum
  // vectorizes (Eigen's allFinite() does not).
  for (int64_t r = 0; r < m.rows(); ++r) {
    if (!((m.row(r).array() * 0.0f).sum() == 0.0f)) return false;
  }
  return true;
}

absl::Status CheckFiniteWeights(const ConstRowMatrixRef& weights,
                                absl::string_view layer_name) {
  if (weights.rows() == 0 || weights.cols() == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("layer '", layer_name, "': weight matrix is empty (",
                     weights.rows(), " x ", weights.cols(), ")"));
  }
  if (AllFinite(weights)) return absl::OkStatus();
  for (int64_t r = 0; r < weights.rows(); ++r) {
    for (int64_t c = 0; c < weights.cols(); ++c) {
      if (!std::isfinite(weights(r, c))) {
        return absl::InvalidArgumentError(
            absl::StrCat("layer '", layer_name, "': weight [", r, ", ", c,
                         "] is ", weights(r, c), "; weights must be finite"));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status CheckHessian(const ConstRowMatrixRef& hessian, int64_t k,
                          absl::string_view layer_name) {
  if (hessian.rows() != k || hessian.cols() != k) {
    return absl::InvalidArgumentError(absl::StrCat(
        "layer '", layer_name, "': Hessian is ", hessian.rows(), " x ",
        hessian.cols(), " but the weight has K = ", k, " input columns"));
  }
  if (!AllFinite(hessian)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "layer '", layer_name, "': Hessian has non-finite entries"));
  }
  return absl::OkStatus();
}

}  // namespace quant

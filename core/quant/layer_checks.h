// Input checks shared by every quantizer: finite weights and Hessians, shapes.
#ifndef QUANT_CORE_QUANT_LAYER_CHECKS_H_
#define QUANT_CORE_QUANT_LAYER_CHECKS_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "core/quant/matrix_types.h"

namespace quant {

// True when no entry is NaN or ±Inf (a vectorized scan).
bool AllFinite(const ConstRowMatrixRef& m);

// InvalidArgument naming the layer and the first non-finite entry.
absl::Status CheckFiniteWeights(const ConstRowMatrixRef& weights,
                                absl::string_view layer_name);

// H must be K x K and finite.
absl::Status CheckHessian(const ConstRowMatrixRef& hessian, int64_t k,
                          absl::string_view layer_name);

}  // namespace quant

#endif  // QUANT_CORE_QUANT_LAYER_CHECKS_H_

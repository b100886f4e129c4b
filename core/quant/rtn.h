// Round-to-nearest: every group's scale and zero from the weights themselves,
// then each weight rounded independently. The baseline every audit compares to.
#ifndef QUANT_CORE_QUANT_RTN_H_
#define QUANT_CORE_QUANT_RTN_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/quant/grid.h"
#include "core/quant/matrix_types.h"
#include "core/quant/quantized_layer.h"

namespace quant {

// Errors: bad grid, empty or non-finite weights (the message names
// `layer_name`).
absl::StatusOr<QuantizedLayer> QuantizeRtn(const ConstRowMatrixRef& weights,
                                           const GridSpec& grid,
                                           absl::string_view layer_name);

// The same without checks, clip_ratio shrinking every group's range (AWQ's
// clipping search); weights must be finite and the grid valid.
QuantizedLayer QuantizeRtnUnchecked(const ConstRowMatrixRef& weights,
                                    const GridSpec& grid,
                                    float clip_ratio = 1.0f);

}  // namespace quant

#endif  // QUANT_CORE_QUANT_RTN_H_

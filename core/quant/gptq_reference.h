// Column-by-column GPTQ, the seeds' algorithm written straightforwardly: every
// rounding error is pushed into all later columns at once (a rank-1 update per
// column). Slow; it exists so the blocked QuantizeGptq can be tested against
// it. Same options, same preparation, same result layout.
#ifndef QUANT_CORE_QUANT_GPTQ_REFERENCE_H_
#define QUANT_CORE_QUANT_GPTQ_REFERENCE_H_

#include "absl/status/statusor.h"
#include "core/quant/gptq_options.h"
#include "core/quant/matrix_types.h"

namespace quant {

absl::StatusOr<GptqResult> QuantizeGptqReference(
    const ConstRowMatrixRef& weights, const ConstRowMatrixRef& hessian,
    const GptqOptions& options);

}  // namespace quant

#endif  // QUANT_CORE_QUANT_GPTQ_REFERENCE_H_

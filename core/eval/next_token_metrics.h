// End-to-end gate metrics from next-token logits: perplexity of a reference
// and a quantized model on the same tokens, mean per-token
// KL(reference ‖ quantized) and top-1 agreement. Accumulated batch by batch
// in double so long evaluations neither hold all logits nor lose precision.
#ifndef QUANT_CORE_EVAL_NEXT_TOKEN_METRICS_H_
#define QUANT_CORE_EVAL_NEXT_TOKEN_METRICS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "core/quant/matrix_types.h"

namespace quant {

struct NextTokenMetrics {
  int64_t tokens = 0;        // Positions scored.
  double reference_nll = 0;  // Mean negative log-likelihood, nats.
  double quantized_nll = 0;
  double reference_ppl = 0;  // exp(mean NLL).
  double quantized_ppl = 0;
  double ppl_ratio = 0;       // quantized_ppl / reference_ppl.
  double mean_kl = 0;         // Mean KL(reference ‖ quantized), nats.
  double top1_agreement = 0;  // Fraction of positions with equal argmax.
};

class NextTokenMetricsAccumulator {
 public:
  // Scores rows of logits [rows, vocab] against `targets` (the next token of
  // each row; negative = do not score this row). Without a quantized model,
  // pass the reference logits twice.
  absl::Status Add(const ConstRowMatrixRef& reference_logits,
                   const ConstRowMatrixRef& quantized_logits,
                   absl::Span<const int32_t> targets);

  NextTokenMetrics Result() const;

 private:
  int64_t tokens_ = 0;
  int64_t agreements_ = 0;
  double reference_nll_sum_ = 0;
  double quantized_nll_sum_ = 0;
  double kl_sum_ = 0;
};

}  // namespace quant

#endif  // QUANT_CORE_EVAL_NEXT_TOKEN_METRICS_H_

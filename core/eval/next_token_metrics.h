// End-to-end gate metrics from next-token logits: perplexity of a reference
// and a quantized model on the same tokens, mean per-token
// KL(reference ‖ quantized) and top-1 agreement. Accumulated batch by batch
// in double so long evaluations neither hold all logits nor lose precision.
#ifndef QUANT_CORE_EVAL_NEXT_TOKEN_METRICS_H_
#define QUANT_CORE_EVAL_NEXT_TOKEN_METRICS_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
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

// One row's terms, which NextTokenMetricsAccumulator sums.
struct NextTokenScore {
  bool scored = false;  // False for a row with a negative target.
  bool agrees = false;  // Equal argmax.
  double reference_nll = 0;
  double quantized_nll = 0;
  double kl = 0;
};

// Scores rows of logits [rows, vocab] against `targets` (the next token of
// each row; negative = do not score this row): the log-softmaxes, KL and
// argmaxes, most of the metrics' work at a real vocabulary, so callers
// spread row ranges over threads and add the scores in row order.
// InvalidArgument for mismatched shapes or a target outside the vocabulary.
absl::StatusOr<std::vector<NextTokenScore>> ScoreNextTokens(
    const ConstRowMatrixRef& reference_logits,
    const ConstRowMatrixRef& quantized_logits,
    absl::Span<const int32_t> targets);

class NextTokenMetricsAccumulator {
 public:
  // ScoreNextTokens, then AddScores. Without a quantized model, pass the
  // reference logits twice.
  absl::Status Add(const ConstRowMatrixRef& reference_logits,
                   const ConstRowMatrixRef& quantized_logits,
                   absl::Span<const int32_t> targets);
  // Adds rows' scores in order (the sums are in double, in the order rows
  // are added: the same rows in the same order give the same result).
  void AddScores(absl::Span<const NextTokenScore> scores);

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

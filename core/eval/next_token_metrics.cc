// Perplexity, KL and top-1 agreement from next-token logits.
#include "core/eval/next_token_metrics.h"

#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"

namespace quant {
namespace {

// log-softmax of one row, in double.
void LogSoftmax(const Eigen::Ref<const Eigen::RowVectorXf>& logits,
                std::vector<double>* out) {
  const double max = logits.maxCoeff();
  double sum = 0;
  for (Eigen::Index i = 0; i < logits.size(); ++i) {
    sum += std::exp(static_cast<double>(logits[i]) - max);
  }
  const double log_z = max + std::log(sum);
  out->resize(logits.size());
  for (Eigen::Index i = 0; i < logits.size(); ++i) {
    (*out)[i] = static_cast<double>(logits[i]) - log_z;
  }
}

}  // namespace

absl::StatusOr<std::vector<NextTokenScore>> ScoreNextTokens(
    const ConstRowMatrixRef& reference_logits,
    const ConstRowMatrixRef& quantized_logits,
    absl::Span<const int32_t> targets) {
  if (reference_logits.rows() != quantized_logits.rows() ||
      reference_logits.cols() != quantized_logits.cols() ||
      static_cast<size_t>(reference_logits.rows()) != targets.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("logit shapes [", reference_logits.rows(), ", ",
                     reference_logits.cols(), "] and [",
                     quantized_logits.rows(), ", ", quantized_logits.cols(),
                     "] with ", targets.size(), " targets do not match"));
  }
  const int64_t vocab = reference_logits.cols();
  std::vector<NextTokenScore> scores(targets.size());
  std::vector<double> ref_logp, quant_logp;
  for (Eigen::Index r = 0; r < reference_logits.rows(); ++r) {
    const int32_t target = targets[r];
    if (target < 0) continue;
    if (target >= vocab) {
      return absl::InvalidArgumentError(
          absl::StrCat("target id ", target, " at row ", r,
                       " is outside the vocabulary [0, ", vocab, ")"));
    }
    LogSoftmax(reference_logits.row(r), &ref_logp);
    LogSoftmax(quantized_logits.row(r), &quant_logp);
    double kl = 0;
    for (int64_t v = 0; v < vocab; ++v) {
      kl += std::exp(ref_logp[v]) * (ref_logp[v] - quant_logp[v]);
    }
    Eigen::Index ref_top, quant_top;
    reference_logits.row(r).maxCoeff(&ref_top);
    quantized_logits.row(r).maxCoeff(&quant_top);
    NextTokenScore& score = scores[r];
    score.scored = true;
    score.agrees = ref_top == quant_top;
    score.reference_nll = -ref_logp[target];
    score.quantized_nll = -quant_logp[target];
    score.kl = kl;
  }
  return scores;
}

absl::Status NextTokenMetricsAccumulator::Add(
    const ConstRowMatrixRef& reference_logits,
    const ConstRowMatrixRef& quantized_logits,
    absl::Span<const int32_t> targets) {
  absl::StatusOr<std::vector<NextTokenScore>> scores =
      ScoreNextTokens(reference_logits, quantized_logits, targets);
  if (!scores.ok()) return scores.status();
  AddScores(*scores);
  return absl::OkStatus();
}

void NextTokenMetricsAccumulator::AddScores(
    absl::Span<const NextTokenScore> scores) {
  for (const NextTokenScore& score : scores) {
    if (!score.scored) continue;
    ++tokens_;
    agreements_ += score.agrees ? 1 : 0;
    reference_nll_sum_ += score.reference_nll;
    quantized_nll_sum_ += score.quantized_nll;
    kl_sum_ += score.kl;
  }
}

NextTokenMetrics NextTokenMetricsAccumulator::Result() const {
  NextTokenMetrics m;
  m.tokens = tokens_;
  if (tokens_ == 0) return m;
  const double n = static_cast<double>(tokens_);
  m.reference_nll = reference_nll_sum_ / n;
  m.quantized_nll = quantized_nll_sum_ / n;
  m.reference_ppl = std::exp(m.reference_nll);
  m.quantized_ppl = std::exp(m.quantized_nll);
  m.ppl_ratio = m.quantized_ppl / m.reference_ppl;
  m.mean_kl = kl_sum_ / n;
  m.top1_agreement = static_cast<double>(agreements_) / n;
  return m;
}

}  // namespace quant

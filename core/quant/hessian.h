// Incremental Hessian H = sum over tokens of x xᵀ for one linear layer's
// inputs, so T x K activations never have to be held at once.
//
// Normalisation: H is stored UNNORMALISED (sum of XᵀX over every batch, no
// 1/T and no factor 2). Every ratio the quantizers and audits use is
// scale-free; token_count() gives T for MSE-style per-token numbers.
#ifndef QUANT_CORE_QUANT_HESSIAN_H_
#define QUANT_CORE_QUANT_HESSIAN_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/base/thread_pool.h"
#include "core/quant/matrix_types.h"

namespace quant {

// The lower triangle is updated in square tiles of this many rows and
// columns, one tile per pool iteration. The tiling is the same whatever the
// thread count, so the sums (and every result computed from them) are
// identical on 1 thread and on 64.
inline constexpr int64_t kHessianTile = 256;

class HessianAccumulator {
 public:
  explicit HessianAccumulator(int64_t k);

  // Adds a batch [t, K] as a symmetric rank-t update of one triangle, its
  // tiles spread over `pool` (inline when null). InvalidArgument if the
  // width is not K or the batch is not finite.
  absl::Status Add(const ConstRowMatrixRef& batch, ThreadPool* pool = nullptr);
  // Adds another accumulator's sums (same K).
  absl::Status Merge(const HessianAccumulator& other);

  // The full symmetric K x K sum XᵀX (the lower triangle mirrored).
  RowMatrixF Finish() const;

  // The lower triangle row by row (H00, H10, H11, H20, ...), K(K+1)/2
  // values: what a shard's statistics file stores, half of H's bytes.
  std::vector<float> LowerTriangle() const;
  // An accumulator holding `lower` (LowerTriangle's layout) summed over
  // `tokens` tokens. InvalidArgument when the size is not K(K+1)/2, the
  // count is negative or a value is not finite.
  static absl::StatusOr<HessianAccumulator> FromLowerTriangle(
      int64_t k, int64_t tokens, absl::Span<const float> lower);

  int64_t k() const { return k_; }
  int64_t token_count() const { return tokens_; }

 private:
  friend class SplitHessianAccumulator;
  // Add without its checks, for a batch already checked.
  void AddChecked(const ConstRowMatrixRef& batch, ThreadPool* pool);

  int64_t k_;
  int64_t tokens_ = 0;
  // Column-major so that XᵀX of a row-major batch is a rank update of the
  // batch's own memory viewed as K x t: no transpose copy.
  Eigen::MatrixXf lower_;
};

// Fraction of a layer's calibration tokens that validate damping `auto`
// (the rest train), in the pipeline and in `quantctl lab` alike.
inline constexpr double kAutoDampValidationFraction = 0.25;

// Calibration tokens split for damping `auto` (see QuantizeGptqAutoDamp):
// token i (counted across batches) goes to the validation split when
// floor((i+1)·f) > floor(i·f), an even spread of fraction f independent of the
// batch sizes; the rest go to the training split.
class SplitHessianAccumulator {
 public:
  // `first_token`: the index of the first token this accumulator will see,
  // for one shard of the calibration tokens accumulated apart (the tokens
  // of the shards before it), so the split is the same as in one pass.
  SplitHessianAccumulator(int64_t k, double validation_fraction,
                          int64_t first_token = 0);

  absl::Status Add(const ConstRowMatrixRef& batch, ThreadPool* pool = nullptr);
  // Adds the sums of the shard that follows this one: InvalidArgument
  // unless `next` starts at the token where this one ends (same K and
  // fraction), so shards cannot be merged out of order.
  absl::Status Merge(const SplitHessianAccumulator& next);
  // The index one past the last token seen.
  int64_t next_token() const { return seen_; }
  int64_t first_token() const { return first_; }
  // A shard's split read back: tokens [first_token, next_token) split into
  // `train` and `validation`. InvalidArgument when their token counts do
  // not add up to the range or their K differ.
  static absl::StatusOr<SplitHessianAccumulator> FromParts(
      double validation_fraction, int64_t first_token, int64_t next_token,
      HessianAccumulator train, HessianAccumulator validation);

  const HessianAccumulator& train() const { return train_; }
  const HessianAccumulator& validation() const { return validation_; }
  double validation_fraction() const { return fraction_; }

 private:
  double fraction_;
  int64_t first_ = 0;
  int64_t seen_ = 0;
  HessianAccumulator train_;
  HessianAccumulator validation_;
};

// Per-input-channel mean |x| (AWQ's activation statistic), accumulated in
// batches like the Hessian.
class ActivationStatsAccumulator {
 public:
  explicit ActivationStatsAccumulator(int64_t k);
  absl::Status Add(const ConstRowMatrixRef& batch);
  // Adds another accumulator's sums (same K).
  absl::Status Merge(const ActivationStatsAccumulator& other);
  // Mean |x| per channel; zeros if no tokens were added.
  Eigen::VectorXf MeanAbs() const;
  int64_t token_count() const { return tokens_; }
  // Σ|x| per channel, and an accumulator holding such sums (InvalidArgument
  // when the size is not K, the count is negative or a sum is not finite
  // and non-negative).
  const Eigen::VectorXd& sum_abs() const { return sum_abs_; }
  static absl::StatusOr<ActivationStatsAccumulator> FromSums(
      int64_t tokens, const Eigen::VectorXd& sum_abs);

 private:
  int64_t k_;
  int64_t tokens_ = 0;
  Eigen::VectorXd sum_abs_;
};

}  // namespace quant

#endif  // QUANT_CORE_QUANT_HESSIAN_H_

// Hessian and activation statistics accumulated batch by batch.
#include "core/quant/hessian.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace quant {
namespace {

// Whether every value of `batch` is finite, its rows checked in ranges
// spread over `pool`: a single-threaded pass over each batch kept the other
// threads waiting (docs/PERFORMANCE.md, "Where the second thread waits").
bool AllFinite(const ConstRowMatrixRef& batch, ThreadPool* pool) {
  const int64_t threads = pool == nullptr ? 1 : pool->threads();
  const int64_t parts =
      std::max<int64_t>(1, std::min<int64_t>(batch.rows(), 4 * threads));
  if (parts == 1) return batch.allFinite();
  std::vector<char> finite(static_cast<size_t>(parts), 0);
  ParallelFor(pool, parts, [&](int64_t part) {
    const int64_t begin = batch.rows() * part / parts;
    const int64_t end = batch.rows() * (part + 1) / parts;
    finite[part] = batch.middleRows(begin, end - begin).allFinite() ? 1 : 0;
  });
  return std::all_of(finite.begin(), finite.end(),
                     [](char ok) { return ok != 0; });
}

absl::Status CheckBatch(const ConstRowMatrixRef& batch, int64_t k,
                        const char* what, ThreadPool* pool = nullptr) {
  if (batch.cols() != k) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": batch has ", batch.cols(), " columns, expected K = ", k));
  }
  if (!AllFinite(batch, pool)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": batch has non-finite activations"));
  }
  return absl::OkStatus();
}

}  // namespace

HessianAccumulator::HessianAccumulator(int64_t k)
    : k_(k), lower_(Eigen::MatrixXf::Zero(k, k)) {}

absl::Status HessianAccumulator::Add(const ConstRowMatrixRef& batch,
                                     ThreadPool* pool) {
  if (absl::Status s = CheckBatch(batch, k_, "HessianAccumulator::Add", pool);
      !s.ok()) {
    return s;
  }
  AddChecked(batch, pool);
  return absl::OkStatus();
}

void HessianAccumulator::AddChecked(const ConstRowMatrixRef& batch,
                                    ThreadPool* pool) {
  if (batch.rows() == 0) return;
  // A row-major [t, K] block is a column-major [K, t] matrix with outer
  // stride = the row stride: Xᵀ without a copy.
  Eigen::Map<const Eigen::MatrixXf, 0, Eigen::OuterStride<>> xt(
      batch.data(), k_, batch.rows(),
      Eigen::OuterStride<>(batch.outerStride()));
  // Tile (r, c), r >= c, is rows [r·B, ...) x columns [c·B, ...) of the
  // lower triangle: XᵣXcᵀ, or a rank update of its own triangle when r = c.
  const int64_t blocks = (k_ + kHessianTile - 1) / kHessianTile;
  std::vector<std::pair<int64_t, int64_t>> tiles;
  tiles.reserve(blocks * (blocks + 1) / 2);
  for (int64_t r = 0; r < blocks; ++r) {
    for (int64_t c = 0; c <= r; ++c) tiles.emplace_back(r, c);
  }
  ParallelFor(pool, static_cast<int64_t>(tiles.size()), [&](int64_t i) {
    const int64_t row = tiles[i].first * kHessianTile;
    const int64_t col = tiles[i].second * kHessianTile;
    const int64_t rows = std::min(kHessianTile, k_ - row);
    const int64_t cols = std::min(kHessianTile, k_ - col);
    if (row == col) {
      lower_.block(row, row, rows, rows)
          .selfadjointView<Eigen::Lower>()
          .rankUpdate(xt.middleRows(row, rows), 1.0f);
    } else {
      lower_.block(row, col, rows, cols).noalias() +=
          xt.middleRows(row, rows) * xt.middleRows(col, cols).transpose();
    }
  });
  tokens_ += batch.rows();
}

absl::Status HessianAccumulator::Merge(const HessianAccumulator& other) {
  if (other.k_ != k_) {
    return absl::InvalidArgumentError(
        absl::StrCat("HessianAccumulator::Merge: K = ", other.k_, " vs ", k_));
  }
  lower_.triangularView<Eigen::Lower>() += other.lower_;
  tokens_ += other.tokens_;
  return absl::OkStatus();
}

RowMatrixF HessianAccumulator::Finish() const {
  RowMatrixF h(k_, k_);
  h = lower_.selfadjointView<Eigen::Lower>();
  return h;
}

std::vector<float> HessianAccumulator::LowerTriangle() const {
  std::vector<float> lower;
  lower.reserve(static_cast<size_t>(k_ * (k_ + 1) / 2));
  for (int64_t r = 0; r < k_; ++r) {
    for (int64_t c = 0; c <= r; ++c) lower.push_back(lower_(r, c));
  }
  return lower;
}

absl::StatusOr<HessianAccumulator> HessianAccumulator::FromLowerTriangle(
    int64_t k, int64_t tokens, absl::Span<const float> lower) {
  if (k <= 0 || tokens < 0 ||
      static_cast<int64_t>(lower.size()) != k * (k + 1) / 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Hessian lower triangle: ", lower.size(), " values over ", tokens,
        " tokens for K = ", k, " (K(K+1)/2 = ", k * (k + 1) / 2, " expected)"));
  }
  HessianAccumulator h(k);
  size_t at = 0;
  for (int64_t r = 0; r < k; ++r) {
    for (int64_t c = 0; c <= r; ++c, ++at) {
      if (!std::isfinite(lower[at])) {
        return absl::InvalidArgumentError(absl::StrCat(
            "Hessian lower triangle: H[", r, "][", c, "] is not finite"));
      }
      h.lower_(r, c) = lower[at];
    }
  }
  h.tokens_ = tokens;
  return h;
}

SplitHessianAccumulator::SplitHessianAccumulator(int64_t k,
                                                 double validation_fraction,
                                                 int64_t first_token)
    : fraction_(std::clamp(validation_fraction, 0.0, 1.0)),
      first_(first_token),
      seen_(first_token),
      train_(k),
      validation_(k) {}

absl::Status SplitHessianAccumulator::Merge(
    const SplitHessianAccumulator& next) {
  if (next.fraction_ != fraction_ || next.first_ != seen_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "SplitHessianAccumulator::Merge: the shard starts at token ",
        next.first_, " (validation fraction ", next.fraction_,
        ") but this one ends at ", seen_, " (", fraction_, ")"));
  }
  if (absl::Status s = train_.Merge(next.train_); !s.ok()) return s;
  if (absl::Status s = validation_.Merge(next.validation_); !s.ok()) return s;
  seen_ = next.seen_;
  return absl::OkStatus();
}

absl::Status SplitHessianAccumulator::Add(const ConstRowMatrixRef& batch,
                                          ThreadPool* pool) {
  if (absl::Status s =
          CheckBatch(batch, train_.k(), "SplitHessianAccumulator::Add", pool);
      !s.ok()) {
    return s;
  }
  std::vector<int64_t> train_rows, validation_rows;
  for (int64_t r = 0; r < batch.rows(); ++r, ++seen_) {
    const bool to_validation =
        std::floor(static_cast<double>(seen_ + 1) * fraction_) >
        std::floor(static_cast<double>(seen_) * fraction_);
    (to_validation ? validation_rows : train_rows).push_back(r);
  }
  // The batch was checked whole above.
  auto add_rows = [&batch, pool](const std::vector<int64_t>& rows,
                                 HessianAccumulator* acc) {
    if (rows.empty()) return;
    RowMatrixF part(static_cast<int64_t>(rows.size()), batch.cols());
    for (size_t i = 0; i < rows.size(); ++i) part.row(i) = batch.row(rows[i]);
    acc->AddChecked(part, pool);
  };
  add_rows(train_rows, &train_);
  add_rows(validation_rows, &validation_);
  return absl::OkStatus();
}

absl::StatusOr<SplitHessianAccumulator> SplitHessianAccumulator::FromParts(
    double validation_fraction, int64_t first_token, int64_t next_token,
    HessianAccumulator train, HessianAccumulator validation) {
  if (train.k() != validation.k() || first_token < 0 ||
      next_token - first_token !=
          train.token_count() + validation.token_count() ||
      !(validation_fraction >= 0.0 && validation_fraction <= 1.0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "damp: auto split: tokens [", first_token, ", ", next_token, ") as ",
        train.token_count(), " train + ", validation.token_count(),
        " validation at K = ", train.k(), " and ", validation.k(),
        ", validation fraction ", validation_fraction));
  }
  SplitHessianAccumulator split(train.k(), validation_fraction, first_token);
  split.seen_ = next_token;
  split.train_ = std::move(train);
  split.validation_ = std::move(validation);
  return split;
}

ActivationStatsAccumulator::ActivationStatsAccumulator(int64_t k)
    : k_(k), sum_abs_(Eigen::VectorXd::Zero(k)) {}

absl::Status ActivationStatsAccumulator::Add(const ConstRowMatrixRef& batch) {
  if (absl::Status s = CheckBatch(batch, k_, "ActivationStatsAccumulator::Add");
      !s.ok()) {
    return s;
  }
  sum_abs_ += batch.cwiseAbs().colwise().sum().transpose().cast<double>();
  tokens_ += batch.rows();
  return absl::OkStatus();
}

absl::Status ActivationStatsAccumulator::Merge(
    const ActivationStatsAccumulator& other) {
  if (other.k_ != k_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ActivationStatsAccumulator::Merge: K = ", other.k_, " vs ", k_));
  }
  sum_abs_ += other.sum_abs_;
  tokens_ += other.tokens_;
  return absl::OkStatus();
}

absl::StatusOr<ActivationStatsAccumulator> ActivationStatsAccumulator::FromSums(
    int64_t tokens, const Eigen::VectorXd& sum_abs) {
  if (tokens < 0 || sum_abs.size() == 0 || !sum_abs.allFinite() ||
      (sum_abs.array() < 0.0).any()) {
    return absl::InvalidArgumentError(
        absl::StrCat("activation sums: ", sum_abs.size(), " channels over ",
                     tokens, " tokens must be finite and non-negative"));
  }
  ActivationStatsAccumulator stats(sum_abs.size());
  stats.sum_abs_ = sum_abs;
  stats.tokens_ = tokens;
  return stats;
}

Eigen::VectorXf ActivationStatsAccumulator::MeanAbs() const {
  if (tokens_ == 0) return Eigen::VectorXf::Zero(k_);
  return (sum_abs_ / static_cast<double>(tokens_)).cast<float>();
}

}  // namespace quant

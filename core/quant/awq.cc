// AWQ scale search and optional clipping search.
#include "core/quant/awq.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/quant/layer_checks.h"
#include "core/quant/rtn.h"

namespace quant {
namespace {

// Q_s diag(1/s).
RowMatrixF Unscale(const RowMatrixF& q, const Eigen::VectorXf& s) {
  return q.array().rowwise() / s.transpose().array();
}

}  // namespace

std::vector<float> AwqOptions::DefaultAlphaGrid() {
  std::vector<float> grid;
  for (int i = 0; i < 20; ++i) grid.push_back(0.05f * static_cast<float>(i));
  return grid;
}

Eigen::VectorXf AwqScales(const Eigen::VectorXf& act_stat, float alpha) {
  const int64_t k = act_stat.size();
  if (alpha == 0.0f) return Eigen::VectorXf::Ones(k);
  Eigen::VectorXf s(k);
  for (int64_t i = 0; i < k; ++i) s(i) = std::pow(act_stat(i), alpha);
  float min_positive = std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < k; ++i) {
    if (s(i) > 0.0f) min_positive = std::min(min_positive, s(i));
  }
  if (!std::isfinite(min_positive)) return Eigen::VectorXf::Ones(k);
  for (int64_t i = 0; i < k; ++i) {
    if (!(s(i) > 0.0f)) s(i) = min_positive;
  }
  return s / s.mean();
}

absl::StatusOr<AwqResult> QuantizeAwq(const ConstRowMatrixRef& weights,
                                      const Eigen::VectorXf& act_stat,
                                      const OutputErrorEvaluator& calibration,
                                      const AwqOptions& options) {
  const std::string& name = options.layer_name;
  QUANT_RETURN_IF_ERROR(ValidateGridSpec(options.grid));
  QUANT_RETURN_IF_ERROR(CheckFiniteWeights(weights, name));
  const int64_t n = weights.rows();
  const int64_t k = weights.cols();
  if (act_stat.size() != k || !act_stat.allFinite() ||
      (act_stat.array() < 0.0f).any()) {
    return absl::InvalidArgumentError(
        absl::StrCat("layer '", name, "': activation statistic must be ", k,
                     " finite non-negative values, got ", act_stat.size()));
  }
  if (calibration.k() != k) {
    return absl::InvalidArgumentError(
        absl::StrCat("layer '", name, "': calibration activations have K = ",
                     calibration.k(), ", weight has ", k));
  }
  if (options.alpha_grid.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("layer '", name, "': alpha_grid is empty"));
  }
  // The α search runs on all rows, or on an evenly spaced subset of
  // search_rows output rows (rows are independent on a per-row or per-group
  // grid, so the subset's error is a sample of the full sum).
  const bool subset =
      options.search_rows > 0 && options.search_rows < weights.rows();
  RowMatrixF sampled;
  if (subset) {
    sampled.resize(options.search_rows, k);
    for (int64_t i = 0; i < options.search_rows; ++i) {
      sampled.row(i) = weights.row(i * n / options.search_rows);
    }
  }
  const ConstRowMatrixRef search_w =
      subset ? ConstRowMatrixRef(sampled) : weights;
  AwqResult best;
  double best_error = std::numeric_limits<double>::infinity();
  for (float alpha : options.alpha_grid) {
    const Eigen::VectorXf s = AwqScales(act_stat, alpha);
    const RowMatrixF scaled =
        search_w.array().rowwise() * s.transpose().array();
    QuantizedLayer q = QuantizeRtnUnchecked(scaled, options.grid);
    RowMatrixF effective = Unscale(q.dequantized, s);
    const double e = calibration.SquaredError(search_w, effective);
    best.alpha_errors.push_back(e);
    if (e < best_error) {
      best_error = e;
      best.alpha = alpha;
      best.input_scales = s;
      best.layer = std::move(q);
      best.effective = std::move(effective);
    }
  }
  if (subset) {
    const Eigen::VectorXf& s = best.input_scales;
    const RowMatrixF scaled = weights.array().rowwise() * s.transpose().array();
    best.layer = QuantizeRtnUnchecked(scaled, options.grid);
    best.effective = Unscale(best.layer.dequantized, s);
  }

  if (options.clip_search) {
    // Per (row, group): the range shrink ratio whose error e H_gg eᵀ on the
    // group's diagonal block of the calibration Gram matrix is smallest (what
    // AWQ's own clipping search measures, group by group).
    const Eigen::VectorXf& s = best.input_scales;
    const RowMatrixF scaled = weights.array().rowwise() * s.transpose().array();
    const int64_t gs = EffectiveGroupSize(options.grid, k);
    const int64_t groups = NumGroups(options.grid, k);
    GridSpec slice_grid = options.grid;
    slice_grid.group_size = 0;
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t b = g * gs;
      const int64_t c = std::min(gs, k - b);
      const RowMatrixF gram = calibration.GramBlock(b, c);
      const Eigen::VectorXf sg = s.segment(b, c);
      const RowMatrixF wg = weights.middleCols(b, c);
      const RowMatrixF scaled_g = scaled.middleCols(b, c);
      Eigen::VectorXd best_row =
          Eigen::VectorXd::Constant(n, std::numeric_limits<double>::infinity());
      for (float ratio : options.clip_ratios) {
        QuantizedLayer q = QuantizeRtnUnchecked(scaled_g, slice_grid, ratio);
        const RowMatrixF eff = Unscale(q.dequantized, sg);
        const RowMatrixF e = wg - eff;
        const RowMatrixF eh = e * gram;
        for (int64_t r = 0; r < n; ++r) {
          const double err = (eh.row(r).cast<double>().array() *
                              e.row(r).cast<double>().array())
                                 .sum();
          if (err < best_row(r)) {
            best_row(r) = err;
            best.layer.codes.row(r).segment(b, c) = q.codes.row(r);
            best.layer.dequantized.row(r).segment(b, c) = q.dequantized.row(r);
            best.layer.scales(g, r) = q.scales(0, r);
            best.layer.zeros(g, r) = q.zeros(0, r);
            best.effective.row(r).segment(b, c) = eff.row(r);
          }
        }
      }
    }
  }
  best.layer.method = "awq";
  return best;
}

}  // namespace quant

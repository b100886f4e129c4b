// Blocked GPTQ with lazy batched updates.
#include "core/quant/gptq.h"

#include <algorithm>
#include <limits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/quant/gptq_prepare.h"
#include "core/quant/layer_checks.h"
#include "core/quant/output_error.h"

namespace quant {

namespace {

// One matrix's column loop state. Each matrix runs in its own arrays and
// its own tiles of rows, exactly as it would alone.
struct LayerSweep {
  GptqWeights prepared;
  Eigen::Matrix<uint8_t, Eigen::Dynamic, Eigen::Dynamic> codes;
  RowMatrixF scales;
  RowMatrixF zeros;
  Eigen::MatrixXf err;
  std::vector<GroupParams> params;
  int64_t first_tile = 0;  // Of the tiles of every matrix, in order.
};

// Rows [row0, row0 + rows) of one matrix through block [i1, i2): its
// columns, then its errors into the later columns. Rows are independent
// given U.
void SweepTile(const GptqOptions& options, const std::vector<int32_t>& order,
               const Eigen::MatrixXf& u, int64_t i1, int64_t i2, int64_t row0,
               int64_t rows, LayerSweep& sweep) {
  const GridSpec& grid = options.grid;
  const bool static_groups = options.static_groups;
  Eigen::MatrixXf& w = sweep.prepared.w;
  const int64_t n = w.rows();
  const int64_t k = w.cols();
  const int64_t gs = EffectiveGroupSize(grid, k);
  const CodeRange range = CodeRangeFor(grid);
  Eigen::MatrixXf& err = sweep.err;
  std::vector<GroupParams>& params = sweep.params;
  Eigen::MatrixXf group_tmp;
  for (int64_t j = i1; j < i2; ++j) {
    const int64_t i = j - i1;
    if (static_groups) {
      const int64_t g = order[j] / gs;
      for (int64_t r = row0; r < row0 + rows; ++r) {
        params[r] = {sweep.scales(g, r), sweep.zeros(g, r)};
      }
    } else if (j % gs == 0) {
      // The group's columns inside this block are up to date; those past
      // it still lack this block's errors so far, applied here to a copy.
      const int64_t g = j / gs;
      const int64_t end = std::min(j + gs, k);
      const float* src = w.data() + j * n + row0;
      int64_t stride = n;
      if (end > i2 && i > 0) {
        group_tmp = w.block(row0, j, rows, end - j);
        group_tmp.rightCols(end - i2).noalias() -=
            err.block(row0, 0, rows, i) * u.block(0, i2 - i1, i, end - i2);
        src = group_tmp.data();
        stride = rows;
      }
      for (int64_t r = 0; r < rows; ++r) {
        const GroupParams p =
            ComputeGroupParams(grid, src + r, end - j, stride);
        params[row0 + r] = p;
        sweep.scales(g, row0 + r) = p.scale;
        sweep.zeros(g, row0 + r) = p.zero;
      }
    }
    const float d = u(i, i);
    float* col = w.col(j).data();
    float* e = err.col(i).data();
    for (int64_t r = row0; r < row0 + rows; ++r) {
      const int code = QuantizeToCode(col[r], params[r], range);
      sweep.codes(r, j) = static_cast<uint8_t>(code);
      const float q = DequantizeCode(code, params[r]);
      e[r] = (col[r] - q) / d;
      col[r] = q;
    }
    for (int64_t c = j + 1; c < i2; ++c) {
      w.col(c).segment(row0, rows).noalias() -=
          u(i, c - i1) * err.col(i).segment(row0, rows);
    }
  }
  if (i2 < k) {
    w.block(row0, i2, rows, k - i2).noalias() -=
        err.block(row0, 0, rows, i2 - i1) * u.rightCols(k - i2);
  }
}

}  // namespace

absl::StatusOr<std::vector<GptqResult>> QuantizeGptqLayers(
    const std::vector<ConstRowMatrixRef>& weights,
    const ConstRowMatrixRef& hessian, const GptqOptions& options) {
  if (weights.empty()) return std::vector<GptqResult>();
  QUANT_RETURN_IF_ERROR(ValidateGridSpec(options.grid));
  const int64_t k = weights[0].cols();
  for (const ConstRowMatrixRef& w : weights) {
    QUANT_RETURN_IF_ERROR(CheckFiniteWeights(w, options.layer_name));
    if (w.cols() != k) {
      return absl::InvalidArgumentError(absl::StrCat(
          "layer '", options.layer_name, "': the matrices have ", k, " and ",
          w.cols(), " columns; GPTQ on one H needs the same"));
    }
  }
  QUANT_ASSIGN_OR_RETURN(const GptqFactor factor,
                         PrepareGptqFactor(hessian, k, options));
  const GridSpec& grid = options.grid;
  const int64_t groups = NumGroups(grid, k);
  std::vector<LayerSweep> sweeps(weights.size());
  int64_t tiles = 0;
  for (size_t l = 0; l < weights.size(); ++l) {
    LayerSweep& sweep = sweeps[l];
    sweep.prepared = PrepareGptqWeights(weights[l], factor, options);
    const int64_t n = weights[l].rows();
    sweep.codes.resize(n, k);
    sweep.scales = options.static_groups ? sweep.prepared.static_scales
                                         : RowMatrixF(groups, n);
    sweep.zeros = options.static_groups ? sweep.prepared.static_zeros
                                        : RowMatrixF(groups, n);
    sweep.err.resize(n, std::min<int64_t>(options.block_size, k));
    sweep.params.resize(n);
    sweep.first_tile = tiles;
    tiles += (n + kGptqRowTile - 1) / kGptqRowTile;
  }
  // Rows [i1, i2) of U from column i1 on: u(j, c) = U(i1 + j, i1 + c).
  Eigen::MatrixXf u;
  const int64_t block = std::min<int64_t>(options.block_size, k);
  for (int64_t i1 = 0; i1 < k; i1 += block) {
    const int64_t i2 = std::min(i1 + block, k);
    UpperFactorRows(factor.l_inverse, i1, i2 - i1, &u);
    ParallelFor(options.pool, tiles, [&](int64_t tile) {
      size_t l = sweeps.size() - 1;
      while (sweeps[l].first_tile > tile) --l;
      LayerSweep& sweep = sweeps[l];
      const int64_t n = sweep.prepared.w.rows();
      const int64_t row0 = (tile - sweep.first_tile) * kGptqRowTile;
      SweepTile(options, factor.order, u, i1, i2, row0,
                std::min(kGptqRowTile, n - row0), sweep);
    });
  }

  std::vector<GptqResult> results(sweeps.size());
  for (size_t l = 0; l < sweeps.size(); ++l) {
    LayerSweep& sweep = sweeps[l];
    results[l].layer =
        AssembleGptqLayer(factor.order, grid, options.static_groups,
                          sweep.codes, sweep.scales, sweep.zeros, options.pool);
    results[l].damp_used = factor.damp_used;
    results[l].damp_retries = factor.damp_retries;
    results[l].dead_columns = static_cast<int64_t>(factor.dead.size());
  }
  return results;
}

absl::StatusOr<GptqResult> QuantizeGptq(const ConstRowMatrixRef& weights,
                                        const ConstRowMatrixRef& hessian,
                                        const GptqOptions& options) {
  QUANT_ASSIGN_OR_RETURN(std::vector<GptqResult> results,
                         QuantizeGptqLayers({weights}, hessian, options));
  return std::move(results[0]);
}

std::vector<double> DefaultDampGrid() {
  return {0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0, 3.0};
}

absl::StatusOr<DampSearchResult> QuantizeGptqAutoDamp(
    const ConstRowMatrixRef& weights, const ConstRowMatrixRef& hessian_train,
    const ConstRowMatrixRef& hessian_validation,
    const std::vector<double>& damp_grid, const GptqOptions& options) {
  if (damp_grid.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "layer '", options.layer_name, "': damping grid for auto is empty"));
  }
  QUANT_ASSIGN_OR_RETURN(
      OutputErrorEvaluator validation,
      OutputErrorEvaluator::FromHessian(hessian_validation, /*token_count=*/1));
  DampSearchResult search;
  search.damp_grid = damp_grid;
  double best = std::numeric_limits<double>::infinity();
  for (double damp : damp_grid) {
    GptqOptions o = options;
    o.damp_percent = damp;
    QUANT_ASSIGN_OR_RETURN(GptqResult r,
                           QuantizeGptq(weights, hessian_train, o));
    const double e = validation.SquaredError(weights, r.layer.dequantized);
    search.validation_error.push_back(e);
    if (e < best) {
      best = e;
      search.chosen_damp = damp;
      search.result = std::move(r);
    }
  }
  return search;
}

}  // namespace quant

// Blocked GPTQ with lazy batched updates.
#include "core/quant/gptq.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/quant/gptq_prepare.h"
#include "core/quant/output_error.h"

namespace quant {

absl::StatusOr<GptqResult> QuantizeGptq(const ConstRowMatrixRef& weights,
                                        const ConstRowMatrixRef& hessian,
                                        const GptqOptions& options) {
  QUANT_ASSIGN_OR_RETURN(GptqWorkspace ws,
                         PrepareGptq(weights, hessian, options));
  const GridSpec& grid = options.grid;
  const int64_t n = ws.w.rows();
  const int64_t k = ws.w.cols();
  const int64_t gs = EffectiveGroupSize(grid, k);
  const int64_t groups = NumGroups(grid, k);
  const CodeRange range = CodeRangeFor(grid);
  const bool static_groups = options.static_groups;

  Eigen::Matrix<uint8_t, Eigen::Dynamic, Eigen::Dynamic> codes(n, k);
  RowMatrixF scales = static_groups ? ws.static_scales : RowMatrixF(groups, n);
  RowMatrixF zeros = static_groups ? ws.static_zeros : RowMatrixF(groups, n);
  Eigen::MatrixXf& w = ws.w;
  // Rows [i1, i2) of U from column i1 on: u(j, c) = U(i1 + j, i1 + c).
  Eigen::MatrixXf u;
  const int64_t block = std::min<int64_t>(options.block_size, k);
  Eigen::MatrixXf err(n, block);
  std::vector<GroupParams> params(n);
  // Rows are independent given U: each block runs in fixed tiles of rows,
  // each tile through the block's columns and then its later columns.
  const int64_t tiles = (n + kGptqRowTile - 1) / kGptqRowTile;

  for (int64_t i1 = 0; i1 < k; i1 += block) {
    const int64_t i2 = std::min(i1 + block, k);
    UpperFactorRows(ws.l_inverse, i1, i2 - i1, &u);
    ParallelFor(options.pool, tiles, [&](int64_t tile) {
      const int64_t row0 = tile * kGptqRowTile;
      const int64_t rows = std::min(kGptqRowTile, n - row0);
      Eigen::MatrixXf group_tmp;
      for (int64_t j = i1; j < i2; ++j) {
        const int64_t i = j - i1;
        if (static_groups) {
          const int64_t g = ws.order[j] / gs;
          for (int64_t r = row0; r < row0 + rows; ++r) {
            params[r] = {scales(g, r), zeros(g, r)};
          }
        } else if (j % gs == 0) {
          // The group's columns inside this block are up to date; those
          // past it still lack this block's errors so far, applied here to
          // a copy.
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
            scales(g, row0 + r) = p.scale;
            zeros(g, row0 + r) = p.zero;
          }
        }
        const float d = u(i, i);
        float* col = w.col(j).data();
        float* e = err.col(i).data();
        for (int64_t r = row0; r < row0 + rows; ++r) {
          const int code = QuantizeToCode(col[r], params[r], range);
          codes(r, j) = static_cast<uint8_t>(code);
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
    });
  }

  GptqResult result;
  result.layer =
      AssembleGptqLayer(ws, grid, static_groups, codes, scales, zeros);
  result.damp_used = ws.damp_used;
  result.damp_retries = ws.damp_retries;
  result.dead_columns = ws.dead_columns;
  return result;
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

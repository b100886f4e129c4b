// Column-by-column reference GPTQ.
#include "core/quant/gptq_reference.h"

#include <algorithm>
#include <vector>

#include "core/base/status_macros.h"
#include "core/quant/gptq_prepare.h"

namespace quant {

absl::StatusOr<GptqResult> QuantizeGptqReference(
    const ConstRowMatrixRef& weights, const ConstRowMatrixRef& hessian,
    const GptqOptions& options) {
  QUANT_ASSIGN_OR_RETURN(GptqWorkspace ws,
                         PrepareGptq(weights, hessian, options));
  const GridSpec& grid = options.grid;
  const int64_t n = ws.w.rows();
  const int64_t k = ws.w.cols();
  const int64_t gs = EffectiveGroupSize(grid, k);
  const int64_t groups = NumGroups(grid, k);
  const CodeRange range = CodeRangeFor(grid);

  Eigen::Matrix<uint8_t, Eigen::Dynamic, Eigen::Dynamic> codes(n, k);
  RowMatrixF scales =
      options.static_groups ? ws.static_scales : RowMatrixF(groups, n);
  RowMatrixF zeros =
      options.static_groups ? ws.static_zeros : RowMatrixF(groups, n);
  Eigen::MatrixXf u;  // All of U, the seeds' way.
  UpperFactorRows(ws.l_inverse, 0, k, &u);
  std::vector<GroupParams> params(n);
  Eigen::VectorXf err(n);
  for (int64_t j = 0; j < k; ++j) {
    if (options.static_groups) {
      const int64_t g = ws.order[j] / gs;
      for (int64_t r = 0; r < n; ++r) params[r] = {scales(g, r), zeros(g, r)};
    } else if (j % gs == 0) {
      const int64_t g = j / gs;
      for (int64_t r = 0; r < n; ++r) {
        params[r] = ComputeGroupParams(grid, ws.w.data() + j * n + r,
                                       std::min(gs, k - j), n);
        scales(g, r) = params[r].scale;
        zeros(g, r) = params[r].zero;
      }
    }
    for (int64_t r = 0; r < n; ++r) {
      const int code = QuantizeToCode(ws.w(r, j), params[r], range);
      codes(r, j) = static_cast<uint8_t>(code);
      const float q = DequantizeCode(code, params[r]);
      err(r) = (ws.w(r, j) - q) / u(j, j);
      ws.w(r, j) = q;
    }
    for (int64_t c = j + 1; c < k; ++c) ws.w.col(c) -= u(j, c) * err;
  }
  GptqResult result;
  result.layer = AssembleGptqLayer(ws.order, grid, options.static_groups, codes,
                                   scales, zeros);
  result.layer.method = "gptq-reference";
  result.damp_used = ws.damp_used;
  result.damp_retries = ws.damp_retries;
  result.dead_columns = ws.dead_columns;
  return result;
}

}  // namespace quant

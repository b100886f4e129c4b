// AWQ (Lin et al. 2024), the activation-aware scaling core: per input channel
// s = stat^α / mean(stat^α) from the calibration activation statistic (mean
// |x|), W·diag(s) quantized on the grid, α chosen from a grid by calibration
// output error ‖X (W − Q_s diag(1/s))ᵀ‖². The caller folds 1/s into the op that
// produces the layer's input (RMSNorm weight, v_proj rows, up_proj rows).
// Optional clipping search: per row and group, the range shrink ratio with the
// smallest output error on the group's block of H.
#ifndef QUANT_CORE_QUANT_AWQ_H_
#define QUANT_CORE_QUANT_AWQ_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/quant/grid.h"
#include "core/quant/matrix_types.h"
#include "core/quant/output_error.h"
#include "core/quant/quantized_layer.h"

namespace quant {

struct AwqOptions {
  GridSpec grid;
  std::vector<float> alpha_grid = DefaultAlphaGrid();  // 0, 0.05, ..., 0.95
  bool clip_search = false;
  // Range shrink ratios tried per (row, group) when clip_search is on.
  std::vector<float> clip_ratios = {1.0f, 0.95f, 0.9f, 0.85f, 0.8f, 0.75f,
                                    0.7f, 0.65f, 0.6f, 0.55f, 0.5f};
  // If > 0 and below N, α is chosen on this many evenly spaced output rows
  // (the error is a sum over rows, each quantized independently); the chosen
  // α is then applied to every row. 0: all rows, exact. The search costs
  // 2·min(T, K)·K·rows flops per α, so this bounds it on wide layers.
  int64_t search_rows = 0;
  std::string layer_name;

  static std::vector<float> DefaultAlphaGrid();
};

struct AwqResult {
  // The quantized W·diag(s): the codes, scales and zeros to pack.
  QuantizedLayer layer;
  // s [K]. The packed layer computes (x / s) · (W s)ᵀ: fold 1/s upstream.
  Eigen::VectorXf input_scales;
  // Q_s · diag(1/s): the layer's effective weight in W's units, for audits.
  RowMatrixF effective;
  float alpha = 0.0f;
  // Calibration ‖XEᵀ‖² per alpha_grid entry (over the searched rows).
  std::vector<double> alpha_errors;
};

// s = stat^α / mean(stat^α); all ones for α = 0 or a zero statistic mean.
// Channels with stat 0 get the smallest positive scale of the others so 1/s
// stays finite.
Eigen::VectorXf AwqScales(const Eigen::VectorXf& act_stat, float alpha);

// `calibration` measures output error (from H or X of the calibration split).
absl::StatusOr<AwqResult> QuantizeAwq(const ConstRowMatrixRef& weights,
                                      const Eigen::VectorXf& act_stat,
                                      const OutputErrorEvaluator& calibration,
                                      const AwqOptions& options);

}  // namespace quant

#endif  // QUANT_CORE_QUANT_AWQ_H_

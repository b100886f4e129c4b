// Per-layer audit metrics.
#include "core/quant/audit.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/quant/layer_checks.h"
#include "core/quant/rtn.h"

namespace quant {
namespace {

// One split's errors of the method and of RTN: ‖XWᵀ‖² once for both.
struct SplitPair {
  SplitErrors method;
  SplitErrors rtn;
  // The sums they were made from: ||W X||^2 over the split's tokens and
  // the element count, for any other candidate on the same split.
  double reference_squares = 0.0;
  double count = 0.0;
};

SplitErrors FromSquares(double ref, double err, double count) {
  SplitErrors s;
  s.relative_error = ref > 0.0 ? std::sqrt(err / ref) : 0.0;
  s.output_mse = count > 0.0 ? err / count : 0.0;
  return s;
}

SplitPair Errors(const OutputErrorEvaluator& eval, const ConstRowMatrixRef& w,
                 const ConstRowMatrixRef& q, const ConstRowMatrixRef& rtn,
                 ThreadPool* pool) {
  const double ref = eval.SquaredNorm(w, pool);
  const double count =
      static_cast<double>(eval.token_count()) * static_cast<double>(w.rows());
  return {FromSquares(ref, eval.SquaredError(w, q, pool), count),
          FromSquares(ref, eval.SquaredError(w, rtn, pool), count), ref, count};
}

double Ratio(double num, double den) {
  if (den == 0.0)
    return num == 0.0 ? 1.0 : std::numeric_limits<double>::infinity();
  return num / den;
}

}  // namespace

std::string LayerTypeOfName(const std::string& layer) {
  const size_t dot = layer.rfind('.');
  return dot == std::string::npos ? layer : layer.substr(dot + 1);
}

void MarkOutliers(std::vector<LayerAudit>* audits, double factor) {
  std::map<std::string, std::vector<double>> by_type;
  for (const LayerAudit& a : *audits) {
    by_type[LayerTypeOfName(a.layer)].push_back(
        a.method_heldout.relative_error);
  }
  std::map<std::string, double> median;
  for (auto& [type, errors] : by_type) {
    std::sort(errors.begin(), errors.end());
    const size_t m = errors.size();
    median[type] =
        m % 2 == 1 ? errors[m / 2] : 0.5 * (errors[m / 2 - 1] + errors[m / 2]);
  }
  for (LayerAudit& a : *audits) {
    const std::string type = LayerTypeOfName(a.layer);
    a.outlier = by_type[type].size() > 1 &&
                a.method_heldout.relative_error > factor * median[type];
  }
}

double RmsOffDiagonalCorrelation(const ConstRowMatrixRef& hessian) {
  const int64_t k = hessian.rows();
  std::vector<int64_t> live;
  for (int64_t i = 0; i < k; ++i) {
    if (hessian(i, i) > 0.0f) live.push_back(i);
  }
  const int64_t m = static_cast<int64_t>(live.size());
  if (m < 2) return 0.0;
  // r(a, b) = H(a, b) / √(H(a, a) H(b, b)), with 1/√H(b, b) taken once.
  std::vector<double> inv_sqrt(static_cast<size_t>(m));
  for (int64_t a = 0; a < m; ++a) {
    inv_sqrt[a] =
        1.0 / std::sqrt(static_cast<double>(hessian(live[a], live[a])));
  }
  double sum = 0.0;
  for (int64_t a = 0; a < m; ++a) {
    const float* row = hessian.row(live[a]).data();
    double row_sum = 0.0;
    for (int64_t b = 0; b < m; ++b) {
      if (a == b) continue;
      const double scaled = row[live[b]] * inv_sqrt[b];
      row_sum += scaled * scaled;
    }
    sum += row_sum * inv_sqrt[a] * inv_sqrt[a];
  }
  return std::sqrt(sum / (static_cast<double>(m) * static_cast<double>(m - 1)));
}

int64_t CountDeadChannels(const ConstRowMatrixRef& hessian) {
  int64_t dead = 0;
  for (int64_t i = 0; i < hessian.rows(); ++i) dead += hessian(i, i) == 0.0f;
  return dead;
}

double WeightMse(const ConstRowMatrixRef& weights,
                 const ConstRowMatrixRef& quantized) {
  return (weights - quantized).cast<double>().squaredNorm() /
         static_cast<double>(weights.size());
}

double BitsPerWeight(const GridSpec& grid, int64_t k, int scale_bits,
                     int zero_bits) {
  const double groups = static_cast<double>(NumGroups(grid, k));
  return grid.bits + (scale_bits + zero_bits) * groups / static_cast<double>(k);
}

HessianDiagnostics DiagnoseHessian(const OutputErrorEvaluator& calibration) {
  const int64_t k = calibration.k();
  RowMatrixF gram;
  const RowMatrixF* h = calibration.hessian();
  if (h == nullptr) {
    gram = calibration.GramBlock(0, k);
    h = &gram;
  }
  return DiagnoseHessian(*h, calibration.token_count());
}

HessianDiagnostics DiagnoseHessian(const RowMatrixF& h, int64_t tokens) {
  HessianDiagnostics d;
  d.tokens = tokens;
  d.k = h.rows();
  d.tokens_per_input =
      d.k > 0 ? static_cast<double>(tokens) / static_cast<double>(d.k) : 0.0;
  d.dead_channels = CountDeadChannels(h);
  d.rho_rms = RmsOffDiagonalCorrelation(h);
  d.inv_sqrt_tokens =
      tokens > 0 ? 1.0 / std::sqrt(static_cast<double>(tokens)) : 0.0;
  return d;
}

namespace {

// The checks both parts share; `heldout` says whether the held-out
// evaluator is needed.
absl::Status CheckAuditInputs(const AuditInputs& in, bool calibration,
                              bool heldout) {
  if ((calibration && in.calibration == nullptr) ||
      (heldout && in.heldout == nullptr)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "audit of layer '", in.layer, "': ",
        calibration && heldout ? "calibration and held-out activations are "
                                 "both required"
        : calibration          ? "calibration activations are required"
                               : "held-out activations are required"));
  }
  QUANT_RETURN_IF_ERROR(ValidateGridSpec(in.grid));
  QUANT_RETURN_IF_ERROR(CheckFiniteWeights(in.weights, in.layer));
  const int64_t k = in.weights.cols();
  if (in.quantized.rows() != in.weights.rows() || in.quantized.cols() != k ||
      (calibration && in.calibration->k() != k) ||
      (heldout && in.heldout->k() != k)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "audit of layer '", in.layer, "': shapes disagree (W ",
        in.weights.rows(), "x", k, ", Q ", in.quantized.rows(), "x",
        in.quantized.cols(),
        calibration ? absl::StrCat(", calibration K ", in.calibration->k())
                    : std::string(),
        heldout ? absl::StrCat(", held-out K ", in.heldout->k())
                : std::string(),
        ")"));
  }
  if (heldout && in.previous != nullptr &&
      (in.previous->rows() != in.weights.rows() || in.previous->cols() != k)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "audit of layer '", in.layer, "': the previous release's layer is ",
        in.previous->rows(), "x", in.previous->cols(), ", W is ",
        in.weights.rows(), "x", k));
  }
  return absl::OkStatus();
}

void AddHeldoutChecked(const AuditInputs& in, const AuditOptions& options,
                       const QuantizedLayer& rtn, LayerAudit* a) {
  const SplitPair heldout =
      Errors(*in.heldout, in.weights, in.quantized, rtn.dequantized, in.pool);
  if (in.previous != nullptr) {
    a->previous_heldout =
        FromSquares(heldout.reference_squares,
                    in.heldout->SquaredError(in.weights, *in.previous, in.pool),
                    heldout.count);
  }
  a->method_heldout = heldout.method;
  a->rtn_heldout = heldout.rtn;
  a->gain_heldout =
      Ratio(a->rtn_heldout.output_mse, a->method_heldout.output_mse);
  a->flattery = Ratio(a->gain_calibration, a->gain_heldout);
  a->worse_than_rtn_heldout =
      a->method_heldout.output_mse > a->rtn_heldout.output_mse;
  a->overfit = a->flattery > options.overfit_flattery;
  a->heldout_pending = false;
}

LayerAudit CalibrationChecked(const AuditInputs& in,
                              const AuditOptions& options,
                              const QuantizedLayer& rtn) {
  const int64_t k = in.weights.cols();

  LayerAudit a;
  a.layer = in.layer;
  a.method = in.method;
  a.grid = in.grid;
  const SplitPair calibration = Errors(*in.calibration, in.weights,
                                       in.quantized, rtn.dequantized, in.pool);
  a.method_calibration = calibration.method;
  a.rtn_calibration = calibration.rtn;
  a.method_weight_mse = WeightMse(in.weights, in.quantized);
  a.rtn_weight_mse = WeightMse(in.weights, rtn.dequantized);
  a.gain_calibration =
      Ratio(a.rtn_calibration.output_mse, a.method_calibration.output_mse);
  a.bits_per_weight =
      BitsPerWeight(in.grid, k, options.scale_bits,
                    options.zero_bits < 0 ? in.grid.bits : options.zero_bits);

  HessianDiagnostics& d = a.hessian;
  d = in.diagnostics != nullptr ? *in.diagnostics
                                : DiagnoseHessian(*in.calibration);
  d.damp_used = in.damp_used;
  d.damp_retries = in.damp_retries;
  a.rank_deficient = d.tokens < k;
  a.heldout_pending = true;
  return a;
}

}  // namespace

absl::StatusOr<LayerAudit> AuditLayerCalibration(const AuditInputs& in,
                                                 const AuditOptions& options) {
  QUANT_RETURN_IF_ERROR(CheckAuditInputs(in, /*calibration=*/true,
                                         /*heldout=*/false));
  return CalibrationChecked(in, options,
                            QuantizeRtnUnchecked(in.weights, in.grid));
}

absl::Status AddHeldoutAudit(const AuditInputs& in, const AuditOptions& options,
                             LayerAudit* audit) {
  QUANT_RETURN_IF_ERROR(CheckAuditInputs(in, /*calibration=*/false,
                                         /*heldout=*/true));
  if (!audit->heldout_pending || audit->layer != in.layer) {
    return absl::FailedPreconditionError(absl::StrCat(
        "audit of layer '", in.layer, "': ",
        audit->heldout_pending
            ? absl::StrCat("the calibration part is of layer '", audit->layer,
                           "'")
            : std::string("its held-out part is already measured")));
  }
  const QuantizedLayer rtn = QuantizeRtnUnchecked(in.weights, in.grid);
  AddHeldoutChecked(in, options, rtn, audit);
  return absl::OkStatus();
}

absl::StatusOr<LayerAudit> AuditLayer(const AuditInputs& in,
                                      const AuditOptions& options) {
  QUANT_RETURN_IF_ERROR(CheckAuditInputs(in, /*calibration=*/true,
                                         /*heldout=*/true));
  const QuantizedLayer rtn = QuantizeRtnUnchecked(in.weights, in.grid);
  LayerAudit a = CalibrationChecked(in, options, rtn);
  AddHeldoutChecked(in, options, rtn, &a);
  return a;
}

}  // namespace quant

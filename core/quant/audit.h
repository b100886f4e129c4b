// Per-layer audit (DESIGN.md "Audit"): output and weight errors of the chosen
// method and of RTN on the same grid, on calibration and held-out activations;
// gain, flattery, Hessian diagnostics, storage cost and flags.
//
// Definitions (the seeds'):
//   relative error  ‖X(W−Q)ᵀ‖_F / ‖XWᵀ‖_F
//   output MSE      mean over the T×N entries of (X(W−Q)ᵀ)²
//   weight MSE      mean over the N×K entries of (W−Q)²
//   gain            RTN's output MSE / the method's, per split (> 1: better)
//   flattery        calibration gain / held-out gain
//   rho_rms         RMS off-diagonal entry of D^-1/2 H D^-1/2 (live channels),
//                   phantom coupling; compare with 1/√T
#ifndef QUANT_CORE_QUANT_AUDIT_H_
#define QUANT_CORE_QUANT_AUDIT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/quant/grid.h"
#include "core/quant/matrix_types.h"
#include "core/quant/output_error.h"

namespace quant {

struct SplitErrors {
  double relative_error = 0.0;
  double output_mse = 0.0;
};

struct HessianDiagnostics {
  int64_t tokens = 0;  // T
  int64_t k = 0;
  double tokens_per_input = 0.0;  // T / K
  int64_t dead_channels = 0;      // diag H == 0
  double rho_rms = 0.0;
  double inv_sqrt_tokens = 0.0;  // 1/√T, the sampling-noise scale of rho_rms
  double damp_used = 0.0;
  int damp_retries = 0;
};

struct LayerAudit {
  std::string layer;
  std::string method;
  GridSpec grid;
  SplitErrors method_calibration;
  SplitErrors method_heldout;
  SplitErrors rtn_calibration;
  SplitErrors rtn_heldout;
  double method_weight_mse = 0.0;
  double rtn_weight_mse = 0.0;
  double gain_calibration = 0.0;
  double gain_heldout = 0.0;
  double flattery = 0.0;
  double bits_per_weight = 0.0;
  HessianDiagnostics hessian;
  // The previous release's layer (recipe gates.compare_to) on the same
  // held-out activations; set when the caller gave one.
  std::optional<SplitErrors> previous_heldout;
  double seconds = 0.0;  // Filled by the caller (quantization time).
  bool worse_than_rtn_heldout = false;
  bool overfit = false;         // flattery > AuditOptions::overfit_flattery
  bool rank_deficient = false;  // T < K
  bool outlier = false;         // set by MarkOutliers across layers
  // Only the calibration part is measured so far (AuditLayerCalibration);
  // AddHeldoutAudit measures the rest.
  bool heldout_pending = false;
};

struct AuditOptions {
  double overfit_flattery = 1.5;
  int scale_bits = 16;  // fp16 scales
  // Bits per stored zero; -1: the grid's bit width (GPTQ v1 stores packed
  // zeros for every grid kind).
  int zero_bits = -1;
};

struct AuditInputs {
  std::string layer;
  std::string method;
  GridSpec grid;
  ConstRowMatrixRef weights;    // W [N, K]
  ConstRowMatrixRef quantized;  // the method's effective weight [N, K]
  const OutputErrorEvaluator* calibration = nullptr;
  const OutputErrorEvaluator* heldout = nullptr;
  double damp_used = 0.0;
  int damp_retries = 0;
  // The calibration Hessian's diagnostics when the caller has them (the
  // layers of a group share one); null: computed here.
  const HessianDiagnostics* diagnostics = nullptr;
  // Spreads the output errors' row tiles (inline when null; the same result
  // on any thread count).
  ThreadPool* pool = nullptr;
  // The previous release's effective weight [N, K] in W's units; its
  // held-out error is measured too (LayerAudit::previous_heldout).
  const RowMatrixF* previous = nullptr;
};

// T, K, T/K, dead channels and rho_rms of the calibration split's H (damping
// left at zero): what every layer reading that input shares.
HessianDiagnostics DiagnoseHessian(const OutputErrorEvaluator& calibration);

// The same of a given H = XᵀX over `tokens` tokens (0 when unknown).
HessianDiagnostics DiagnoseHessian(const RowMatrixF& h, int64_t tokens);

// RTN on the same grid is computed here. Errors: shape mismatches, missing
// evaluators, non-finite weights (naming the layer).
absl::StatusOr<LayerAudit> AuditLayer(const AuditInputs& inputs,
                                      const AuditOptions& options = {});

// AuditLayer in two parts, for a caller that has the held-out activations
// only later (a round's reduce, docs/DATA_PARALLEL.md): the calibration
// part (inputs.heldout is not read; the result has heldout_pending set),
// then the held-out part (inputs.calibration is not read), which gives the
// result AuditLayer gives for the same inputs. FailedPrecondition when
// `audit` is not a pending audit of inputs.layer.
absl::StatusOr<LayerAudit> AuditLayerCalibration(
    const AuditInputs& inputs, const AuditOptions& options = {});
absl::Status AddHeldoutAudit(const AuditInputs& inputs,
                             const AuditOptions& options, LayerAudit* audit);

// The layer type in a name: the part after its last '.'
// ("model.layers.3.mlp.up_proj"
// -> "up_proj").
std::string LayerTypeOfName(const std::string& layer);

// Sets `outlier` on every audit whose held-out relative error exceeds
// `factor` times the median of its layer type (types with one layer never
// are outliers).
void MarkOutliers(std::vector<LayerAudit>* audits, double factor = 3.0);

double RmsOffDiagonalCorrelation(const ConstRowMatrixRef& hessian);
int64_t CountDeadChannels(const ConstRowMatrixRef& hessian);
double WeightMse(const ConstRowMatrixRef& weights,
                 const ConstRowMatrixRef& quantized);
// b + (scale_bits + zero_bits) · groups / K per weight; a partial last group
// costs a whole group's metadata.
double BitsPerWeight(const GridSpec& grid, int64_t k, int scale_bits,
                     int zero_bits);

}  // namespace quant

#endif  // QUANT_CORE_QUANT_AUDIT_H_

// Quantizes the linear layers that read one activation matrix (an input
// group: [q,k,v], [o], [gate,up] or [down]) with their resolved settings,
// and audits each against RTN on the calibration and held-out activations.
//
// The group is the unit because its layers share the calibration statistics
// (one Hessian, one AWQ activation statistic) and because AWQ's input scale
// s is folded into the single op that produces the group's input, so every
// AWQ layer of a group must share s: their weights are stacked row-wise and
// quantized as one matrix (rows are quantized independently, so stacking
// changes nothing but the choice of α, which then minimises the group's
// total error).
#ifndef QUANT_CORE_PIPELINE_LAYER_GROUP_QUANTIZER_H_
#define QUANT_CORE_PIPELINE_LAYER_GROUP_QUANTIZER_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/base/thread_pool.h"
#include "core/pipeline/shard_sums_file.h"
#include "core/quant/audit.h"
#include "core/quant/grid.h"
#include "core/quant/hessian.h"
#include "core/quant/matrix_types.h"
#include "core/quant/quantized_layer.h"
#include "core/recipe/layer_plan.h"
#include "core/recipe/recipe.h"

namespace quant {

// The grid a layer's settings describe. Scales are rounded to fp16, the
// precision both packed formats store.
GridSpec GridForSettings(const LayerSettings& settings);

struct GroupLayerInput {
  std::string name;  // "model.layers.0.self_attn.q_proj"
  LayerSettings settings;
  ConstRowMatrixRef weight;  // W [N, K]
  // The previous release's layer in W's units (gates.compare_to), audited
  // on the same held-out inputs; null: none.
  const RowMatrixF* previous = nullptr;
};

struct GroupQuantizeOptions {
  const Recipe* recipe = nullptr;  // act_order, damping grid, AWQ options.
  // False when nothing can undo AWQ's scaling upstream (e.g. o_proj under
  // grouped-query attention): AWQ layers then search only α = 0.
  bool awq_fold_available = true;
  // Fraction of the calibration tokens that validate damp: auto.
  double auto_damp_validation_fraction = kAutoDampValidationFraction;
  // Spreads the Hessian tiles and the group's layers over its threads;
  // inline when null. The results do not depend on it. Not owned.
  ThreadPool* pool = nullptr;
  // False: the audits measure the calibration split only and are left
  // pending (LayerAudit::heldout_pending), the statistics' held-out part
  // unread; AuditGroupHeldout measures the rest once the held-out
  // statistics are gathered (a round's reduce that does not wait for the
  // held-out shards, docs/DATA_PARALLEL.md).
  bool audit_heldout = true;
};

// What the method chose for one layer, for the audit.
struct MethodChoices {
  // GPTQ: damping chosen and, for damp: auto, the grid and its errors.
  double damp_used = 0.0;
  int damp_retries = 0;
  std::vector<double> damp_grid;
  std::vector<double> damp_validation_error;
  // AWQ: α; set means the layer's dequantized weights are W·diag(s).
  std::optional<float> awq_alpha;
  // The numerical cores' work for this layer (its share of the group's
  // Hessian accumulation; its GPTQ sweep), for throughput reports. Flops
  // are the leading terms: 2·T·K² per Hessian, 2·N·K² + K³ per sweep.
  double hessian_flops = 0.0;
  double hessian_seconds = 0.0;
  double gptq_flops = 0.0;
  double gptq_seconds = 0.0;
};

struct QuantizedGroupLayer {
  std::string name;
  QuantizedLayer layer;  // Codes, scales, zeros; dequantized = what computes.
  LayerAudit audit;
  MethodChoices choices;
};

struct QuantizedGroup {
  std::vector<QuantizedGroupLayer> layers;  // In the input order.
  // AWQ's s [K], shared by the group's AWQ layers; empty without AWQ. The
  // layers' weights are W·diag(s): the caller divides the group's input by s
  // in the op that produces it.
  Eigen::VectorXf awq_input_scales;
};

// The statistics of a group's input activations, fed a chunk of real-token
// rows at a time, so no [T, K] matrix is ever held: the calibration Hessian
// (plus, for damp: auto, its train/validation split and, for AWQ, the mean
// |x| per channel) and the held-out Hessian. The audit's output errors,
// damp: auto's validation and AWQ's α search are all quadratic forms in
// these (‖X Eᵀ‖² = tr(E XᵀX Eᵀ)).
//
// Sums are taken per shard (kShardSequences sequences of a split, see
// hidden_state_stream.h): each shard's sums start from zero and are added
// to the split's totals in shard order. A shard accumulated apart (another
// task, another worker) and merged with MergeShard therefore gives the same
// bytes as one pass over every chunk, which is what lets one block's
// statistics be gathered by many workers (docs/DATA_PARALLEL.md).
class GroupActivationStatistics {
 public:
  // `layers` and `options` decide which statistics are kept.
  GroupActivationStatistics(int64_t k,
                            const std::vector<GroupLayerInput>& layers,
                            const GroupQuantizeOptions& options);

  // Adds a chunk of shard `shard` of its split; chunks of one shard come
  // together, shards in increasing order. InvalidArgument when a chunk is
  // not [t, K] or not finite, or a shard comes back.
  absl::Status AddCalibration(const ConstRowMatrixRef& rows, int64_t shard = 0);
  absl::Status AddHeldout(const ConstRowMatrixRef& rows, int64_t shard = 0);
  // Adds the last open shard to the totals; call once every chunk is in,
  // before reading the statistics or merging them elsewhere.
  absl::Status CloseShards();
  // One shard gathered apart: sets where its calibration tokens start in
  // the split (damp: auto splits by token index). Call before adding.
  void StartCalibrationAt(int64_t first_token);
  // Adds another statistics' totals (same K and layers), as the shards
  // that follow this one's: calibration shards and held-out shards each in
  // their split's order. InvalidArgument when they do not fit.
  absl::Status MergeShard(const GroupActivationStatistics& next);

  // Sets the sums of a shard read back from its file (shard_statistics_io)
  // into statistics that hold nothing yet. `split` and `mean_abs` must be
  // set exactly when these statistics keep them: InvalidArgument naming
  // the one that does not fit.
  // The sums are moved out of `sums` when it fits.
  absl::Status RestoreShard(ShardSums* sums);

  // Also keeps each split's rows while it has at most K of them (call
  // before adding any), so the audit evaluates ‖X Eᵀ‖² on X, T·K·N
  // multiply-adds, instead of tr(E H Eᵀ), K²·N: an expert that saw a tenth
  // of K tokens costs a tenth. The kept rows take at most what a Hessian
  // takes.
  void KeepFewRows() { keep_few_rows_ = true; }
  // A split's rows when kept (at most K of them), else null.
  const RowMatrixF* calibration_rows() const {
    return keep_few_rows_ ? calibration_rows_.get() : nullptr;
  }
  const RowMatrixF* heldout_rows() const {
    return keep_few_rows_ ? heldout_rows_.get() : nullptr;
  }

  int64_t k() const { return k_; }
  int64_t calibration_tokens() const { return calibration_.token_count(); }
  int64_t heldout_tokens() const { return heldout_.token_count(); }
  // Time spent accumulating, for throughput reports.
  double seconds() const { return seconds_; }
  // A shard is still open (CloseShards not called since the last add).
  bool has_open_shard() const { return open_ != nullptr; }

  const HessianAccumulator& calibration() const { return calibration_; }
  const HessianAccumulator& heldout() const { return heldout_; }
  // Set when a layer uses damp: auto / AWQ.
  const std::optional<SplitHessianAccumulator>& split() const { return split_; }
  const std::optional<ActivationStatsAccumulator>& mean_abs() const {
    return mean_abs_;
  }

 private:
  // Empty statistics of the same kind, a shard's partial sums.
  GroupActivationStatistics(int64_t k, double validation_fraction, bool split,
                            bool mean_abs, ThreadPool* pool);
  enum class Split { kCalibration, kHeldout };
  // The statistics a chunk of (split, shard) goes into: this object for the
  // first shard of a split (the totals are zero, so adding to them is
  // adding to zero), else the open partial, opened fresh for a new shard.
  absl::StatusOr<GroupActivationStatistics*> Target(Split split, int64_t shard);
  absl::Status AddCalibrationRows(const ConstRowMatrixRef& rows);
  absl::Status AddHeldoutRows(const ConstRowMatrixRef& rows);

  int64_t k_;
  double validation_fraction_;
  HessianAccumulator calibration_;
  HessianAccumulator heldout_;
  std::optional<SplitHessianAccumulator> split_;        // damp: auto.
  std::optional<ActivationStatsAccumulator> mean_abs_;  // AWQ.
  ThreadPool* pool_;
  double seconds_ = 0.0;

  // Rows of one split while there are at most K of them.
  class FewRows {
   public:
    void Add(const ConstRowMatrixRef& rows, int64_t k);
    void Merge(const FewRows& next, int64_t k);
    const RowMatrixF* get() const { return overflowed_ ? nullptr : &rows_; }

   private:
    bool overflowed_ = false;
    RowMatrixF rows_;
  };
  bool keep_few_rows_ = false;
  FewRows calibration_rows_;
  FewRows heldout_rows_;

  // The shard being added, and the last shard of each split; `open_` holds
  // the shard's partial sums, null while its chunks go to the totals.
  Split current_split_ = Split::kCalibration;
  int64_t current_shard_ = -1;
  int64_t last_shard_[2] = {-1, -1};
  std::unique_ptr<GroupActivationStatistics> open_;
};

// Every layer in `layers` is quantized (callers leave out the ones kept
// unquantized) from `statistics`, gathered for these layers; the GPTQ and
// RTN layers and the audits run on options.pool's threads. Errors: layers
// of one group disagreeing on K, AWQ layers with different grids, and what
// the cores report (naming the layer).
absl::StatusOr<QuantizedGroup> QuantizeLayerGroup(
    const std::vector<GroupLayerInput>& layers,
    const GroupActivationStatistics& statistics,
    const GroupQuantizeOptions& options);

// A layer whose audit's held-out part is left to measure (below).
struct PendingHeldoutAudit {
  const QuantizedLayer* layer = nullptr;  // Its grid and dequantized weights.
  LayerAudit* audit = nullptr;            // Completed in place.
  MethodChoices* choices = nullptr;       // Gets the held-out Hessian's flops.
};

// The held-out part of the audits a QuantizeLayerGroup with
// options.audit_heldout false left pending. `layers` as given to it (the
// quantized ones), `pending[i]` layers[i]'s result, `heldout` the group's
// held-out sums (the shards' in shard order). The audits then equal what
// QuantizeLayerGroup gives with the held-out statistics at hand.
// FailedPrecondition for an AWQ layer (its dequantized weights are in s's
// units) or an audit not pending; InvalidArgument for sizes that disagree.
absl::Status AuditGroupHeldout(const std::vector<GroupLayerInput>& layers,
                               const std::vector<PendingHeldoutAudit>& pending,
                               const HessianAccumulator& heldout,
                               ThreadPool* pool);

}  // namespace quant

#endif  // QUANT_CORE_PIPELINE_LAYER_GROUP_QUANTIZER_H_

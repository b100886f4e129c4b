// One input group's layers through RTN, GPTQ or AWQ, then the audit.
#include "core/pipeline/layer_group_quantizer.h"

#include <chrono>
#include <utility>

#include "absl/functional/function_ref.h"
#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/quant/awq.h"
#include "core/quant/gptq.h"
#include "core/quant/hessian.h"
#include "core/quant/output_error.h"
#include "core/quant/rtn.h"

namespace quant {
namespace {

GridKind ToGridKind(QuantGrid grid) {
  switch (grid) {
    case QuantGrid::kSym:
      return GridKind::kSym;
    case QuantGrid::kSymRestricted:
      return GridKind::kSymRestricted;
    case QuantGrid::kAsym:
      return GridKind::kAsym;
  }
  return GridKind::kSym;
}

bool SameGrid(const GridSpec& a, const GridSpec& b) {
  return a.kind == b.kind && a.bits == b.bits && a.group_size == b.group_size &&
         a.f16_scales == b.f16_scales;
}

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

// Rows [begin, begin + count) of a layer quantized as part of a stack.
QuantizedLayer SliceRows(const QuantizedLayer& stacked, int64_t begin,
                         int64_t count) {
  QuantizedLayer out;
  out.grid = stacked.grid;
  out.rows = count;
  out.cols = stacked.cols;
  out.dequantized = stacked.dequantized.middleRows(begin, count);
  out.codes = stacked.codes.middleRows(begin, count);
  out.scales = stacked.scales.middleCols(begin, count);
  out.zeros = stacked.zeros.middleCols(begin, count);
  out.g_idx = stacked.g_idx;
  out.order = stacked.order;
  out.method = stacked.method;
  return out;
}

// What the group's layers share, finished once from the accumulated sums.
struct GroupStatistics {
  RowMatrixF h;  // Calibration XᵀX, shared by the group's GPTQ layers.
  const SplitHessianAccumulator* split = nullptr;  // For damp: auto.
  std::optional<OutputErrorEvaluator> calibration;
  std::optional<OutputErrorEvaluator> heldout;
  Eigen::VectorXf mean_abs;
  HessianDiagnostics diagnostics;  // of the calibration H, for every layer
};

// Runs audit(i) for each of a group's `layers`: side by side when they
// divide evenly among the pool's threads, otherwise one after another, each
// spreading its error tiles over the pool (three layers on two threads kept
// one thread idle for a whole layer's audit). A layer's tiles are the same
// either way, so are its results.
void ForEachLayerAudit(ThreadPool* pool, size_t layers,
                       absl::FunctionRef<void(int64_t)> audit) {
  const int64_t threads = pool == nullptr ? 1 : pool->threads();
  const int64_t count = static_cast<int64_t>(layers);
  if (count % threads == 0) {
    ParallelFor(pool, count, audit);
    return;
  }
  for (int64_t i = 0; i < count; ++i) audit(i);
}

// Both splits' Hessians finished side by side (memory-bound copies of
// K x K matrices, worth two threads when K is in the thousands).
absl::StatusOr<GroupStatistics> FinishStatistics(
    const GroupActivationStatistics& accumulated, ThreadPool* pool,
    bool heldout) {
  if (accumulated.has_open_shard()) {
    return absl::FailedPreconditionError(
        "activation statistics read with a shard still open (CloseShards)");
  }
  GroupStatistics stats;
  if (accumulated.split().has_value()) stats.split = &*accumulated.split();
  if (accumulated.mean_abs().has_value()) {
    stats.mean_abs = accumulated.mean_abs()->MeanAbs();
  }
  absl::StatusOr<OutputErrorEvaluator> evaluators[2] = {
      absl::UnknownError("not finished"), absl::UnknownError("not finished")};
  ParallelFor(pool, 2, [&](int64_t split) {
    // Kept rows (at most K) make the audit's errors T·K·N, not K²·N.
    if (split == 0) {
      stats.h = accumulated.calibration().Finish();
      evaluators[0] = accumulated.calibration_rows() != nullptr
                          ? OutputErrorEvaluator::FromActivations(
                                *accumulated.calibration_rows())
                          : OutputErrorEvaluator::FromHessian(
                                stats.h, accumulated.calibration_tokens());
      if (evaluators[0].ok()) {
        stats.diagnostics = DiagnoseHessian(*evaluators[0]);
      }
    } else if (heldout) {
      evaluators[1] = accumulated.heldout_rows() != nullptr
                          ? OutputErrorEvaluator::FromActivations(
                                *accumulated.heldout_rows())
                          : OutputErrorEvaluator::FromHessian(
                                accumulated.heldout().Finish(),
                                accumulated.heldout_tokens());
    }
  });
  QUANT_RETURN_IF_ERROR(evaluators[0].status());
  stats.calibration.emplace(*std::move(evaluators[0]));
  if (heldout) {
    QUANT_RETURN_IF_ERROR(evaluators[1].status());
    stats.heldout.emplace(*std::move(evaluators[1]));
  }
  return stats;
}

absl::StatusOr<QuantizedGroupLayer> QuantizeOne(
    const GroupLayerInput& input, const GroupStatistics& stats,
    const GroupQuantizeOptions& options) {
  const GridSpec grid = GridForSettings(input.settings);
  QuantizedGroupLayer out;
  out.name = input.name;
  if (input.settings.method == QuantMethod::kRtn) {
    QUANT_ASSIGN_OR_RETURN(out.layer,
                           QuantizeRtn(input.weight, grid, input.name));
    return out;
  }
  // GPTQ.
  const Recipe& recipe = *options.recipe;
  GptqOptions gptq;
  gptq.grid = grid;
  gptq.act_order = recipe.act_order;
  gptq.static_groups = recipe.static_groups;
  gptq.layer_name = input.name;
  gptq.pool = options.pool;  // Used when the group runs one layer at a time.
  if (input.settings.damp.automatic) {
    if (stats.split == nullptr) {
      return absl::InternalError(
          absl::StrCat(input.name, ": damp auto without the split statistics"));
    }
    const RowMatrixF train = stats.split->train().Finish();
    const RowMatrixF validation = stats.split->validation().Finish();
    QUANT_ASSIGN_OR_RETURN(DampSearchResult search,
                           QuantizeGptqAutoDamp(input.weight, train, validation,
                                                recipe.damp.auto_grid, gptq));
    out.layer = std::move(search.result.layer);
    out.choices.damp_used = search.result.damp_used;
    out.choices.damp_retries = search.result.damp_retries;
    out.choices.damp_grid = std::move(search.damp_grid);
    out.choices.damp_validation_error = std::move(search.validation_error);
    return out;
  }
  gptq.damp_percent = input.settings.damp.fraction;
  QUANT_ASSIGN_OR_RETURN(GptqResult result,
                         QuantizeGptq(input.weight, stats.h, gptq));
  out.layer = std::move(result.layer);
  out.choices.damp_used = result.damp_used;
  out.choices.damp_retries = result.damp_retries;
  return out;
}

// Whether two layers' GPTQ runs share one factorization of H: fixed
// damping and the same grid. GPTQ's rows are independent given H (act-order,
// damping, U and every row's sweep depend on H and the row alone), and
// QuantizeGptqLayers runs each layer in its own arrays and tiles, so each
// layer gets exactly its own result (the same bytes as a task quantizing
// that layer alone), with one factorization instead of one per layer and
// the layers' tiles side by side on the threads.
bool StackableGptq(const LayerSettings& a, const LayerSettings& b) {
  return a.method == QuantMethod::kGptq && b.method == QuantMethod::kGptq &&
         !a.damp.automatic && !b.damp.automatic &&
         a.damp.fraction == b.damp.fraction && a.bits == b.bits &&
         a.group_size == b.group_size && a.grid == b.grid;
}

// The group's GPTQ layers `indices` (stackable), quantized on one factor.
absl::Status QuantizeStackedGptq(const std::vector<GroupLayerInput>& layers,
                                 const std::vector<int>& indices,
                                 const GroupStatistics& stats,
                                 const GroupQuantizeOptions& options,
                                 QuantizedGroup* group,
                                 std::vector<double>* seconds) {
  const GroupLayerInput& first = layers[indices[0]];
  int64_t rows = 0;
  std::string names;
  std::vector<ConstRowMatrixRef> weights;
  for (int i : indices) {
    rows += layers[i].weight.rows();
    absl::StrAppend(&names, names.empty() ? "" : "+", layers[i].name);
    weights.push_back(layers[i].weight);
  }
  GptqOptions gptq;
  gptq.grid = GridForSettings(first.settings);
  gptq.act_order = options.recipe->act_order;
  gptq.static_groups = options.recipe->static_groups;
  gptq.layer_name = names;
  gptq.pool = options.pool;
  gptq.damp_percent = first.settings.damp.fraction;
  const auto start = std::chrono::steady_clock::now();
  QUANT_ASSIGN_OR_RETURN(std::vector<GptqResult> results,
                         QuantizeGptqLayers(weights, stats.h, gptq));
  const double elapsed = SecondsSince(start);
  const double k = static_cast<double>(first.weight.cols());
  for (size_t j = 0; j < indices.size(); ++j) {
    const int i = indices[j];
    const int64_t n = layers[i].weight.rows();
    QuantizedGroupLayer& out = group->layers[i];
    out.name = layers[i].name;
    out.layer = std::move(results[j].layer);
    out.choices.damp_used = results[j].damp_used;
    out.choices.damp_retries = results[j].damp_retries;
    // Each layer's share of the run, by rows; one K³ factorization in all.
    const double share = static_cast<double>(n) / static_cast<double>(rows);
    out.choices.gptq_flops =
        2.0 * static_cast<double>(n) * k * k + share * k * k * k;
    out.choices.gptq_seconds = share * elapsed;
    (*seconds)[i] += share * elapsed;
  }
  return absl::OkStatus();
}

// Every AWQ layer of the group, stacked and quantized with one s.
absl::Status QuantizeAwqLayers(const std::vector<GroupLayerInput>& layers,
                               const std::vector<int>& awq_indices,
                               const GroupStatistics& stats,
                               const GroupQuantizeOptions& options,
                               QuantizedGroup* group) {
  const GridSpec grid = GridForSettings(layers[awq_indices[0]].settings);
  int64_t rows = 0;
  std::string names;
  for (int i : awq_indices) {
    if (!SameGrid(GridForSettings(layers[i].settings), grid)) {
      return absl::InvalidArgumentError(absl::StrCat(
          layers[i].name, " and ", layers[awq_indices[0]].name,
          " read the same input and both use AWQ, so they must share one "
          "input scale and therefore bits, group_size and grid; give them "
          "the same settings or another method"));
    }
    rows += layers[i].weight.rows();
    absl::StrAppend(&names, names.empty() ? "" : "+", layers[i].name);
  }
  RowMatrixF stacked(rows, layers[awq_indices[0]].weight.cols());
  int64_t at = 0;
  for (int i : awq_indices) {
    stacked.middleRows(at, layers[i].weight.rows()) = layers[i].weight;
    at += layers[i].weight.rows();
  }
  AwqOptions awq;
  awq.grid = grid;
  awq.layer_name = names;
  awq.clip_search = options.recipe->awq_clip_search;
  awq.alpha_grid.clear();
  if (options.awq_fold_available) {
    for (double a : options.recipe->awq_alpha_grid) {
      awq.alpha_grid.push_back(static_cast<float>(a));
    }
  } else {
    awq.alpha_grid = {0.0f};
  }
  QUANT_ASSIGN_OR_RETURN(
      AwqResult result,
      QuantizeAwq(stacked, stats.mean_abs, *stats.calibration, awq));
  group->awq_input_scales = result.input_scales;
  at = 0;
  for (int i : awq_indices) {
    const int64_t n = layers[i].weight.rows();
    QuantizedGroupLayer& out = group->layers[i];
    out.name = layers[i].name;
    out.layer = SliceRows(result.layer, at, n);
    out.choices.awq_alpha = result.alpha;
    at += n;
  }
  return absl::OkStatus();
}

// One layer's share of a split's Hessian: 2·T·K² over the group's layers.
double HessianShareFlops(int64_t tokens, int64_t k, size_t layers) {
  return 2.0 * static_cast<double>(tokens) * static_cast<double>(k) *
         static_cast<double>(k) / static_cast<double>(layers);
}

// Audits one quantized layer of the group against RTN on both splits (the
// calibration split only when stats has no held-out evaluator).
absl::Status AuditGroupLayer(const GroupLayerInput& input,
                             const GroupStatistics& stats, double seconds,
                             const QuantizedGroup& group, ThreadPool* pool,
                             QuantizedGroupLayer* out) {
  // AWQ's layer is W·diag(s) quantized; the audit compares in W's units.
  RowMatrixF effective;
  if (out->choices.awq_alpha.has_value()) {
    effective = out->layer.dequantized *
                group.awq_input_scales.cwiseInverse().asDiagonal();
  }
  const AuditInputs audit{input.name,
                          QuantMethodName(input.settings.method),
                          out->layer.grid,
                          input.weight,
                          out->choices.awq_alpha.has_value()
                              ? ConstRowMatrixRef(effective)
                              : ConstRowMatrixRef(out->layer.dequantized),
                          &*stats.calibration,
                          stats.heldout.has_value() ? &*stats.heldout : nullptr,
                          out->choices.damp_used,
                          out->choices.damp_retries,
                          &stats.diagnostics,
                          pool,
                          input.previous};
  if (stats.heldout.has_value()) {
    QUANT_ASSIGN_OR_RETURN(out->audit, AuditLayer(audit));
  } else {
    QUANT_ASSIGN_OR_RETURN(out->audit, AuditLayerCalibration(audit));
  }
  out->audit.seconds = seconds;
  return absl::OkStatus();
}

}  // namespace

GroupActivationStatistics::GroupActivationStatistics(
    int64_t k, const std::vector<GroupLayerInput>& layers,
    const GroupQuantizeOptions& options)
    : k_(k),
      validation_fraction_(options.auto_damp_validation_fraction),
      calibration_(k),
      heldout_(k),
      pool_(options.pool) {
  bool any_auto = false;
  bool any_awq = false;
  for (const GroupLayerInput& layer : layers) {
    any_auto |= layer.settings.method == QuantMethod::kGptq &&
                layer.settings.damp.automatic;
    any_awq |= layer.settings.method == QuantMethod::kAwq;
  }
  if (any_auto) split_.emplace(k, validation_fraction_);
  if (any_awq) mean_abs_.emplace(k);
}

GroupActivationStatistics::GroupActivationStatistics(int64_t k,
                                                     double validation_fraction,
                                                     bool split, bool mean_abs,
                                                     ThreadPool* pool)
    : k_(k),
      validation_fraction_(validation_fraction),
      calibration_(k),
      heldout_(k),
      pool_(pool) {
  if (split) split_.emplace(k, validation_fraction_);
  if (mean_abs) mean_abs_.emplace(k);
}

void GroupActivationStatistics::FewRows::Add(const ConstRowMatrixRef& rows,
                                             int64_t k) {
  if (overflowed_) return;
  if (rows_.rows() + rows.rows() > k) {
    overflowed_ = true;
    rows_ = RowMatrixF();
    return;
  }
  const int64_t at = rows_.rows();
  rows_.conservativeResize(at + rows.rows(), rows.cols());
  rows_.middleRows(at, rows.rows()) = rows;
}

void GroupActivationStatistics::FewRows::Merge(const FewRows& next, int64_t k) {
  if (next.overflowed_) {
    overflowed_ = true;
    rows_ = RowMatrixF();
    return;
  }
  if (next.rows_.rows() > 0) Add(next.rows_, k);
}

void GroupActivationStatistics::StartCalibrationAt(int64_t first_token) {
  if (split_.has_value()) split_.emplace(k_, validation_fraction_, first_token);
}

absl::StatusOr<GroupActivationStatistics*> GroupActivationStatistics::Target(
    Split split, int64_t shard) {
  if (current_shard_ == shard && current_split_ == split) {
    return open_ != nullptr ? open_.get() : this;
  }
  QUANT_RETURN_IF_ERROR(CloseShards());
  int64_t& last = last_shard_[split == Split::kCalibration ? 0 : 1];
  if (shard <= last) {
    return absl::InvalidArgumentError(
        absl::StrCat("activation statistics: shard ", shard, " of the ",
                     split == Split::kCalibration ? "calibration" : "held-out",
                     " split comes after shard ", last));
  }
  last = shard;
  current_split_ = split;
  current_shard_ = shard;
  const HessianAccumulator& totals =
      split == Split::kCalibration ? calibration_ : heldout_;
  // The first shard with tokens is added to zero totals: the same bytes as
  // summing it apart and adding it to zero.
  if (totals.token_count() == 0) return this;
  open_.reset(new GroupActivationStatistics(k_, validation_fraction_,
                                            split_.has_value(),
                                            mean_abs_.has_value(), pool_));
  open_->keep_few_rows_ = keep_few_rows_;
  if (split_.has_value()) open_->StartCalibrationAt(split_->next_token());
  return open_.get();
}

absl::Status GroupActivationStatistics::CloseShards() {
  if (open_ == nullptr) return absl::OkStatus();
  std::unique_ptr<GroupActivationStatistics> shard = std::move(open_);
  current_shard_ = -1;
  return MergeShard(*shard);
}

absl::Status GroupActivationStatistics::MergeShard(
    const GroupActivationStatistics& next) {
  if (next.k_ != k_ || next.split_.has_value() != split_.has_value() ||
      next.mean_abs_.has_value() != mean_abs_.has_value()) {
    return absl::InvalidArgumentError(
        "activation statistics: merging a shard gathered for other layers");
  }
  if (next.open_ != nullptr || open_ != nullptr) {
    return absl::FailedPreconditionError(
        "activation statistics: merging with a shard still open");
  }
  const auto start = std::chrono::steady_clock::now();
  if (next.calibration_.token_count() > 0) {
    // First: it checks the shard starts where the totals end, and adds
    // nothing when it does not.
    if (split_.has_value()) QUANT_RETURN_IF_ERROR(split_->Merge(*next.split_));
    QUANT_RETURN_IF_ERROR(calibration_.Merge(next.calibration_));
    if (mean_abs_.has_value()) {
      QUANT_RETURN_IF_ERROR(mean_abs_->Merge(*next.mean_abs_));
    }
  }
  if (next.heldout_.token_count() > 0) {
    QUANT_RETURN_IF_ERROR(heldout_.Merge(next.heldout_));
  }
  if (keep_few_rows_) {
    calibration_rows_.Merge(next.calibration_rows_, k_);
    heldout_rows_.Merge(next.heldout_rows_, k_);
  }
  seconds_ += next.seconds_ + SecondsSince(start);
  return absl::OkStatus();
}

absl::Status GroupActivationStatistics::RestoreShard(ShardSums* sums) {
  const HessianAccumulator& calibration = sums->calibration;
  const HessianAccumulator& heldout = sums->heldout;
  const std::optional<SplitHessianAccumulator>& split = sums->split;
  const std::optional<ActivationStatsAccumulator>& mean_abs = sums->mean_abs;
  if (calibration_.token_count() != 0 || heldout_.token_count() != 0 ||
      open_ != nullptr || keep_few_rows_) {
    return absl::FailedPreconditionError(
        "activation statistics: a shard is restored only into empty "
        "statistics");
  }
  auto mismatch = [&](const char* what, int64_t got) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shard statistics: ", what, " has K = ", got, ", the group's is ", k_));
  };
  if (calibration.k() != k_) return mismatch("calibration", calibration.k());
  if (heldout.k() != k_) return mismatch("heldout", heldout.k());
  if (split.has_value() != split_.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shard statistics: the group's layers ",
        split_.has_value() ? "use" : "do not use", " damp: auto but the shard ",
        split.has_value() ? "has" : "lacks",
        " its split.train/split.validation sums"));
  }
  if (mean_abs.has_value() != mean_abs_.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shard statistics: the group's layers ",
        mean_abs_.has_value() ? "use" : "do not use", " AWQ but the shard ",
        mean_abs.has_value() ? "has" : "lacks", " its mean_abs sums"));
  }
  if (split.has_value()) {
    if (split->train().k() != k_) return mismatch("split", split->train().k());
    if (split->validation_fraction() != validation_fraction_) {
      return absl::InvalidArgumentError(
          absl::StrCat("shard statistics: validation fraction ",
                       split->validation_fraction(), ", the group's is ",
                       validation_fraction_));
    }
    if (split->next_token() - split->first_token() !=
        calibration.token_count()) {
      return absl::InvalidArgumentError(
          absl::StrCat("shard statistics: the split covers ",
                       split->next_token() - split->first_token(),
                       " tokens, calibration ", calibration.token_count()));
    }
  }
  if (mean_abs.has_value()) {
    if (mean_abs->sum_abs().size() != k_) {
      return mismatch("mean_abs", mean_abs->sum_abs().size());
    }
    if (mean_abs->token_count() != calibration.token_count()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "shard statistics: mean_abs over ", mean_abs->token_count(),
          " tokens, calibration over ", calibration.token_count()));
    }
  }
  calibration_ = std::move(sums->calibration);
  heldout_ = std::move(sums->heldout);
  if (split_.has_value()) split_ = std::move(*sums->split);
  if (mean_abs_.has_value()) mean_abs_ = std::move(*sums->mean_abs);
  return absl::OkStatus();
}

absl::Status GroupActivationStatistics::AddCalibration(
    const ConstRowMatrixRef& rows, int64_t shard) {
  QUANT_ASSIGN_OR_RETURN(GroupActivationStatistics * target,
                         Target(Split::kCalibration, shard));
  return target->AddCalibrationRows(rows);
}

absl::Status GroupActivationStatistics::AddHeldout(
    const ConstRowMatrixRef& rows, int64_t shard) {
  QUANT_ASSIGN_OR_RETURN(GroupActivationStatistics * target,
                         Target(Split::kHeldout, shard));
  return target->AddHeldoutRows(rows);
}

absl::Status GroupActivationStatistics::AddCalibrationRows(
    const ConstRowMatrixRef& rows) {
  const auto start = std::chrono::steady_clock::now();
  QUANT_RETURN_IF_ERROR(calibration_.Add(rows, pool_));
  if (keep_few_rows_) calibration_rows_.Add(rows, k_);
  if (split_.has_value()) QUANT_RETURN_IF_ERROR(split_->Add(rows, pool_));
  if (mean_abs_.has_value()) QUANT_RETURN_IF_ERROR(mean_abs_->Add(rows));
  seconds_ += SecondsSince(start);
  return absl::OkStatus();
}

absl::Status GroupActivationStatistics::AddHeldoutRows(
    const ConstRowMatrixRef& rows) {
  const auto start = std::chrono::steady_clock::now();
  QUANT_RETURN_IF_ERROR(heldout_.Add(rows, pool_));
  if (keep_few_rows_) heldout_rows_.Add(rows, k_);
  seconds_ += SecondsSince(start);
  return absl::OkStatus();
}

GridSpec GridForSettings(const LayerSettings& settings) {
  GridSpec grid;
  grid.kind = ToGridKind(settings.grid);
  grid.bits = settings.bits;
  grid.group_size = settings.group_size;
  grid.f16_scales = true;
  return grid;
}

absl::StatusOr<QuantizedGroup> QuantizeLayerGroup(
    const std::vector<GroupLayerInput>& layers,
    const GroupActivationStatistics& statistics,
    const GroupQuantizeOptions& options) {
  if (options.recipe == nullptr) {
    return absl::InvalidArgumentError("QuantizeLayerGroup: no recipe");
  }
  QuantizedGroup group;
  if (layers.empty()) return group;
  const int64_t k = statistics.k();
  for (const GroupLayerInput& layer : layers) {
    if (layer.weight.cols() != k) {
      return absl::InvalidArgumentError(
          absl::StrCat(layer.name, ": weight has ", layer.weight.cols(),
                       " input columns but the group's activations have ", k));
    }
  }
  const auto start = std::chrono::steady_clock::now();
  QUANT_ASSIGN_OR_RETURN(
      GroupStatistics stats,
      FinishStatistics(statistics, options.pool, options.audit_heldout));
  const double statistics_seconds = statistics.seconds() + SecondsSince(start);

  group.layers.resize(layers.size());
  std::vector<double> seconds(
      layers.size(), statistics_seconds / static_cast<double>(layers.size()));
  std::vector<int> awq_indices;
  std::vector<int> stacked_indices;  // GPTQ layers run as one (see above).
  std::vector<int> single_indices;   // The rest: each layer on its own.
  for (size_t i = 0; i < layers.size(); ++i) {
    const LayerSettings& settings = layers[i].settings;
    if (settings.method == QuantMethod::kAwq) {
      awq_indices.push_back(static_cast<int>(i));
    } else if (StackableGptq(settings, settings) &&
               (stacked_indices.empty() ||
                StackableGptq(layers[stacked_indices[0]].settings, settings))) {
      stacked_indices.push_back(static_cast<int>(i));
    } else {
      single_indices.push_back(static_cast<int>(i));
    }
  }
  if (!stacked_indices.empty()) {
    QUANT_RETURN_IF_ERROR(QuantizeStackedGptq(layers, stacked_indices, stats,
                                              options, &group, &seconds));
  }
  std::vector<absl::Status> layer_status(layers.size());
  ParallelFor(options.pool, static_cast<int64_t>(single_indices.size()),
              [&](int64_t j) {
                const int i = single_indices[j];
                const auto layer_start = std::chrono::steady_clock::now();
                absl::StatusOr<QuantizedGroupLayer> quantized =
                    QuantizeOne(layers[i], stats, options);
                if (!quantized.ok()) {
                  layer_status[i] = quantized.status();
                  return;
                }
                group.layers[i] = *std::move(quantized);
                const double layer_seconds = SecondsSince(layer_start);
                seconds[i] += layer_seconds;
                if (layers[i].settings.method == QuantMethod::kGptq) {
                  const double n = static_cast<double>(layers[i].weight.rows());
                  const double kk = static_cast<double>(k);
                  group.layers[i].choices.gptq_flops =
                      2.0 * n * kk * kk + kk * kk * kk;
                  group.layers[i].choices.gptq_seconds = layer_seconds;
                }
              });
  // The first failure in layer order, whatever thread met it first.
  for (const absl::Status& status : layer_status) {
    QUANT_RETURN_IF_ERROR(status);
  }
  if (!awq_indices.empty()) {
    const auto awq_start = std::chrono::steady_clock::now();
    QUANT_RETURN_IF_ERROR(
        QuantizeAwqLayers(layers, awq_indices, stats, options, &group));
    const double each =
        SecondsSince(awq_start) / static_cast<double>(awq_indices.size());
    for (int i : awq_indices) seconds[i] += each;
  }

  // Both splits' Hessians, shared evenly by the group's layers (the
  // held-out one's share added by AuditGroupHeldout when it comes later).
  for (size_t i = 0; i < layers.size(); ++i) {
    MethodChoices& choices = group.layers[i].choices;
    choices.hessian_flops =
        HessianShareFlops(statistics.calibration_tokens(), k, layers.size());
    if (options.audit_heldout) {
      choices.hessian_flops +=
          HessianShareFlops(statistics.heldout_tokens(), k, layers.size());
    }
    choices.hessian_seconds =
        statistics_seconds / static_cast<double>(layers.size());
  }
  std::vector<absl::Status> audit_status(layers.size());
  ForEachLayerAudit(options.pool, layers.size(), [&](int64_t i) {
    audit_status[i] = AuditGroupLayer(layers[i], stats, seconds[i], group,
                                      options.pool, &group.layers[i]);
  });
  for (const absl::Status& status : audit_status) {
    QUANT_RETURN_IF_ERROR(status);
  }
  return group;
}

absl::Status AuditGroupHeldout(const std::vector<GroupLayerInput>& layers,
                               const std::vector<PendingHeldoutAudit>& pending,
                               const HessianAccumulator& heldout,
                               ThreadPool* pool) {
  if (pending.size() != layers.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("held-out audit: ", layers.size(), " layers but ",
                     pending.size(), " results"));
  }
  if (layers.empty()) return absl::OkStatus();
  for (size_t i = 0; i < layers.size(); ++i) {
    const PendingHeldoutAudit& p = pending[i];
    if (layers[i].settings.method == QuantMethod::kAwq) {
      return absl::FailedPreconditionError(absl::StrCat(
          layers[i].name,
          ": an AWQ layer is audited in its reduce, with its group's input "
          "scale"));
    }
    if (p.layer == nullptr || p.choices == nullptr || p.audit == nullptr ||
        !p.audit->heldout_pending) {
      return absl::FailedPreconditionError(absl::StrCat(
          layers[i].name, ": its audit has no held-out part left to measure"));
    }
    if (heldout.k() != layers[i].weight.cols()) {
      return absl::InvalidArgumentError(absl::StrCat(
          layers[i].name, ": weight has ", layers[i].weight.cols(),
          " input columns but the held-out statistics have ", heldout.k()));
    }
  }
  QUANT_ASSIGN_OR_RETURN(const OutputErrorEvaluator evaluator,
                         OutputErrorEvaluator::FromHessian(
                             heldout.Finish(), heldout.token_count()));
  std::vector<absl::Status> status(layers.size());
  ForEachLayerAudit(pool, layers.size(), [&](int64_t i) {
    const GroupLayerInput& input = layers[i];
    const PendingHeldoutAudit& p = pending[i];
    const AuditInputs in{input.name,
                         QuantMethodName(input.settings.method),
                         p.layer->grid,
                         input.weight,
                         p.layer->dequantized,
                         nullptr,
                         &evaluator,
                         0.0,
                         0,
                         nullptr,
                         pool,
                         input.previous};
    status[i] = AddHeldoutAudit(in, AuditOptions(), p.audit);
  });
  for (const absl::Status& s : status) QUANT_RETURN_IF_ERROR(s);
  for (const PendingHeldoutAudit& p : pending) {
    p.choices->hessian_flops +=
        HessianShareFlops(heldout.token_count(), heldout.k(), layers.size());
  }
  return absl::OkStatus();
}

}  // namespace quant

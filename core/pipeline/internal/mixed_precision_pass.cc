// The mixed-precision selection pass; see mixed_precision_pass.h.
#include "core/pipeline/internal/mixed_precision_pass.h"

#include <algorithm>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/file_util.h"
#include "core/base/status_macros.h"
#include "core/base/strict_json.h"
#include "core/eval/next_token_metrics.h"
#include "core/forward/block_forward.h"
#include "core/forward/outer_weights.h"
#include "core/forward/rope.h"
#include "core/pipeline/layer_group_quantizer.h"
#include "core/quant/rtn.h"

namespace quant {
namespace pipeline_internal {
namespace {

absl::StatusOr<HiddenStates> ReadAll(const HiddenStateSource& source) {
  HiddenStates states;
  states.seq_len = source.seq_len();
  states.lengths = source.lengths();
  QUANT_ASSIGN_OR_RETURN(states.rows, source.Read({0, source.sequences()}));
  return states;
}

// The probe windows: the first held-out windows whose reference logits fit
// kProbeLogitBytes (at least one), at most kMaxProbeWindows.
int ProbeWindows(const TokenWindows& heldout, int64_t vocab) {
  const int64_t per_window = static_cast<int64_t>(heldout.seq_len) * vocab * 4;
  int64_t windows =
      per_window > 0 ? kProbeLogitBytes / per_window : kMaxProbeWindows;
  windows = std::clamp<int64_t>(windows, 1, kMaxProbeWindows);
  return static_cast<int>(
      std::min<int64_t>(windows, static_cast<int64_t>(heldout.lengths.size())));
}

// The next token of each probe row; -1 for padding and each window's last
// real position (nothing to predict, so not scored).
std::vector<int32_t> ProbeTargets(const TokenWindows& heldout, int windows) {
  std::vector<int32_t> targets;
  targets.reserve(static_cast<size_t>(windows) * heldout.seq_len);
  for (int w = 0; w < windows; ++w) {
    const std::vector<int32_t>& sequence = heldout.sequences[w];
    for (int t = 0; t < heldout.seq_len; ++t) {
      targets.push_back(t + 1 < heldout.lengths[w] ? sequence[t + 1] : -1);
    }
  }
  return targets;
}

// The plan's settings of block `block` with `unit`'s layers at `candidate`.
void SetCandidate(const SettingGroupSelection& unit,
                  const PrecisionCandidate& candidate,
                  std::map<LayerType, LayerSettings>* settings) {
  for (auto& [type, s] : *settings) {
    if (!unit.Contains(s.name)) continue;
    s.bits = candidate.bits;
    s.group_size = candidate.group_size;
  }
}

// The index of `candidate` in `unit`'s candidates; -1 when the format
// cannot store the group at it.
int IndexOf(const SettingGroupSelection& unit,
            const PrecisionCandidate& candidate) {
  for (int i = 0; i < static_cast<int>(unit.candidates.size()); ++i) {
    if (unit.candidates[i].setting == candidate) return i;
  }
  return -1;
}

// The index of the cheapest quantized candidate of `unit`.
int CheapestQuantized(const SettingGroupSelection& unit) {
  int best = -1;
  for (int c = 0; c < static_cast<int>(unit.candidates.size()); ++c) {
    if (unit.candidates[c].setting.keep_float) continue;
    if (best < 0 ||
        unit.candidates[c].cost_bits < unit.candidates[best].cost_bits) {
      best = c;
    }
  }
  return best;
}

}  // namespace

std::string MixedPrecisionPath(const std::string& work_dir) {
  return JoinPath(work_dir, "mixed_precision.json");
}

absl::StatusOr<MixedPrecisionSelection> MeasureMixedPrecision(
    const JobTaskContext& context, const JobInputs& inputs,
    const TaskControl& control) {
  auto stage = [&](const std::string& what) {
    if (control.on_stage) control.on_stage(what);
  };
  auto cancelled = [&] {
    return control.cancelled != nullptr && control.cancelled->load();
  };
  const Recipe& recipe = context.recipe;
  const ModelConfig& config = inputs.checkpoint->config();
  const Checkpoint& checkpoint = *inputs.checkpoint;
  QUANT_ASSIGN_OR_RETURN(MixedPrecisionSelection selection,
                         PlanMixedPrecision(config, recipe, inputs.plan));
  const std::vector<PrecisionCandidate> candidates =
      PrecisionCandidates(recipe);
  // Every candidate is measured on the unquantized model's activations.
  Recipe independent = recipe;
  independent.propagation = Propagation::kIndependent;

  stage("mixed precision: embedding the calibration and held-out windows");
  std::unique_ptr<HiddenStateSource> cal_source, held_source;
  QUANT_RETURN_IF_ERROR(EmbedEnteringStates(inputs, "", "", context.file_system,
                                            &cal_source, &held_source));
  QUANT_ASSIGN_OR_RETURN(HiddenStates calibration, ReadAll(*cal_source));
  QUANT_ASSIGN_OR_RETURN(HiddenStates heldout, ReadAll(*held_source));
  cal_source.reset();
  held_source.reset();

  // The probe: the unquantized model's states entering every block and its
  // logits, on the first held-out windows.
  QUANT_ASSIGN_OR_RETURN(const OuterWeights outer,
                         LoadOuterWeights(checkpoint));
  const TokenWindows& held_windows = inputs.split.heldout;
  const int probe_windows =
      ProbeWindows(held_windows, outer.output_projection().rows());
  const int seq_len = heldout.seq_len;
  const int64_t probe_rows = static_cast<int64_t>(probe_windows) * seq_len;
  const std::vector<int32_t> targets =
      ProbeTargets(held_windows, probe_windows);
  const int blocks = config.num_hidden_layers;
  const RopeTable rope(config, std::max(calibration.seq_len, seq_len));
  stage("mixed precision: the unquantized model on the probe windows");
  std::vector<RowMatrixF> probe_in(blocks + 1);
  probe_in[0] = heldout.rows.topRows(probe_rows);
  for (int b = 0; b < blocks; ++b) {
    QUANT_ASSIGN_OR_RETURN(const BlockWeights weights,
                           LoadCheckedBlock(checkpoint, b));
    probe_in[b + 1] = RunBlock(config, weights, rope, seq_len, probe_in[b]);
  }
  const RowMatrixF reference_logits =
      FinalLogits(outer, config.rms_norm_eps, probe_in[blocks]);
  probe_in[blocks].resize(0, 0);
  for (int32_t t : targets) selection.probe_tokens += t >= 0 ? 1 : 0;
  selection.probe_windows = probe_windows;

  // The groups of each block, by index into selection.groups.
  std::vector<std::vector<int>> block_units(blocks);
  for (int g = 0; g < static_cast<int>(selection.groups.size()); ++g) {
    block_units[selection.groups[g].block].push_back(g);
  }
  for (int b = 0; b < blocks; ++b) {
    if (cancelled()) return absl::CancelledError("task cancelled");
    QUANT_ASSIGN_OR_RETURN(BlockWeights weights,
                           LoadBlockWeights(checkpoint, b));
    if (block_units[b].empty()) {
      // Nothing to choose here; only carry the states on.
      for (HiddenStates* split : {&calibration, &heldout}) {
        split->rows =
            RunBlock(config, weights, rope, split->seq_len, split->rows);
      }
      continue;
    }
    // Each candidate's error, and the RTN error of each group's cheapest.
    std::vector<double> probe_errors(selection.groups.size(), 0.0);
    HiddenStates next_calibration, next_heldout;
    for (size_t c = 0; c < candidates.size(); ++c) {
      if (candidates[c].keep_float) continue;
      stage(absl::StrCat("mixed precision: block ", b, " of ", blocks, " at ",
                         DescribeCandidate(candidates[c])));
      // Groups the format cannot store at this candidate keep the plan's
      // settings (and are not read below).
      std::map<LayerType, LayerSettings> settings = inputs.plan.blocks[b];
      for (int g : block_units[b]) {
        if (IndexOf(selection.groups[g], candidates[c]) >= 0) {
          SetCandidate(selection.groups[g], candidates[c], &settings);
        }
      }
      BlockTaskInput input =
          MakeBlockTaskInput(inputs, independent, b, weights);
      input.settings = std::move(settings);
      const MemoryHiddenStateSource cal_view(&calibration);
      const MemoryHiddenStateSource held_view(&heldout);
      input.calibration_source = &cal_view;
      input.heldout_source = &held_view;
      input.threads = context.threads;
      input.file_system = context.file_system;
      input.cancelled = control.cancelled;
      QUANT_ASSIGN_OR_RETURN(BlockTaskOutput output, RunBlockTask(input));
      for (int g : block_units[b]) {
        SettingGroupSelection& unit = selection.groups[g];
        const int index = IndexOf(unit, candidates[c]);
        if (index < 0) continue;
        const bool cheapest = CheapestQuantized(unit) == index;
        for (const LayerResult& layer : output.layers) {
          if (!layer.quantized || !unit.Contains(layer.name)) continue;
          const double rows = static_cast<double>(layer.layer.rows);
          unit.candidates[index].error +=
              layer.audit.method_heldout.output_mse * rows;
          if (cheapest) {
            probe_errors[g] += layer.audit.rtn_heldout.output_mse * rows;
          }
        }
      }
      if (next_calibration.rows.size() == 0) {
        // Independent propagation: the unquantized block's output.
        next_calibration = std::move(output.calibration_out);
        next_heldout = std::move(output.heldout_out);
      }
    }

    // Sensitivity: each group alone at its cheapest candidate by RTN, the
    // rest of the model unquantized.
    stage(absl::StrCat("mixed precision: block ", b, " of ", blocks,
                       ", sensitivity probes"));
    std::vector<RowMatrixF> perturbed;
    for (int g : block_units[b]) {
      const SettingGroupSelection& unit = selection.groups[g];
      const PrecisionCandidate& cheapest =
          unit.candidates[CheapestQuantized(unit)].setting;
      BlockWeights probe = weights;
      for (auto& [type, s] : inputs.plan.blocks[b]) {
        if (!unit.Contains(s.name)) continue;
        LayerSettings at = s;
        at.bits = cheapest.bits;
        at.group_size = cheapest.group_size;
        QUANT_ASSIGN_OR_RETURN(QuantizedLayer rtn,
                               QuantizeRtn(weights.Linear(type).weight,
                                           GridForSettings(at), s.name));
        probe.linear[type].weight = std::move(rtn.dequantized);
      }
      perturbed.push_back(RunBlock(config, probe, rope, seq_len, probe_in[b]));
    }
    for (int later = b + 1; later < blocks; ++later) {
      QUANT_ASSIGN_OR_RETURN(const BlockWeights after,
                             LoadBlockWeights(checkpoint, later));
      for (RowMatrixF& rows : perturbed) {
        rows = RunBlock(config, after, rope, seq_len, rows);
      }
    }
    for (size_t i = 0; i < block_units[b].size(); ++i) {
      SettingGroupSelection& unit = selection.groups[block_units[b][i]];
      const RowMatrixF logits =
          FinalLogits(outer, config.rms_norm_eps, perturbed[i]);
      NextTokenMetricsAccumulator kl;
      QUANT_RETURN_IF_ERROR(kl.Add(reference_logits, logits, targets));
      unit.probe_kl = std::max(0.0, kl.Result().mean_kl);
      unit.probe_error = probe_errors[block_units[b][i]];
      unit.sensitivity =
          unit.probe_error > 0.0 ? unit.probe_kl / unit.probe_error : 0.0;
    }
    calibration = std::move(next_calibration);
    heldout = std::move(next_heldout);
    probe_in[b].resize(0, 0);
  }
  stage("mixed precision: choosing each group's setting");
  QUANT_RETURN_IF_ERROR(SolveMixedPrecision(&selection));
  return selection;
}

absl::StatusOr<MixedPrecisionSelection> ReadJobMixedPrecision(
    const JobTaskContext& context, const JobInputs& inputs) {
  const std::string path = MixedPrecisionPath(context.work_dir);
  if (!FileExists(path)) {
    return absl::FailedPreconditionError(
        absl::StrCat("the job's mixed-precision selection is not in ", path));
  }
  QUANT_ASSIGN_OR_RETURN(const std::string text,
                         context.file_system->ReadFile(path, size_t{64} << 20));
  const nlohmann::json json = ParseJsonOrDiscarded(text);
  if (json.is_discarded()) {
    return absl::DataLossError(absl::StrCat(path, ": not valid JSON"));
  }
  absl::StatusOr<MixedPrecisionSelection> selection =
      MixedPrecisionFromJson(json);
  if (!selection.ok()) {
    return absl::DataLossError(
        absl::StrCat(path, ": ", selection.status().message()));
  }
  QUANT_ASSIGN_OR_RETURN(const MixedPrecisionSelection planned,
                         PlanMixedPrecision(inputs.checkpoint->config(),
                                            context.recipe, inputs.plan));
  absl::Status matches = CheckSelectionMatchesPlan(*selection, planned);
  if (!matches.ok()) {
    return absl::DataLossError(absl::StrCat(path, ": ", matches.message()));
  }
  return selection;
}

absl::StatusOr<MixedPrecisionSelection> JobMixedPrecision(
    const JobTaskContext& context, const JobInputs& inputs,
    const TaskControl& control) {
  if (FileExists(MixedPrecisionPath(context.work_dir))) {
    return ReadJobMixedPrecision(context, inputs);
  }
  QUANT_ASSIGN_OR_RETURN(MixedPrecisionSelection selection,
                         MeasureMixedPrecision(context, inputs, control));
  QUANT_RETURN_IF_ERROR(WriteFileAtomically(
      MixedPrecisionPath(context.work_dir),
      MixedPrecisionToJson(selection).dump(1) + "\n", context.file_system));
  return selection;
}

}  // namespace pipeline_internal
}  // namespace quant

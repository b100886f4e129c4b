// One decoder block through its four layer groups; see block_task.h.
#include "core/pipeline/block_task.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/forward/block_forward.h"
#include "core/forward/rope.h"
#include "core/model/linear_layers.h"
#include "core/pipeline/layer_packing.h"

namespace quant {
namespace {

// A group's input on both splits, all rows (padding included).
struct GroupInputs {
  RowMatrixF calibration;
  RowMatrixF heldout;
};

class BlockRunner {
 public:
  BlockRunner(const BlockTaskInput& input, const LayerProgress& progress)
      : input_(input),
        config_(*input.config),
        recipe_(*input.recipe),
        progress_(progress),
        rope_(config_,
              std::max(input.calibration.seq_len, input.heldout.seq_len)),
        working_(input.weights) {}

  absl::StatusOr<BlockTaskOutput> Run();

 private:
  // The weights the next group's inputs are computed with.
  const BlockWeights& Source() const {
    return recipe_.propagation == Propagation::kSequential ? working_
                                                           : input_.weights;
  }
  DType StoredDType(const std::string& name) const {
    auto it = input_.stored_dtypes.find(name);
    return it == input_.stored_dtypes.end() ? DType::kF32 : it->second;
  }
  LayerResult* Result(const std::string& type);

  absl::Status PlanLayers();
  absl::Status QuantizeGroup(const std::vector<std::string>& types,
                             const GroupInputs& inputs);
  absl::Status FoldAwqScales(const std::string& group,
                             const std::vector<std::string>& types,
                             const Eigen::VectorXf& s);
  // Divides output row c of `type` by s[c], in its scales when quantized.
  absl::Status DivideProducerRows(const std::string& type,
                                  const Eigen::VectorXf& s,
                                  const std::string& consumer);
  // Multiplies column k of an unquantized consumer's weight by s[k].
  void ScaleUnquantizedColumns(const std::string& type,
                               const Eigen::VectorXf& s);
  Eigen::VectorXf DivideNorm(const Eigen::VectorXf& norm,
                             const Eigen::VectorXf& s,
                             const std::string& tensor) const;
  absl::StatusOr<std::vector<PackedTensor>> BlockTensors() const;

  const BlockTaskInput& input_;
  const ModelConfig& config_;
  const Recipe& recipe_;
  const LayerProgress& progress_;
  RopeTable rope_;
  BlockWeights working_;
  std::vector<LinearLayerSpec> specs_;
  std::vector<LayerResult> results_;
};

LayerResult* BlockRunner::Result(const std::string& type) {
  for (LayerResult& r : results_) {
    if (r.type == type) return &r;
  }
  return nullptr;
}

absl::Status BlockRunner::PlanLayers() {
  specs_ = ListLinearLayers(config_, input_.weights.block);
  for (const LinearLayerSpec& spec : specs_) {
    auto it = input_.settings.find(spec.type);
    if (it == input_.settings.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("block task: no settings for ", spec.name));
    }
    if (!input_.weights.linear.count(spec.type)) {
      return absl::InvalidArgumentError(
          absl::StrCat("block task: no weights for ", spec.name));
    }
    LayerResult result;
    result.name = spec.name;
    result.type = spec.type;
    result.input_group = spec.input_group;
    result.settings = it->second;
    if (result.settings.keep_unquantized) {
      result.reason = result.settings.reason;
    } else {
      const std::string refusal =
          FormatRefusal(recipe_.format, spec.out_features, spec.in_features,
                        result.settings.bits, result.settings.group_size);
      if (!refusal.empty()) {
        result.reason =
            absl::StrCat("format ", OutputFormatName(recipe_.format),
                         " cannot hold it: ", refusal);
      }
    }
    results_.push_back(std::move(result));
  }
  return absl::OkStatus();
}

Eigen::VectorXf BlockRunner::DivideNorm(const Eigen::VectorXf& norm,
                                        const Eigen::VectorXf& s,
                                        const std::string& tensor) const {
  const DType dtype = StoredDType(tensor);
  Eigen::VectorXf out = norm.cwiseQuotient(s);
  for (Eigen::Index i = 0; i < out.size(); ++i) {
    out[i] = RoundTripThrough(out[i], dtype);
  }
  return out;
}

absl::Status BlockRunner::DivideProducerRows(const std::string& type,
                                             const Eigen::VectorXf& s,
                                             const std::string& consumer) {
  LayerResult* producer = Result(type);
  LinearWeights& linear = working_.linear[type];
  if (linear.weight.rows() != s.size()) {
    return absl::InternalError(absl::StrCat(
        "AWQ fold of ", consumer, " into ", producer->name, ": ", s.size(),
        " input scales for ", linear.weight.rows(), " rows"));
  }
  producer->absorbed_awq_scales_of = consumer;
  const DType bias_dtype = StoredDType(producer->name + ".bias");
  if (linear.bias.size() > 0) {
    for (Eigen::Index c = 0; c < s.size(); ++c) {
      linear.bias[c] = RoundTripThrough(linear.bias[c] / s[c], bias_dtype);
    }
  }
  if (!producer->quantized) {
    const DType dtype = StoredDType(producer->name + ".weight");
    for (Eigen::Index c = 0; c < s.size(); ++c) {
      for (Eigen::Index k = 0; k < linear.weight.cols(); ++k) {
        linear.weight(c, k) =
            RoundTripThrough(linear.weight(c, k) / s[c], dtype);
      }
    }
    return absl::OkStatus();
  }
  QuantizedLayer& layer = producer->layer;
  for (Eigen::Index c = 0; c < s.size(); ++c) {
    for (Eigen::Index g = 0; g < layer.scales.rows(); ++g) {
      layer.scales(g, c) =
          RoundTripThrough(layer.scales(g, c) / s[c], DType::kF16);
    }
    for (int64_t k = 0; k < layer.cols; ++k) {
      const int g = layer.g_idx[k];
      layer.dequantized(c, k) =
          layer.scales(g, c) *
          (static_cast<float>(layer.codes(c, k)) - layer.zeros(g, c));
    }
  }
  linear.weight = layer.dequantized;
  return absl::OkStatus();
}

void BlockRunner::ScaleUnquantizedColumns(const std::string& type,
                                          const Eigen::VectorXf& s) {
  LayerResult* result = Result(type);
  LinearWeights& linear = working_.linear[type];
  const DType dtype = StoredDType(result->name + ".weight");
  for (Eigen::Index r = 0; r < linear.weight.rows(); ++r) {
    for (Eigen::Index k = 0; k < linear.weight.cols(); ++k) {
      linear.weight(r, k) = RoundTripThrough(
          input_.weights.Linear(type).weight(r, k) * s[k], dtype);
    }
  }
}

absl::Status BlockRunner::FoldAwqScales(const std::string& group,
                                        const std::vector<std::string>& types,
                                        const Eigen::VectorXf& s) {
  const std::string prefix = BlockPrefix(input_.weights.block);
  std::string fold;
  if (group == kAttnIn) {
    fold = "input_layernorm";
    working_.input_norm =
        DivideNorm(working_.input_norm, s, prefix + "input_layernorm.weight");
  } else if (group == kMlpIn) {
    fold = "post_attention_layernorm";
    working_.post_attention_norm =
        DivideNorm(working_.post_attention_norm, s,
                   prefix + "post_attention_layernorm.weight");
  } else if (group == kAttnOut) {
    fold = "v_proj";
    QUANT_RETURN_IF_ERROR(DivideProducerRows("v_proj", s, "o_proj"));
  } else if (group == kMlpOut) {
    fold = "up_proj";
    QUANT_RETURN_IF_ERROR(DivideProducerRows("up_proj", s, "down_proj"));
  } else {
    return absl::InternalError(absl::StrCat("unknown input group ", group));
  }
  for (const std::string& type : types) {
    LayerResult* result = Result(type);
    if (result->quantized && result->choices.awq_alpha.has_value()) {
      result->awq_fold = fold;
    } else if (!result->quantized) {
      // Its input is now x / s as well: W·diag(s) keeps its output.
      ScaleUnquantizedColumns(type, s);
      result->awq_fold = absl::StrCat("shares the input scaled into ", fold,
                                      "; weight kept as W·diag(s)");
    }
  }
  return absl::OkStatus();
}

absl::Status BlockRunner::QuantizeGroup(const std::vector<std::string>& types,
                                        const GroupInputs& inputs) {
  if (input_.cancelled != nullptr && input_.cancelled->load()) {
    return absl::CancelledError(absl::StrCat(
        "block ", input_.weights.block, " cancelled before ", types.front()));
  }
  const RowMatrixF calibration =
      RealRows(inputs.calibration, input_.calibration.seq_len,
               input_.calibration.lengths);
  const RowMatrixF heldout =
      RealRows(inputs.heldout, input_.heldout.seq_len, input_.heldout.lengths);
  std::vector<GroupLayerInput> layers;
  std::vector<std::string> quantized_types;
  for (const std::string& type : types) {
    const LayerResult* result = Result(type);
    if (!result->reason.empty()) continue;
    layers.push_back({result->name, result->settings,
                      ConstRowMatrixRef(input_.weights.Linear(type).weight)});
    quantized_types.push_back(type);
  }
  const std::string group = Result(types[0])->input_group;
  GroupQuantizeOptions options;
  options.recipe = &recipe_;
  options.awq_fold_available =
      group != kAttnOut ||
      config_.num_key_value_heads == config_.num_attention_heads;
  QUANT_ASSIGN_OR_RETURN(
      QuantizedGroup quantized,
      QuantizeLayerGroup(layers, calibration, heldout, options));
  for (size_t i = 0; i < quantized_types.size(); ++i) {
    LayerResult* result = Result(quantized_types[i]);
    QuantizedGroupLayer& q = quantized.layers[i];
    // What the format cannot hold is found now, before later groups are
    // calibrated on this layer's output.
    absl::StatusOr<std::vector<PackedTensor>> trial =
        PackLayer(q.layer, result->name, recipe_);
    if (!trial.ok()) {
      if (trial.status().code() != absl::StatusCode::kFailedPrecondition) {
        return trial.status();
      }
      result->reason = std::string(trial.status().message());
      continue;
    }
    result->quantized = true;
    result->layer = std::move(q.layer);
    result->audit = std::move(q.audit);
    result->choices = std::move(q.choices);
    working_.linear[quantized_types[i]].weight = result->layer.dequantized;
  }
  if (quantized.awq_input_scales.size() > 0 && options.awq_fold_available) {
    QUANT_RETURN_IF_ERROR(
        FoldAwqScales(group, types, quantized.awq_input_scales));
  } else if (quantized.awq_input_scales.size() > 0) {
    // α = 0 only: s is all ones and there is nothing to fold.
    for (const std::string& type : types) {
      LayerResult* result = Result(type);
      if (result->choices.awq_alpha.has_value()) {
        result->awq_fold =
            "none: grouped-query attention shares value heads, so o_proj "
            "was searched at alpha 0 only";
      }
    }
  }
  if (progress_) {
    for (const std::string& type : types) progress_(*Result(type));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<PackedTensor>> BlockRunner::BlockTensors() const {
  const std::string prefix = BlockPrefix(input_.weights.block);
  std::vector<PackedTensor> tensors;
  auto add_vector = [&](const std::string& name,
                        const Eigen::VectorXf& v) -> absl::Status {
    QUANT_ASSIGN_OR_RETURN(
        PackedTensor t,
        FloatTensorAs(name, {v.size()},
                      std::vector<float>(v.data(), v.data() + v.size()),
                      StoredDType(name)));
    tensors.push_back(std::move(t));
    return absl::OkStatus();
  };
  QUANT_RETURN_IF_ERROR(
      add_vector(prefix + "input_layernorm.weight", working_.input_norm));
  QUANT_RETURN_IF_ERROR(add_vector(prefix + "post_attention_layernorm.weight",
                                   working_.post_attention_norm));
  if (config_.qk_norm) {
    QUANT_RETURN_IF_ERROR(
        add_vector(prefix + "self_attn.q_norm.weight", working_.q_norm));
    QUANT_RETURN_IF_ERROR(
        add_vector(prefix + "self_attn.k_norm.weight", working_.k_norm));
  }
  for (const LayerResult& result : results_) {
    const LinearWeights& linear = working_.Linear(result.type);
    if (result.quantized) {
      QUANT_ASSIGN_OR_RETURN(std::vector<PackedTensor> packed,
                             PackLayer(result.layer, result.name, recipe_));
      for (PackedTensor& t : packed) tensors.push_back(std::move(t));
    } else {
      const RowMatrixF& w = linear.weight;
      QUANT_ASSIGN_OR_RETURN(
          PackedTensor t,
          FloatTensorAs(result.name + ".weight", {w.rows(), w.cols()},
                        std::vector<float>(w.data(), w.data() + w.size()),
                        StoredDType(result.name + ".weight")));
      tensors.push_back(std::move(t));
    }
    if (linear.bias.size() > 0) {
      QUANT_RETURN_IF_ERROR(add_vector(result.name + ".bias", linear.bias));
    }
  }
  return tensors;
}

absl::Status CheckHidden(const char* what, const HiddenStates& h,
                         int64_t hidden_size) {
  const int64_t sequences = static_cast<int64_t>(h.lengths.size());
  if (h.seq_len <= 0 || sequences == 0 ||
      h.rows.rows() != sequences * h.seq_len || h.rows.cols() != hidden_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "block task: ", what, " hidden states are [", h.rows.rows(), ", ",
        h.rows.cols(), "] for ", sequences, " sequences of ", h.seq_len,
        " tokens and hidden size ", hidden_size));
  }
  for (int length : h.lengths) {
    if (length < 0 || length > h.seq_len) {
      return absl::InvalidArgumentError(
          absl::StrCat("block task: ", what, " sequence length ", length,
                       " outside [0, ", h.seq_len, "]"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<BlockTaskOutput> BlockRunner::Run() {
  QUANT_RETURN_IF_ERROR(
      CheckHidden("calibration", input_.calibration, config_.hidden_size));
  QUANT_RETURN_IF_ERROR(
      CheckHidden("held-out", input_.heldout, config_.hidden_size));
  QUANT_RETURN_IF_ERROR(PlanLayers());
  const HiddenStates& cal = input_.calibration;
  const HiddenStates& held = input_.heldout;

  GroupInputs attn_in{AttentionInput(config_, Source(), cal.rows),
                      AttentionInput(config_, Source(), held.rows)};
  QUANT_RETURN_IF_ERROR(QuantizeGroup({"q_proj", "k_proj", "v_proj"}, attn_in));

  GroupInputs context{
      AttentionContext(config_, Source(), rope_, cal.seq_len,
                       AttentionInput(config_, Source(), cal.rows)),
      AttentionContext(config_, Source(), rope_, held.seq_len,
                       AttentionInput(config_, Source(), held.rows))};
  QUANT_RETURN_IF_ERROR(QuantizeGroup({"o_proj"}, context));

  // Recomputed: o_proj (and in sequential mode v_proj's fold) changed.
  context.calibration =
      AttentionContext(config_, Source(), rope_, cal.seq_len,
                       AttentionInput(config_, Source(), cal.rows));
  context.heldout =
      AttentionContext(config_, Source(), rope_, held.seq_len,
                       AttentionInput(config_, Source(), held.rows));
  const RowMatrixF cal_residual =
      AttentionResidual(Source(), cal.rows, context.calibration);
  const RowMatrixF held_residual =
      AttentionResidual(Source(), held.rows, context.heldout);
  GroupInputs mlp_in{MlpInput(config_, Source(), cal_residual),
                     MlpInput(config_, Source(), held_residual)};
  QUANT_RETURN_IF_ERROR(QuantizeGroup({"gate_proj", "up_proj"}, mlp_in));

  GroupInputs mlp_hidden{
      MlpHidden(Source(), MlpInput(config_, Source(), cal_residual)),
      MlpHidden(Source(), MlpInput(config_, Source(), held_residual))};
  QUANT_RETURN_IF_ERROR(QuantizeGroup({"down_proj"}, mlp_hidden));

  BlockTaskOutput output;
  output.block = input_.weights.block;
  QUANT_ASSIGN_OR_RETURN(output.tensors, BlockTensors());
  output.calibration_out = {
      cal.seq_len, cal.lengths,
      RunBlock(config_, Source(), rope_, cal.seq_len, cal.rows)};
  output.heldout_out = {
      held.seq_len, held.lengths,
      RunBlock(config_, Source(), rope_, held.seq_len, held.rows)};
  output.effective = std::move(working_);
  output.layers = std::move(results_);
  return output;
}

}  // namespace

RowMatrixF RealRows(const ConstRowMatrixRef& rows, int seq_len,
                    const std::vector<int>& lengths) {
  int64_t total = 0;
  for (int length : lengths) total += length;
  RowMatrixF out(total, rows.cols());
  int64_t at = 0;
  for (size_t i = 0; i < lengths.size(); ++i) {
    out.middleRows(at, lengths[i]) =
        rows.middleRows(static_cast<int64_t>(i) * seq_len, lengths[i]);
    at += lengths[i];
  }
  return out;
}

absl::StatusOr<BlockTaskOutput> RunBlockTask(const BlockTaskInput& input,
                                             const LayerProgress& progress) {
  if (input.config == nullptr || input.recipe == nullptr) {
    return absl::InvalidArgumentError("block task: config and recipe needed");
  }
  BlockRunner runner(input, progress);
  return runner.Run();
}

}  // namespace quant

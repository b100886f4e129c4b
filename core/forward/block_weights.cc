// Reading one decoder block's weights into float32, dequantizing packed
// linear layers.
#include "core/forward/block_weights.h"

#include <optional>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/model/linear_layers.h"
#include "core/pack/packed_layer_reader.h"

namespace quant {

absl::StatusOr<Eigen::VectorXf> ReadVector(const Checkpoint& checkpoint,
                                           const std::string& name) {
  QUANT_ASSIGN_OR_RETURN(FloatTensor tensor, checkpoint.ReadFloat(name));
  if (tensor.shape.size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor \"", name, "\" has shape ", tensor.ShapeString(),
                     ", expected one dimension"));
  }
  return Eigen::Map<const Eigen::VectorXf>(tensor.data.data(), tensor.shape[0]);
}

absl::StatusOr<RowMatrixF> ReadMatrix(const Checkpoint& checkpoint,
                                      const std::string& name) {
  QUANT_ASSIGN_OR_RETURN(FloatTensor tensor, checkpoint.ReadFloat(name));
  if (tensor.shape.size() != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor \"", name, "\" has shape ", tensor.ShapeString(),
                     ", expected two dimensions"));
  }
  return Eigen::Map<const RowMatrixF>(tensor.data.data(), tensor.shape[0],
                                      tensor.shape[1]);
}

namespace {

// One linear layer's weight: dequantized when `packed` says it is stored
// packed, else read plain.
absl::StatusOr<RowMatrixF> ReadLinearWeight(
    const Checkpoint& checkpoint,
    const std::optional<PackedLayerReader>& packed,
    const LinearLayerSpec& spec) {
  LinearStorage storage = LinearStorage::kPlain;
  if (packed.has_value()) {
    QUANT_ASSIGN_OR_RETURN(storage, packed->Storage(spec.name));
  }
  if (storage != LinearStorage::kPacked) {
    return ReadMatrix(checkpoint, spec.weight_name());
  }
  QUANT_ASSIGN_OR_RETURN(
      FloatTensor weight,
      packed->Dequantize(spec.name, spec.out_features, spec.in_features));
  return RowMatrixF(Eigen::Map<const RowMatrixF>(
      weight.data.data(), spec.out_features, spec.in_features));
}

// The router (always plain: runtimes build it unquantized) and experts of
// a mixture-of-experts block.
absl::StatusOr<MoeMlpWeights> LoadMoeMlpWeights(
    const Checkpoint& checkpoint,
    const std::optional<PackedLayerReader>& packed, int block) {
  const ModelConfig& config = checkpoint.config();
  MoeMlpWeights moe;
  QUANT_ASSIGN_OR_RETURN(
      moe.router,
      ReadMatrix(checkpoint, RouterName(config, block) + ".weight"));
  moe.experts.resize(config.moe->num_experts);
  for (const LinearLayerSpec& spec : ListExpertLayers(config, block)) {
    QUANT_ASSIGN_OR_RETURN(moe.experts[spec.expert].Part(spec.type).weight,
                           ReadLinearWeight(checkpoint, packed, spec));
  }
  return moe;
}

}  // namespace

absl::StatusOr<BlockWeights> LoadBlockWeights(const Checkpoint& checkpoint,
                                              int block) {
  const ModelConfig& config = checkpoint.config();
  if (block < 0 || block >= config.num_hidden_layers) {
    return absl::OutOfRangeError(absl::StrCat(
        "block ", block, " is outside [0, ", config.num_hidden_layers, ")"));
  }
  const std::string prefix = BlockPrefix(block);
  BlockWeights weights;
  weights.block = block;
  QUANT_ASSIGN_OR_RETURN(
      weights.input_norm,
      ReadVector(checkpoint, prefix + "input_layernorm.weight"));
  QUANT_ASSIGN_OR_RETURN(
      weights.post_attention_norm,
      ReadVector(checkpoint, prefix + "post_attention_layernorm.weight"));
  if (config.qk_norm) {
    QUANT_ASSIGN_OR_RETURN(
        weights.q_norm,
        ReadVector(checkpoint, prefix + "self_attn.q_norm.weight"));
    QUANT_ASSIGN_OR_RETURN(
        weights.k_norm,
        ReadVector(checkpoint, prefix + "self_attn.k_norm.weight"));
  }
  // A packed checkpoint's reader also checks every plain layer against the
  // config (a layer the config quantizes must not be a plain .weight).
  std::optional<PackedLayerReader> packed;
  if (!checkpoint.quantization_config().is_null()) {
    QUANT_ASSIGN_OR_RETURN(
        packed, PackedLayerReader::Create(&checkpoint.tensors(),
                                          checkpoint.quantization_config()));
  }
  for (const LinearLayerSpec& spec : ListLinearLayers(config, block)) {
    LinearWeights linear;
    QUANT_ASSIGN_OR_RETURN(linear.weight,
                           ReadLinearWeight(checkpoint, packed, spec));
    if (spec.has_bias) {
      QUANT_ASSIGN_OR_RETURN(linear.bias,
                             ReadVector(checkpoint, spec.bias_name()));
    }
    weights.linear[spec.type] = std::move(linear);
  }
  if (config.IsMoeBlock(block)) {
    QUANT_ASSIGN_OR_RETURN(weights.moe,
                           LoadMoeMlpWeights(checkpoint, packed, block));
  }
  return weights;
}

}  // namespace quant

// The float32 weights of one decoder block, read from a checkpoint (plain or
// packed). Linear weights can be replaced (by quantized ones) between forward
// stages.
#ifndef QUANT_CORE_FORWARD_BLOCK_WEIGHTS_H_
#define QUANT_CORE_FORWARD_BLOCK_WEIGHTS_H_

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/model/checkpoint.h"
#include "core/model/linear_layers.h"
#include "core/quant/matrix_types.h"

namespace quant {

struct LinearWeights {
  RowMatrixF weight;     // [out N, in K]
  Eigen::VectorXf bias;  // Empty when the layer has none.
};

// One expert of a mixture-of-experts block: a SwiGLU MLP.
struct ExpertWeights {
  LinearWeights gate;  // qwen3_moe gate_proj, mixtral w1
  LinearWeights up;    // up_proj, w3
  LinearWeights down;  // down_proj, w2

  // gate, up or down by the layer type they play (kGateProj, kUpProj,
  // kDownProj).
  const LinearWeights& Part(LayerType type) const {
    return type == LayerType::kGateProj ? gate
           : type == LayerType::kUpProj ? up
                                        : down;
  }
  LinearWeights& Part(LayerType type) {
    return const_cast<LinearWeights&>(std::as_const(*this).Part(type));
  }
};

// The MLP of a mixture-of-experts block.
struct MoeMlpWeights {
  RowMatrixF router;  // [num_experts, hidden]: the "gate" linear, no bias.
  std::vector<ExpertWeights> experts;
};

struct BlockWeights {
  int block = 0;
  Eigen::VectorXf input_norm;           // input_layernorm.weight
  Eigen::VectorXf post_attention_norm;  // post_attention_layernorm.weight
  Eigen::VectorXf q_norm;               // qwen3 only, else empty
  Eigen::VectorXf k_norm;               // qwen3 only, else empty
  // Every linear layer of the block outside the experts, by type.
  std::map<LayerType, LinearWeights> linear;
  // Set for a mixture-of-experts block (ModelConfig::IsMoeBlock), whose
  // `linear` then holds only q, k, v and o.
  std::optional<MoeMlpWeights> moe;

  const LinearWeights& Linear(LayerType type) const { return linear.at(type); }
};

// Reads block `block` of `checkpoint` into float32. Linear layers the
// checkpoint stores packed are dequantized (core/pack/packed_layer_reader.h,
// which also checks each layer's storage against the quantization_config);
// their biases are read from `<layer>.bias` as for plain layers.
absl::StatusOr<BlockWeights> LoadBlockWeights(const Checkpoint& checkpoint,
                                              int block);

// Reads a 1-D or 2-D tensor as an Eigen object; errors name the tensor.
absl::StatusOr<Eigen::VectorXf> ReadVector(const Checkpoint& checkpoint,
                                           const std::string& name);
absl::StatusOr<RowMatrixF> ReadMatrix(const Checkpoint& checkpoint,
                                      const std::string& name);

}  // namespace quant

#endif  // QUANT_CORE_FORWARD_BLOCK_WEIGHTS_H_

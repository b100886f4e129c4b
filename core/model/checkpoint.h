// A Llama-family checkpoint directory (config.json plus model.safetensors, or
// shards with an index), opened and checked against the tensors its config
// implies before anything computes with it. Unquantized by default; on
// request also a packed one (GPTQ v1 or compressed-tensors pack-quantized),
// whose packed linear layers core/pack/packed_layer_reader.h dequantizes.
#ifndef QUANT_CORE_MODEL_CHECKPOINT_H_
#define QUANT_CORE_MODEL_CHECKPOINT_H_

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/base/file_system.h"
#include "core/base/tensor.h"
#include "core/io/safetensors.h"
#include "core/io/tensor_collection.h"
#include "core/model/linear_layers.h"
#include "core/model/model_config.h"
#include "nlohmann/json.hpp"

namespace quant {

struct CheckpointOptions {
  SafetensorsLimits limits;
  // Scan every expected tensor for NaN/Inf while opening. Touches every
  // weight byte, so it costs a full read of the checkpoint.
  bool check_finite = false;
  // Accept a config.json whose quantization_config is a packed format this
  // project reads (quant_method "gptq", or "compressed-tensors" with format
  // "pack-quantized"); each linear layer may then be stored as
  // `<layer>.weight` or as its packed tensors. Off by default: a quantizer's
  // source checkpoint must be unquantized. Evaluation opts in.
  bool allow_packed = false;
  // Reads config.json and the safetensors (and their index) through this
  // (not owned).
  FileSystem* file_system = FileSystem::Default();
};

class Checkpoint {
 public:
  // Loads `dir`/config.json and the safetensors, then checks that every
  // expected tensor exists with a floating-point dtype and the expected shape.
  // Errors name the directory, the tensor, and the expected and actual shape.
  // Tensors the architecture does not use (e.g. rotary inv_freq buffers, or
  // lm_head.weight beside tied embeddings) are listed, not rejected. A
  // checkpoint whose config has a quantization_config is refused unless
  // options.allow_packed is set and the format is one of the packed ones;
  // then every linear layer must have either `.weight` or (not both) the
  // tensors its format always stores (GPTQ: qweight, qzeros, scales, g_idx;
  // compressed-tensors: weight_packed, weight_scale, weight_shape). Their
  // dtypes, shapes and values are checked when the layer is read.
  static absl::StatusOr<std::unique_ptr<Checkpoint>> Open(
      const std::string& dir, const CheckpointOptions& options = {});

  const std::string& directory() const { return directory_; }
  const ModelConfig& config() const { return config_; }
  const TensorCollection& tensors() const { return *tensors_; }
  // In model order (see ListExpectedTensors); all present and well shaped.
  // The `.weight` of packed layers is left out.
  const std::vector<ExpectedTensor>& expected_tensors() const {
    return expected_;
  }
  // config.json's "quantization_config" block; null when there is none.
  const nlohmann::json& quantization_config() const {
    return quantization_config_;
  }
  // Full names of the linear layers stored packed (e.g.
  // "model.layers.0.self_attn.q_proj"), in model order.
  const std::vector<std::string>& packed_layers() const {
    return packed_layers_;
  }
  bool IsPacked(absl::string_view layer) const {
    return packed_set_.count(layer) > 0;
  }
  // Names present in the files but neither expected nor a packed layer's
  // tensor, sorted.
  const std::vector<std::string>& unexpected_tensors() const {
    return unexpected_;
  }

  // A tensor converted to float32; NotFound names a missing tensor.
  absl::StatusOr<FloatTensor> ReadFloat(absl::string_view name) const;

  // InvalidArgument (bad input: no retry helps) naming the tensor, the first
  // NaN/Inf element's index and which it is; NotFound when the tensor is
  // absent.
  absl::Status CheckFinite(absl::string_view name) const;
  // CheckFinite for every expected tensor, in model order, then for the
  // floating-point tensors (scales) of packed layers.
  absl::Status CheckAllFinite() const;

 private:
  Checkpoint() = default;

  std::string directory_;
  ModelConfig config_;
  std::unique_ptr<TensorCollection> tensors_;
  std::vector<ExpectedTensor> expected_;
  std::vector<std::string> unexpected_;
  nlohmann::json quantization_config_;
  std::vector<std::string> packed_layers_;
  std::set<std::string, std::less<>> packed_set_;
  std::vector<std::string> packed_tensors_;  // Every packed layer's tensors.
};

}  // namespace quant

#endif  // QUANT_CORE_MODEL_CHECKPOINT_H_

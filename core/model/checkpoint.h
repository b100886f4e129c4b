// An unquantized Llama-family checkpoint directory (config.json plus
// model.safetensors, or shards with an index), opened and checked against
// the tensors its config implies before anything computes with it.
#ifndef QUANT_CORE_MODEL_CHECKPOINT_H_
#define QUANT_CORE_MODEL_CHECKPOINT_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/base/tensor.h"
#include "core/io/safetensors.h"
#include "core/io/tensor_collection.h"
#include "core/model/linear_layers.h"
#include "core/model/model_config.h"

namespace quant {

struct CheckpointOptions {
  SafetensorsLimits limits;
  // Scan every expected tensor for NaN/Inf while opening. Touches every
  // weight byte, so it costs a full read of the checkpoint.
  bool check_finite = false;
};

class Checkpoint {
 public:
  // Loads `dir`/config.json and the safetensors, then checks that every
  // expected tensor exists with a floating-point dtype and the expected shape.
  // Errors name the directory, the tensor, and the expected and actual shape.
  // Tensors the architecture does not use (e.g. rotary inv_freq buffers, or
  // lm_head.weight beside tied embeddings) are listed, not rejected. A
  // checkpoint whose config has a quantization_config is refused.
  static absl::StatusOr<std::unique_ptr<Checkpoint>> Open(
      const std::string& dir, const CheckpointOptions& options = {});

  const std::string& directory() const { return directory_; }
  const ModelConfig& config() const { return config_; }
  const TensorCollection& tensors() const { return *tensors_; }
  // In model order (see ListExpectedTensors); all present and well shaped.
  const std::vector<ExpectedTensor>& expected_tensors() const {
    return expected_;
  }
  // Names present in the files but not expected, sorted.
  const std::vector<std::string>& unexpected_tensors() const {
    return unexpected_;
  }

  // A tensor converted to float32; NotFound names a missing tensor.
  absl::StatusOr<FloatTensor> ReadFloat(absl::string_view name) const;

  // FailedPrecondition naming the tensor, the first NaN/Inf element's index
  // and which it is; NotFound when the tensor is absent.
  absl::Status CheckFinite(absl::string_view name) const;
  // CheckFinite for every expected tensor, in model order.
  absl::Status CheckAllFinite() const;

 private:
  Checkpoint() = default;

  std::string directory_;
  ModelConfig config_;
  std::unique_ptr<TensorCollection> tensors_;
  std::vector<ExpectedTensor> expected_;
  std::vector<std::string> unexpected_;
};

}  // namespace quant

#endif  // QUANT_CORE_MODEL_CHECKPOINT_H_

// Synthetic checkpoints for the model tests.
#include "tests/model/tiny_checkpoint.h"

#include <cstring>
#include <map>

#include "absl/strings/str_cat.h"
#include "core/base/file_util.h"
#include "core/base/status_macros.h"
#include "core/io/safetensors.h"
#include "core/model/linear_layers.h"
#include "core/model/model_config.h"
#include "nlohmann/json.hpp"

namespace quant::testing {
namespace {

// Stored bytes of each tensor; kept alive while the file is written.
absl::Status WriteFile(const std::string& path,
                       const std::vector<TinyTensor>& tensors) {
  std::vector<std::string> buffers;
  buffers.reserve(tensors.size());
  std::vector<TensorToWrite> to_write;
  for (const TinyTensor& tensor : tensors) {
    int64_t count = 1;
    for (int64_t d : tensor.shape) count *= d;
    std::vector<float> values = tensor.values;
    if (values.empty()) {
      values.resize(static_cast<size_t>(count));
      for (int64_t i = 0; i < count; ++i) {
        values[i] = 0.01f * static_cast<float>(i % 17) - 0.08f;
      }
    }
    std::string bytes(values.size() * DTypeSize(tensor.dtype), '\0');
    if (tensor.dtype == DType::kI32) {
      for (size_t i = 0; i < values.size(); ++i) {
        const int32_t value = static_cast<int32_t>(values[i]);
        std::memcpy(bytes.data() + 4 * i, &value, 4);
      }
    } else {
      QUANT_RETURN_IF_ERROR(ConvertFromFloat(values.data(), values.size(),
                                             tensor.dtype, bytes.data()));
    }
    buffers.push_back(std::move(bytes));
    to_write.push_back(
        {tensor.name, tensor.dtype, tensor.shape, buffers.back()});
  }
  return WriteSafetensors(path, to_write, {{"format", "pt"}});
}

}  // namespace

std::string TinyLlamaConfigJson() {
  return R"({
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 8,
    "intermediate_size": 12,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "vocab_size": 16,
    "max_position_embeddings": 64,
    "rms_norm_eps": 1e-5,
    "hidden_act": "silu",
    "tie_word_embeddings": false,
    "torch_dtype": "float32"
  })";
}

std::vector<TinyTensor> TensorsFor(const std::string& config_json) {
  std::vector<TinyTensor> tensors;
  absl::StatusOr<ModelConfig> config = ParseModelConfig(config_json);
  if (!config.ok()) return tensors;
  for (const ExpectedTensor& expected : ListExpectedTensors(*config)) {
    tensors.push_back({expected.name, expected.shape, DType::kF32, {}});
  }
  return tensors;
}

absl::Status WriteCheckpoint(const std::string& dir,
                             const std::string& config_json,
                             const std::vector<TinyTensor>& tensors) {
  QUANT_RETURN_IF_ERROR(
      WriteFileAtomically(JoinPath(dir, "config.json"), config_json));
  return WriteFile(JoinPath(dir, "model.safetensors"), tensors);
}

absl::Status WriteShardedCheckpoint(const std::string& dir,
                                    const std::string& config_json,
                                    const std::vector<TinyTensor>& tensors) {
  QUANT_RETURN_IF_ERROR(
      WriteFileAtomically(JoinPath(dir, "config.json"), config_json));
  const size_t half = tensors.size() / 2;
  const std::vector<TinyTensor> first(tensors.begin(), tensors.begin() + half);
  const std::vector<TinyTensor> second(tensors.begin() + half, tensors.end());
  const std::string names[2] = {"model-00001-of-00002.safetensors",
                                "model-00002-of-00002.safetensors"};
  QUANT_RETURN_IF_ERROR(WriteFile(JoinPath(dir, names[0]), first));
  QUANT_RETURN_IF_ERROR(WriteFile(JoinPath(dir, names[1]), second));
  nlohmann::json index;
  index["metadata"] = nlohmann::json::object();
  nlohmann::json& weight_map = index["weight_map"];
  weight_map = nlohmann::json::object();
  for (const TinyTensor& tensor : first) weight_map[tensor.name] = names[0];
  for (const TinyTensor& tensor : second) weight_map[tensor.name] = names[1];
  return WriteFileAtomically(JoinPath(dir, "model.safetensors.index.json"),
                             index.dump(2));
}

}  // namespace quant::testing

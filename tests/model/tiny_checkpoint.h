// Writes small synthetic checkpoints (config.json + safetensors) into a
// folder, so checkpoint tests can break them in controlled ways.
#ifndef QUANT_TESTS_MODEL_TINY_CHECKPOINT_H_
#define QUANT_TESTS_MODEL_TINY_CHECKPOINT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/base/dtype.h"

namespace quant::testing {

// A Llama config with small, mutually distinct dimensions: hidden 8,
// intermediate 12, 2 layers, 2 heads over 1 KV head (head_dim 4), vocab 16,
// untied embeddings.
std::string TinyLlamaConfigJson();

struct TinyTensor {
  std::string name;
  std::vector<int64_t> shape;
  DType dtype = DType::kF32;  // F32, F16, BF16, or I32 (values truncated).
  std::vector<float> values;  // Empty: filled with a deterministic ramp.
};

// The tensors a checkpoint of `config_json` must hold (from
// ListExpectedTensors), filled with finite values.
std::vector<TinyTensor> TensorsFor(const std::string& config_json);

// Writes `dir`/config.json and `dir`/model.safetensors.
absl::Status WriteCheckpoint(const std::string& dir,
                             const std::string& config_json,
                             const std::vector<TinyTensor>& tensors);

// Writes the tensors split over two shards plus model.safetensors.index.json.
absl::Status WriteShardedCheckpoint(const std::string& dir,
                                    const std::string& config_json,
                                    const std::vector<TinyTensor>& tensors);

}  // namespace quant::testing

#endif  // QUANT_TESTS_MODEL_TINY_CHECKPOINT_H_

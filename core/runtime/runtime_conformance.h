// Runtime conformance: whether a packed checkpoint would load in vLLM (or
// transformers), predicted before it is published from its config.json and
// the headers of its tensors, and which kernel each layer would run on.
//
// The rules are vLLM's as docs/RUNTIME_CONFORMANCE.md writes them down with
// the source files they were read from (vLLM main, first half of 2026, at
// tensor-parallel size 1):
// - vLLM builds q/k/v into one qkv_proj and gate/up into one gate_up_proj
//   (FusedLayerName) and gives the fused layer one scheme; parts that
//   disagree (quantized or not, bits, group size, symmetry, act-order) fail.
// - GPTQ: the config becomes "gptq_marlin" when (bits, sym) is (4|8, true)
//   and group_size is -1, 32, 64 or 128, else the legacy "gptq" method
//   (2/3/4/8 bits, float16 activations only). "dynamic" rules are matched
//   in order, first match wins, with Python's re.match (anchored at the
//   start only) against vLLM's module name, the fused one for fused layers.
//   Which layers are quantized comes from modules_in_block_to_quantize or,
//   without it, from which modules store integer tensors.
// - compressed-tensors: "ignore" entries (exact or "re:") are matched
//   against the fused name, then each part; targets against the layer name,
//   then the class name ("Linear" matches every linear layer), then each
//   part. Weight-only int schemes need pack-quantized, 4 or 8 bits and the
//   group or channel strategy (WNA16).
// - Kernels, in vLLM's order: Machete (capability 90 only; K % 64, N % 128,
//   group -1, 64 or 128), Marlin (capability >= 75; N % 64, K % 128, group
//   -1, 32, 64 or 128 dividing K; zero points only at 4 bits), Exllama
//   (float16 activations, symmetric, group > 0 dividing K, N % (32/bits)).
// - Every tensor the loader asks for must exist with its dtype and shape
//   (vLLM does not check this itself for quantized models: a missing one
//   is silently left uninitialized), and no tensor may be left over (vLLM:
//   "There is no module or parameter named ...").
// transformers loads each module on its own (no fusion, no kernel
// constraints); its checks are the config's and the tensors'.
#ifndef QUANT_CORE_RUNTIME_RUNTIME_CONFORMANCE_H_
#define QUANT_CORE_RUNTIME_RUNTIME_CONFORMANCE_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/base/dtype.h"
#include "core/base/file_system.h"
#include "core/model/model_config.h"
#include "nlohmann/json.hpp"

namespace quant {

enum class TargetRuntime { kVllm, kTransformers };

// "vllm", "transformers".
const char* TargetRuntimeName(TargetRuntime runtime);
// Whether vLLM's compressed-tensors weight-only scheme (WNA16) takes
// `bits`: 4 and 8 only.
bool VllmCompressedTensorsTakesBits(int bits);
std::optional<TargetRuntime> TargetRuntimeFromName(absl::string_view name);

struct RuntimeCheckOptions {
  TargetRuntime runtime = TargetRuntime::kVllm;
  // vLLM: the GPU's compute capability (80 A100, 89 L40S, 90 H100), which
  // decides Machete and Marlin.
  int compute_capability = 80;
};

// A tensor as its safetensors header describes it.
struct TensorHeader {
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
};
using TensorHeaders = std::map<std::string, TensorHeader, std::less<>>;

// One layer as the runtime builds it.
struct RuntimeLayerCheck {
  std::string name;                // "model.layers.0.self_attn.qkv_proj"
  std::vector<std::string> parts;  // The checkpoint's modules in it.
  int64_t out_features = 0;        // N, summed over the parts.
  int64_t in_features = 0;         // K.
  bool quantized = false;
  // The scheme the runtime reads the layer with, when quantized.
  int bits = 0;
  int64_t group_size = -1;  // -1: one group per output row.
  bool symmetric = true;
  bool act_order = false;
  // The kernel it would run on ("machete", "marlin", "exllama",
  // "gptq_gemm", "torch" for transformers, "unquantized"); empty when the
  // layer would not load.
  std::string kernel;
  std::vector<std::string> problems;  // Why it would not load.
};

struct RuntimeCheck {
  TargetRuntime runtime = TargetRuntime::kVllm;
  int compute_capability = 0;  // vLLM only.
  // The quantization method the runtime picks: "gptq_marlin", "gptq",
  // "compressed-tensors"; "none" for an unquantized checkpoint.
  std::string method;
  std::string activation_dtype;       // "float16", "bfloat16" (vLLM).
  std::vector<std::string> problems;  // Checkpoint-wide.
  std::vector<RuntimeLayerCheck> layers;

  // No problem anywhere.
  bool loads() const;
  // Every problem, layer problems prefixed with the layer's name.
  std::vector<std::string> AllProblems() const;
};

// Checks `config_json` (config.json, whose model fields `model` was parsed
// from) against the tensors a checkpoint stores. Never fails: what would
// not load is reported in the result.
RuntimeCheck CheckRuntimeConformance(const nlohmann::json& config_json,
                                     const ModelConfig& model,
                                     const TensorHeaders& tensors,
                                     const RuntimeCheckOptions& options = {});

// The same for a checkpoint directory: config.json and the safetensors
// headers (sharded or not). Errors only when those cannot be read at all
// (missing, malformed): that is not a runtime question.
absl::StatusOr<RuntimeCheck> CheckCheckpointRuntimeConformance(
    const std::string& dir, const RuntimeCheckOptions& options = {},
    FileSystem* fs = FileSystem::Default());

// {"runtime", "compute_capability", "method", "activation_dtype",
//  "loads", "problems": [...], "kernels": {kernel: count},
//  "layers": [{"name", "parts", "n", "k", "quantized", "bits",
//  "group_size", "symmetric", "act_order", "kernel", "problems"}]}.
nlohmann::json RuntimeCheckToJson(const RuntimeCheck& check);

// A summary line, then one line per problem (or per kernel when it loads).
std::string FormatRuntimeCheck(const RuntimeCheck& check);

}  // namespace quant

#endif  // QUANT_CORE_RUNTIME_RUNTIME_CONFORMANCE_H_

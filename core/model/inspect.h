// What `quantctl inspect` reports about a checkpoint: architecture, sizes,
// every tensor, and for each linear layer whether its shape fits the packed
// formats and group sizes the quantizer offers, before anyone submits a job.
#ifndef QUANT_CORE_MODEL_INSPECT_H_
#define QUANT_CORE_MODEL_INSPECT_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/model/checkpoint.h"
#include "core/model/linear_layers.h"
#include "nlohmann/json.hpp"

namespace quant {

// Bit widths and group sizes the report checks each linear layer against.
inline constexpr int kInspectBitWidths[] = {2, 3, 4, 8};
inline constexpr int kInspectGroupSizes[] = {32, 64, 128};

// GPTQ v1 packs 32/bits codes per int32 word: qweight along K (columns of
// the weight), qzeros along N (rows).
struct GptqPackingFit {
  int bits = 0;
  bool qweight_fits = false;  // K * bits % 32 == 0
  bool qzeros_fits = false;   // N * bits % 32 == 0
  bool fits() const { return qweight_fits && qzeros_fits; }
};

// Whether a [N, K] weight fits GPTQ v1 packing at `bits`.
GptqPackingFit CheckGptqPacking(int64_t out_features, int64_t in_features,
                                int bits);

struct InspectLinearLayer {
  LinearLayerSpec spec;
  std::vector<GptqPackingFit> gptq;  // One per kInspectBitWidths entry.
  // The entries of kInspectGroupSizes that divide K (per-channel always fits).
  std::vector<int> group_sizes_dividing_k;
};

struct InspectTensor {
  std::string name;
  std::string dtype;  // Safetensors name: "F32", "BF16", ...
  std::vector<int64_t> shape;
  int64_t num_elements = 0;
  bool expected = true;  // False for tensors the architecture does not use.
};

struct InspectFile {
  std::string name;  // Relative to the checkpoint directory.
  uint64_t size_bytes = 0;
};

struct InspectReport {
  std::string directory;
  std::string architecture;  // "LlamaForCausalLM"
  ModelConfig config;
  int num_blocks = 0;
  // Elements of the expected tensors (tied embeddings counted once).
  int64_t num_parameters = 0;
  uint64_t size_on_disk_bytes = 0;  // Sum of the safetensors file sizes.
  bool sharded = false;
  std::vector<InspectFile> files;
  std::map<std::string, int64_t> tensors_by_dtype;  // dtype -> tensor count
  std::vector<InspectTensor> tensors;               // Sorted by name.
  std::vector<std::string> unexpected_tensors;
  std::vector<InspectLinearLayer> linear_layers;  // Pipeline order.
  // A packed checkpoint's quant_method ("gptq", "compressed-tensors"; empty
  // when unquantized) and the linear layers stored packed.
  std::string quantization;
  std::vector<std::string> packed_layers;
};

InspectReport BuildInspectReport(const Checkpoint& checkpoint);

// Human-readable report: summary, per-layer-type fit table, tensor list.
std::string RenderInspectText(const InspectReport& report);

// Machine-readable report (the `quantctl inspect --json` output).
nlohmann::json InspectToJson(const InspectReport& report);

}  // namespace quant

#endif  // QUANT_CORE_MODEL_INSPECT_H_

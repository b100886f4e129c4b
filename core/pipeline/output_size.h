// The size of the packed checkpoint a plan produces, computed from the
// formats' tensor layouts (gptq_format.h, compressed_tensors_format.h) and
// the source's stored dtypes, before anything runs. The dry run prints it
// (the seed's worked example: about 3.9 GB for a 7B model at 4-bit g128),
// and the finalize checks what it wrote against it: a checkpoint larger
// than its layers' decisions predict means a layer was written unpacked or
// twice.
#ifndef QUANT_CORE_PIPELINE_OUTPUT_SIZE_H_
#define QUANT_CORE_PIPELINE_OUTPUT_SIZE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/base/dtype.h"
#include "core/model/checkpoint.h"
#include "core/pack/packed_tensor.h"
#include "core/pipeline/quantization_plan.h"
#include "core/recipe/layer_plan.h"
#include "core/recipe/recipe.h"

namespace quant {

// One linear layer's fate in the output: packed with its settings, or kept
// in the source's dtype.
struct LayerOutputDecision {
  std::string name;  // "model.layers.0.mlp.down_proj"
  LayerSettings settings;
  bool packed = false;
};

struct OutputSize {
  int64_t tensor_bytes = 0;         // Every tensor's data, all shards.
  int64_t source_tensor_bytes = 0;  // The source checkpoint's, the same way.
  int64_t packed_layers = 0;
  int64_t kept_layers = 0;  // Linear layers kept unquantized.
};

// Bytes of one packed [n, k] layer's tensors in `format` (its bias, kept in
// the source dtype, not counted). compressed-tensors scales are stored as
// `scale_dtype`.
int64_t PackedLayerBytes(OutputFormat format, const Recipe& recipe,
                         const LayerSettings& settings, int64_t n, int64_t k,
                         DType scale_dtype);

// A tensor of the source checkpoint as stored.
struct SourceTensor {
  std::string name;
  std::vector<int64_t> shape;
  DType dtype = DType::kF32;
};

// The architecture's tensors (ListExpectedTensors) with their stored dtypes.
// InvalidArgument naming a tensor `source` lacks.
absl::StatusOr<std::vector<SourceTensor>> SourceTensorsOf(
    const Checkpoint& source);

// The architecture's tensors, all stored as `dtype`: a checkpoint described
// by its config.json alone (the dry run's estimate for a model not on disk).
std::vector<SourceTensor> SourceTensorsFromConfig(const ModelConfig& config,
                                                  DType dtype);

// What the finalize writes when `layers` (every linear layer of the decoder
// blocks) are packed or kept as they say: every other tensor as stored.
// InvalidArgument naming a layer that is not among `tensors`.
absl::StatusOr<OutputSize> ComputeOutputSize(
    const std::vector<SourceTensor>& tensors, const ModelConfig& config,
    const Recipe& recipe, const std::vector<LayerOutputDecision>& layers);

// The data bytes of `written` (the tensors a finalize is about to write),
// or Internal when they differ from what ComputeOutputSize predicts for
// `layers`: a layer went out in another form than its audit row says
// (unpacked, twice, or not at all).
absl::StatusOr<int64_t> CheckWrittenTensorBytes(
    const std::vector<SourceTensor>& tensors, const ModelConfig& config,
    const Recipe& recipe, const std::vector<LayerOutputDecision>& layers,
    const std::vector<PackedTensor>& written);

// The decisions `plan` makes before any data is seen: a layer is packed
// unless the recipe keeps it or the format cannot hold its shape. (A GPTQ
// layer with an asymmetric zero of 0 is found only while packing and kept
// then: the finalize's check takes the layers' final decisions.)
std::vector<LayerOutputDecision> PlannedOutputDecisions(
    const ModelConfig& config, const Recipe& recipe,
    const QuantizationPlan& plan);

}  // namespace quant

#endif  // QUANT_CORE_PIPELINE_OUTPUT_SIZE_H_

// PackedLayerBytes, ComputeOutputSize, PlannedOutputDecisions.
#include "core/pipeline/output_size.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/model/linear_layers.h"
#include "core/pipeline/layer_packing.h"

namespace quant {
namespace {

constexpr int64_t kWordBytes = 4;  // int32 words of packed codes.

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

int64_t GroupCount(int64_t k, int64_t group_size) {
  return group_size <= 0 ? 1 : CeilDiv(k, group_size);
}

}  // namespace

int64_t PackedLayerBytes(OutputFormat format, const Recipe& recipe,
                         const LayerSettings& settings, int64_t n, int64_t k,
                         DType scale_dtype) {
  const int64_t bits = settings.bits;
  const int64_t groups = GroupCount(k, settings.group_size);
  if (format == OutputFormat::kCompressedTensors) {
    int64_t bytes = n * CeilDiv(k * bits, 32) * kWordBytes  // weight_packed
                    +
                    n * groups * static_cast<int64_t>(DTypeSize(scale_dtype)) +
                    2 * 8;  // weight_shape, int64 [2]
    if (settings.grid == QuantGrid::kAsym) {
      bytes += CeilDiv(n * bits, 32) * groups * kWordBytes;  // zero points
    }
    if (ActOrderFor(recipe, settings.group_size) ==
        CompressedTensorsActOrder::kGroup) {
      bytes += k * 4;  // weight_g_idx
    }
    return bytes;
  }
  // GPTQ v1: qweight [K*b/32, N], qzeros [G, N*b/32], scales fp16 [G, N],
  // g_idx int32 [K].
  return CeilDiv(k * bits, 32) * n * kWordBytes +
         groups * CeilDiv(n * bits, 32) * kWordBytes + groups * n * 2 + k * 4;
}

absl::StatusOr<std::vector<SourceTensor>> SourceTensorsOf(
    const Checkpoint& source) {
  std::vector<SourceTensor> out;
  for (const ExpectedTensor& expected : source.expected_tensors()) {
    const TensorCollection::Entry entry = source.tensors().Find(expected.name);
    if (entry.info == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("output size: the source has no ", expected.name));
    }
    out.push_back({expected.name, entry.info->shape, entry.info->dtype});
  }
  return out;
}

std::vector<SourceTensor> SourceTensorsFromConfig(const ModelConfig& config,
                                                  DType dtype) {
  std::vector<SourceTensor> out;
  for (ExpectedTensor& expected : ListExpectedTensors(config)) {
    out.push_back({std::move(expected.name), std::move(expected.shape), dtype});
  }
  return out;
}

absl::StatusOr<OutputSize> ComputeOutputSize(
    const std::vector<SourceTensor>& tensors, const ModelConfig& config,
    const Recipe& recipe, const std::vector<LayerOutputDecision>& layers) {
  std::map<std::string, const LayerOutputDecision*> by_weight;
  for (const LayerOutputDecision& layer : layers) {
    by_weight[layer.name + ".weight"] = &layer;
  }
  const DType scale_dtype = CompressedTensorsScaleDType(config);
  OutputSize size;
  for (const SourceTensor& tensor : tensors) {
    int64_t elements = 1;
    for (int64_t d : tensor.shape) elements *= d;
    const int64_t stored =
        elements * static_cast<int64_t>(DTypeSize(tensor.dtype));
    size.source_tensor_bytes += stored;
    auto it = by_weight.find(tensor.name);
    if (it == by_weight.end()) {
      size.tensor_bytes += stored;
      continue;
    }
    const LayerOutputDecision& layer = *it->second;
    by_weight.erase(it);
    if (!layer.packed) {
      ++size.kept_layers;
      size.tensor_bytes += stored;
      continue;
    }
    if (tensor.shape.size() != 2) {
      return absl::InvalidArgumentError(
          absl::StrCat("output size: ", tensor.name, " is not a matrix"));
    }
    ++size.packed_layers;
    size.tensor_bytes +=
        PackedLayerBytes(recipe.format, recipe, layer.settings, tensor.shape[0],
                         tensor.shape[1], scale_dtype);
  }
  if (!by_weight.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("output size: layer ", by_weight.begin()->second->name,
                     " is not among the checkpoint's tensors"));
  }
  return size;
}

absl::StatusOr<int64_t> CheckWrittenTensorBytes(
    const std::vector<SourceTensor>& tensors, const ModelConfig& config,
    const Recipe& recipe, const std::vector<LayerOutputDecision>& layers,
    const std::vector<PackedTensor>& written) {
  QUANT_ASSIGN_OR_RETURN(OutputSize expected,
                         ComputeOutputSize(tensors, config, recipe, layers));
  int64_t bytes = 0;
  for (const PackedTensor& t : written) {
    bytes += static_cast<int64_t>(t.bytes.size());
  }
  if (bytes != expected.tensor_bytes) {
    return absl::InternalError(absl::StrCat(
        "the packed checkpoint's tensors hold ", bytes, " bytes, but its ",
        expected.packed_layers, " packed and ", expected.kept_layers,
        " kept layers make ", expected.tensor_bytes,
        bytes > expected.tensor_bytes
            ? ": a layer was written unpacked or twice"
            : ": a layer or tensor is missing",
        "; nothing was published"));
  }
  return bytes;
}

std::vector<LayerOutputDecision> PlannedOutputDecisions(
    const ModelConfig& config, const Recipe& recipe,
    const QuantizationPlan& plan) {
  std::vector<LayerOutputDecision> out;
  auto decide = [&](const std::map<LayerType, LayerSettings>& by_type,
                    const LinearLayerSpec& spec) {
    auto it = by_type.find(spec.type);
    if (it == by_type.end()) return;
    const LayerSettings& settings = it->second;
    LayerOutputDecision decision;
    decision.name = spec.name;
    decision.settings = settings;
    decision.packed =
        !settings.keep_unquantized &&
        FormatRefusal(recipe.format, spec.out_features, spec.in_features,
                      settings.bits, settings.group_size)
            .empty();
    out.push_back(std::move(decision));
  };
  for (int block = 0; block < static_cast<int>(plan.blocks.size()); ++block) {
    for (const LinearLayerSpec& spec : ListLinearLayers(config, block)) {
      decide(plan.blocks[block], spec);
    }
    if (static_cast<size_t>(block) >= plan.expert_blocks.size()) continue;
    for (const LinearLayerSpec& spec : ListExpertLayers(config, block)) {
      decide(plan.expert_blocks[block], spec);
    }
  }
  return out;
}

}  // namespace quant

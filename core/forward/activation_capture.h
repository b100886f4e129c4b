// The inputs a linear layer sees on given token windows, captured from the
// unquantized model: what a forward pre-hook records, for the one-layer lab
// and for tests of the pipeline. Padding positions are left out.
#ifndef QUANT_CORE_FORWARD_ACTIVATION_CAPTURE_H_
#define QUANT_CORE_FORWARD_ACTIVATION_CAPTURE_H_

#include "absl/status/statusor.h"
#include "core/calib/calibration_split.h"
#include "core/forward/llama_model.h"
#include "core/model/linear_layers.h"

namespace quant {

// Runs `windows` through blocks 0..layer.block-1 and the stages of
// layer.block up to the layer's input group; returns the input rows of the
// real (non-padding) positions: [tokens, layer.in_features].
absl::StatusOr<RowMatrixF> CaptureLayerInputs(const LlamaModel& model,
                                              const LinearLayerSpec& layer,
                                              const TokenWindows& windows);

}  // namespace quant

#endif  // QUANT_CORE_FORWARD_ACTIVATION_CAPTURE_H_

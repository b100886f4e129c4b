// Capturing a linear layer's inputs from the unquantized model.
#include "core/forward/activation_capture.h"

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/forward/block_forward.h"

namespace quant {
namespace {

// The input of `layer`'s group for hidden states entering its block.
RowMatrixF GroupInput(const ModelConfig& config, const BlockWeights& block,
                      const RopeTable& rope, int seq_len, InputGroup group,
                      const RowMatrixF& hidden) {
  const RowMatrixF attention_input = AttentionInput(config, block, hidden);
  if (group == InputGroup::kAttnIn) return attention_input;
  const RowMatrixF context =
      AttentionContext(config, block, rope, seq_len, attention_input);
  if (group == InputGroup::kAttnOut) return context;
  const RowMatrixF residual = AttentionResidual(block, hidden, context);
  const RowMatrixF mlp_input = MlpInput(config, block, residual);
  if (group == InputGroup::kMlpIn) return mlp_input;
  return MlpHidden(block, mlp_input);  // InputGroup::kMlpOut
}

}  // namespace

absl::StatusOr<RowMatrixF> CaptureLayerInputs(const LlamaModel& model,
                                              const LinearLayerSpec& layer,
                                              const TokenWindows& windows) {
  if (layer.block < 0 || layer.block >= model.num_blocks()) {
    return absl::InvalidArgumentError(
        absl::StrCat("layer ", layer.name, " is in block ", layer.block,
                     ", outside [0, ", model.num_blocks(), ")"));
  }
  if (windows.sequences.empty()) {
    return absl::InvalidArgumentError("no token windows to capture from");
  }
  if (layer.expert >= 0) {
    // An expert sees only the rows routed to it; capturing them is part of
    // the per-expert calibration still to come (docs/MOE.md).
    return absl::UnimplementedError(
        absl::StrCat("layer ", layer.name,
                     " is an expert; capturing an expert's routed inputs is "
                     "not supported yet"));
  }
  const ModelConfig& config = model.config();
  const int seq_len = windows.seq_len;
  const RopeTable rope(config, seq_len);
  RowMatrixF captured(windows.RealTokens(), layer.in_features);
  Eigen::Index next_row = 0;
  for (size_t w = 0; w < windows.sequences.size(); ++w) {
    QUANT_ASSIGN_OR_RETURN(RowMatrixF hidden,
                           model.Embed(windows.sequences[w]));
    for (int b = 0; b < layer.block; ++b) {
      hidden = RunBlock(config, model.block(b), rope, seq_len, hidden);
    }
    const RowMatrixF input = GroupInput(config, model.block(layer.block), rope,
                                        seq_len, layer.input_group, hidden);
    const int length = windows.lengths[w];
    captured.middleRows(next_row, length) = input.topRows(length);
    next_row += length;
  }
  return captured;
}

}  // namespace quant

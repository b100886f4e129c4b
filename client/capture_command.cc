// `quantctl capture`: split the text, run the unquantized model up to the
// layer, write PREFIX.weight.npy, PREFIX.cal.npy and PREFIX.heldout.npy.
#include "client/capture_command.h"

#include <ostream>
#include <string>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "client/common_flags.h"
#include "core/base/status_macros.h"
#include "core/calib/calibration_file.h"
#include "core/calib/calibration_split.h"
#include "core/forward/activation_capture.h"
#include "core/forward/llama_model.h"
#include "core/io/npy.h"
#include "core/model/checkpoint.h"
#include "core/text/tokenizer.h"
#include "nlohmann/json.hpp"

// Shared with other commands (defined in tokenize_command.cc and
// eval_command.cc).
ABSL_DECLARE_FLAG(std::string, text);
ABSL_DECLARE_FLAG(int32_t, seq_len);

ABSL_FLAG(std::string, layer, "",
          "Linear layer to capture, e.g. model.layers.2.mlp.down_proj. "
          "Required.");
ABSL_FLAG(int32_t, samples, 16, "Calibration windows (of --seq_len tokens).");
ABSL_FLAG(double, heldout_fraction, 0.1,
          "Fraction of documents held out (their windows give held-out "
          "inputs), in [0, 1).");
ABSL_FLAG(uint64_t, seed, 0, "Seed of the document split.");

namespace quant {
namespace {

absl::StatusOr<LinearLayerSpec> FindLayer(const ModelConfig& config,
                                          const std::string& name) {
  for (const LinearLayerSpec& spec : ListAllLinearLayers(config)) {
    if (spec.name == name) return spec;
  }
  return absl::NotFoundError(absl::StrCat(
      "--layer: no linear layer named \"", name,
      "\" (names look like model.layers.0.self_attn.q_proj; see quantctl "
      "inspect)"));
}

FloatTensor ToTensor(const RowMatrixF& matrix) {
  FloatTensor tensor;
  tensor.shape = {matrix.rows(), matrix.cols()};
  tensor.data.assign(matrix.data(), matrix.data() + matrix.size());
  return tensor;
}

absl::Status RunCapture(const CommandInvocation& invocation) {
  QUANT_RETURN_IF_ERROR(ApplyIsaFlag());
  const std::string checkpoint_dir = absl::GetFlag(FLAGS_checkpoint);
  const std::string text_path = absl::GetFlag(FLAGS_text);
  const std::string layer_name = absl::GetFlag(FLAGS_layer);
  const std::string prefix = absl::GetFlag(FLAGS_out);
  if (checkpoint_dir.empty()) return UsageError("--checkpoint is required");
  if (text_path.empty()) return UsageError("--text is required");
  if (layer_name.empty()) return UsageError("--layer is required");
  if (prefix.empty()) return UsageError("--out is required");

  CalibrationSplitOptions options;
  options.samples = absl::GetFlag(FLAGS_samples);
  options.seq_len = absl::GetFlag(FLAGS_seq_len);
  options.heldout_fraction = absl::GetFlag(FLAGS_heldout_fraction);
  options.seed = absl::GetFlag(FLAGS_seed);
  if (options.heldout_fraction <= 0) {
    return UsageError("--heldout_fraction must be positive for capture");
  }

  QUANT_ASSIGN_OR_RETURN(auto checkpoint, Checkpoint::Open(checkpoint_dir));
  QUANT_ASSIGN_OR_RETURN(LinearLayerSpec layer,
                         FindLayer(checkpoint->config(), layer_name));
  QUANT_ASSIGN_OR_RETURN(auto tokenizer,
                         Tokenizer::LoadFromDirectory(checkpoint_dir));
  QUANT_ASSIGN_OR_RETURN(CalibrationFile file, LoadCalibrationFile(text_path));
  QUANT_ASSIGN_OR_RETURN(CalibrationSplit split,
                         BuildCalibrationSplit(file, *tokenizer, options));
  QUANT_ASSIGN_OR_RETURN(auto model, LlamaModel::Load(*checkpoint));
  QUANT_ASSIGN_OR_RETURN(RowMatrixF cal,
                         CaptureLayerInputs(*model, layer, split.calibration));
  QUANT_ASSIGN_OR_RETURN(RowMatrixF heldout,
                         CaptureLayerInputs(*model, layer, split.heldout));
  const RowMatrixF& weight =
      model->block(layer.block).Linear(layer.type).weight;

  const std::string weight_path = prefix + ".weight.npy";
  const std::string cal_path = prefix + ".cal.npy";
  const std::string heldout_path = prefix + ".heldout.npy";
  QUANT_RETURN_IF_ERROR(WriteNpy(weight_path, ToTensor(weight)));
  QUANT_RETURN_IF_ERROR(WriteNpy(cal_path, ToTensor(cal)));
  QUANT_RETURN_IF_ERROR(WriteNpy(heldout_path, ToTensor(heldout)));

  std::ostream& out = *invocation.out;
  if (absl::GetFlag(FLAGS_json)) {
    nlohmann::json result = {
        {"layer", layer.name},
        {"n", layer.out_features},
        {"k", layer.in_features},
        {"calibration_tokens", cal.rows()},
        {"heldout_tokens", heldout.rows()},
        {"calibration_hash", split.calibration_hash},
        {"weight", weight_path},
        {"cal", cal_path},
        {"heldout", heldout_path},
    };
    out << result.dump(2) << "\n";
  } else {
    out << "layer " << layer.name << ": W [" << layer.out_features << ", "
        << layer.in_features << "], " << cal.rows() << " calibration tokens, "
        << heldout.rows() << " held-out tokens (calibration sha256 "
        << split.calibration_hash.substr(0, 12) << ")\n"
        << "  " << weight_path << "\n  " << cal_path << "\n  " << heldout_path
        << "\n";
  }
  return absl::OkStatus();
}

}  // namespace

Command CaptureCommand() {
  Command command;
  command.name = "capture";
  command.summary =
      "Record one layer's weight and its inputs on calibration and held-out "
      "text as .npy files (for lab).";
  command.usage =
      "capture --checkpoint DIR --text FILE --layer NAME --out PREFIX";
  command.description =
      "Splits the documents of --text (JSONL or paragraphs separated by empty "
      "lines) into calibration and held-out parts, cuts each into windows of "
      "--seq_len tokens (documents after a BOS, concatenated), runs the "
      "unquantized model up to the layer and records the rows it sees.";
  command.example =
      "quantctl capture --checkpoint ../shared/models/stories260K/hf-f32 "
      "--text ../shared/data/tinystories_val.txt "
      "--layer model.layers.2.mlp.down_proj --out /tmp/down2 && "
      "quantctl lab --weight /tmp/down2.weight.npy --cal /tmp/down2.cal.npy "
      "--heldout /tmp/down2.heldout.npy";
  command.flags = {&absl::GetFlagReflectionHandle(FLAGS_isa),
                   &absl::GetFlagReflectionHandle(FLAGS_checkpoint),
                   &absl::GetFlagReflectionHandle(FLAGS_text),
                   &absl::GetFlagReflectionHandle(FLAGS_layer),
                   &absl::GetFlagReflectionHandle(FLAGS_out),
                   &absl::GetFlagReflectionHandle(FLAGS_samples),
                   &absl::GetFlagReflectionHandle(FLAGS_seq_len),
                   &absl::GetFlagReflectionHandle(FLAGS_heldout_fraction),
                   &absl::GetFlagReflectionHandle(FLAGS_seed),
                   &absl::GetFlagReflectionHandle(FLAGS_json)};
  command.run = RunCapture;
  return command;
}

}  // namespace quant

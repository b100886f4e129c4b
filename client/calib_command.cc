// `quantctl calib upload` and `quantctl calib inspect`; see calib_command.h.
#include "client/calib_command.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "client/common_flags.h"
#include "client/service_client.h"
#include "core/base/status_macros.h"
#include "core/calib/calibration_inspection.h"
#include "core/calib/chat_rendering.h"
#include "core/model/linear_layers.h"
#include "core/model/model_config.h"
#include "core/pipeline/quantization_plan.h"
#include "core/recipe/recipe.h"
#include "core/text/tokenizer.h"
#include "nlohmann/json.hpp"

ABSL_DECLARE_FLAG(std::string, tokenizer);
ABSL_DECLARE_FLAG(std::string, recipe);

namespace quant {

absl::StatusOr<CalibrationInspection> InspectCalibrationForJob(
    const std::string& path, const std::string& checkpoint,
    const std::string& tokenizer_dir, const Recipe& recipe) {
  QUANT_ASSIGN_OR_RETURN(const CalibrationFile file, LoadCalibrationFile(path));
  QUANT_ASSIGN_OR_RETURN(std::unique_ptr<Tokenizer> tokenizer,
                         Tokenizer::LoadFromDirectory(tokenizer_dir));
  QUANT_ASSIGN_OR_RETURN(
      const std::unique_ptr<ChatRenderer> chat,
      ChatRenderer::Load(tokenizer_dir, ChatChoiceFromRecipe(recipe)));
  CalibrationSplitOptions options = SplitOptionsFromRecipe(recipe);
  options.chat = chat.get();
  QUANT_ASSIGN_OR_RETURN(
      CalibrationInspection inspection,
      InspectCalibration(file, *tokenizer, options.add_bos, chat.get()));
  if (!checkpoint.empty()) {
    QUANT_ASSIGN_OR_RETURN(const ModelConfig config,
                           LoadModelConfig(checkpoint));
    QUANT_ASSIGN_OR_RETURN(const CalibrationSplit split,
                           BuildCalibrationSplit(file, *tokenizer, options));
    std::map<int64_t, std::vector<std::string>> layers_by_inputs;
    for (const LinearLayerSpec& spec : ListLinearLayers(config, 0)) {
      std::vector<std::string>& types = layers_by_inputs[spec.in_features];
      types.push_back(spec.type_name());
    }
    AddSplitInspection(split, layers_by_inputs, &inspection);
  }
  return inspection;
}

namespace {

// `calib inspect FILE --checkpoint DIR [--recipe R]`: no service needed.
absl::Status RunInspect(const CommandInvocation& invocation) {
  const std::string& path = invocation.args[1];
  const std::string checkpoint = absl::GetFlag(FLAGS_checkpoint);
  std::string tokenizer_dir = absl::GetFlag(FLAGS_tokenizer);
  if (checkpoint.empty() && tokenizer_dir.empty()) {
    return UsageError(
        "calib inspect: give --checkpoint DIR (its tokenizer and layer "
        "widths) or --tokenizer DIR");
  }
  if (tokenizer_dir.empty()) tokenizer_dir = checkpoint;
  const std::string recipe_path = absl::GetFlag(FLAGS_recipe);
  if (!recipe_path.empty() && checkpoint.empty()) {
    return UsageError(
        "calib inspect: --recipe needs --checkpoint DIR (the layer widths "
        "its rank arithmetic uses)");
  }
  Recipe recipe;  // The defaults, unless a recipe is given.
  if (!recipe_path.empty()) {
    QUANT_ASSIGN_OR_RETURN(recipe, LoadRecipe(recipe_path));
  }
  QUANT_ASSIGN_OR_RETURN(
      const CalibrationInspection inspection,
      InspectCalibrationForJob(path, checkpoint, tokenizer_dir, recipe));
  if (absl::GetFlag(FLAGS_json)) {
    nlohmann::json out = CalibrationInspectionToJson(inspection);
    out["file"] = path;
    out["recipe"] =
        recipe_path.empty() ? nlohmann::json() : nlohmann::json(recipe_path);
    *invocation.out << out.dump(2) << "\n";
    return absl::OkStatus();
  }
  *invocation.out << path << "\n" << FormatCalibrationInspection(inspection);
  if (!checkpoint.empty()) {
    *invocation.out << "(split: "
                    << (recipe_path.empty()
                            ? std::string("the default recipe's calibration "
                                          "settings; --recipe for a job's")
                            : absl::StrCat("the calibration settings of ",
                                           recipe_path))
                    << ")\n";
  }
  return absl::OkStatus();
}

absl::Status RunCalib(const CommandInvocation& invocation) {
  if (invocation.args[0] == "inspect") return RunInspect(invocation);
  if (invocation.args[0] != "upload") {
    return UsageError(absl::StrCat("unknown calib action \"",
                                   invocation.args[0],
                                   "\" (known: upload, inspect)"));
  }
  const std::string& path = invocation.args[1];
  QUANT_ASSIGN_OR_RETURN(std::unique_ptr<ServiceClient> client,
                         ServiceClient::FromFlags());
  QUANT_ASSIGN_OR_RETURN(const v1::UploadCalibrationResponse response,
                         client->UploadCalibration(path));
  if (absl::GetFlag(FLAGS_json)) {
    const nlohmann::json out = {
        {"file", path},
        {"sha256", response.sha256()},
        {"size_bytes", response.size_bytes()},
        {"documents", response.documents()},
        {"already_present", response.already_present()},
    };
    *invocation.out << out.dump(2) << "\n";
  } else {
    *invocation.out << response.sha256() << "  " << path << "  "
                    << response.documents() << " documents, "
                    << response.size_bytes() << " bytes"
                    << (response.already_present() ? " (already present)" : "")
                    << "\n";
  }
  return absl::OkStatus();
}

}  // namespace

Command CalibCommand() {
  Command command;
  command.name = "calib";
  command.summary =
      "Upload a calibration set to quantd, or inspect one before a job uses "
      "it.";
  command.usage =
      "calib upload FILE [--json] [connection flags]\n"
      "       calib inspect FILE --checkpoint DIR [--recipe R] [--tokenizer "
      "DIR] [--json]";
  command.description =
      "inspect (no service needed) tokenizes every document of FILE with the "
      "checkpoint's tokenizer (or --tokenizer) and prints its documents, "
      "tokens and the distribution of document lengths; with --checkpoint "
      "it also builds the split the recipe (--recipe, else the default "
      "recipe) would build and prints the calibration and held-out windows "
      "and the rank arithmetic: calibration tokens T per input width K of "
      "each layer type, T < K marking a rank-deficient Hessian.\n\n"
      "upload streams FILE (JSONL with {\"text\": ...} or {\"input_ids\": "
      "[...]} "
      "per line, or plain text with documents separated by empty lines) to "
      "quantd in 1 MiB chunks. quantd checks that it parses and stores it "
      "under its sha256, which is what `quantctl submit --calibration "
      "SHA256` takes. Uploading the same bytes again is harmless. Prints "
      "\"SHA256  FILE  N documents, B bytes\".";
  command.example =
      "quantctl calib upload tinystories_val.txt --addr 127.0.0.1:50051";
  command.flags = {&absl::GetFlagReflectionHandle(FLAGS_json),
                   &absl::GetFlagReflectionHandle(FLAGS_checkpoint),
                   &absl::GetFlagReflectionHandle(FLAGS_tokenizer),
                   &absl::GetFlagReflectionHandle(FLAGS_recipe)};
  for (const absl::CommandLineFlag* flag : ServiceFlags()) {
    command.flags.push_back(flag);
  }
  command.min_args = 2;
  command.max_args = 2;
  command.run = RunCalib;
  return command;
}

}  // namespace quant

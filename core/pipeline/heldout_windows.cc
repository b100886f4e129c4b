// manifest.json + calibration file -> the job's split.
#include "core/pipeline/heldout_windows.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/file_util.h"
#include "core/base/status_macros.h"
#include "core/base/strict_json.h"
#include "core/pipeline/quantization_plan.h"
#include "core/recipe/recipe.h"
#include "nlohmann/json.hpp"

namespace quant {

absl::StatusOr<CalibrationSplit> SplitFromManifest(
    const std::string& manifest_path, const CalibrationFile& file,
    const Tokenizer& tokenizer) {
  const std::string path = IsDirectory(manifest_path)
                               ? JoinPath(manifest_path, "manifest.json")
                               : manifest_path;
  QUANT_ASSIGN_OR_RETURN(std::string text,
                         ReadFileToString(path, size_t{256} << 20));
  const nlohmann::json manifest = ParseJsonOrDiscarded(text);
  if (!manifest.is_object() || !manifest.contains("recipe") ||
      !manifest.contains("calibration") ||
      !manifest["calibration"].is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": not a manifest (needs \"recipe\" and \"calibration\")"));
  }
  const nlohmann::json& calibration = manifest["calibration"];
  if (const auto sources = calibration.find("sources");
      sources != calibration.end() && sources->is_array()) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": the job calibrated on ", sources->size(),
        " sources mixed by weight (calibration.sources); its held-out "
        "windows are rebuilt from one calibration file only"));
  }
  const auto sha = calibration.find("sha256");
  if (sha == calibration.end() || !sha->is_string()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": calibration.sha256 is missing"));
  }
  if (sha->get<std::string>() != file.sha256) {
    return absl::FailedPreconditionError(
        absl::StrCat("the calibration file has sha256 ", file.sha256, " but ",
                     path, " was made with ", sha->get<std::string>()));
  }
  QUANT_ASSIGN_OR_RETURN(
      Recipe recipe,
      ParseRecipe(manifest["recipe"].dump(), absl::StrCat(path, ":recipe")));
  QUANT_ASSIGN_OR_RETURN(
      CalibrationSplit split,
      BuildCalibrationSplit(file, tokenizer, SplitOptionsFromRecipe(recipe)));
  const auto heldout = calibration.find("heldout_documents");
  std::vector<int> documents;
  if (heldout != calibration.end() && heldout->is_array()) {
    for (const nlohmann::json& d : *heldout) {
      if (!d.is_number_integer()) break;
      documents.push_back(d.get<int>());
    }
  }
  if (heldout == calibration.end() || !heldout->is_array() ||
      documents.size() != heldout->size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": calibration.heldout_documents is not a list of integers"));
  }
  if (documents != split.heldout_documents) {
    return absl::FailedPreconditionError(absl::StrCat(
        path,
        ": the rebuilt split holds out other documents than the job "
        "did (a different tokenizer?)"));
  }
  return split;
}

}  // namespace quant

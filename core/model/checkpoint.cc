// Opening and validating checkpoints, unquantized or packed.
#include "core/model/checkpoint.h"

#include <map>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/file_util.h"
#include "core/base/status_macros.h"
#include "core/base/strict_json.h"
#include "core/model/finite_scan.h"

namespace quant {
namespace {

std::string ShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

// At most this many problems are spelled out in one error.
constexpr size_t kMaxReportedProblems = 5;

absl::Status ProblemsError(const std::string& dir,
                           const std::vector<std::string>& problems) {
  std::vector<std::string> shown(
      problems.begin(),
      problems.begin() + std::min(problems.size(), kMaxReportedProblems));
  std::string message =
      absl::StrCat("checkpoint ", dir, ": ", absl::StrJoin(shown, "; "));
  if (problems.size() > shown.size()) {
    absl::StrAppend(&message, "; and ", problems.size() - shown.size(),
                    " more problems");
  }
  return absl::InvalidArgumentError(message);
}

// config.json's quantization_config block (LoadModelConfig has already
// parsed the file once, so it is valid JSON).
absl::StatusOr<nlohmann::json> ReadQuantizationConfig(const std::string& dir,
                                                      FileSystem* fs) {
  const std::string path = JoinPath(dir, "config.json");
  QUANT_ASSIGN_OR_RETURN(std::string text, fs->ReadFile(path, size_t{1} << 20));
  const nlohmann::json root = ParseJsonOrDiscarded(text);
  if (root.is_discarded() || !root.is_object() ||
      !root.contains("quantization_config")) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": cannot read \"quantization_config\""));
  }
  return root["quantization_config"];
}

// Whether a packed layer reader exists for this quantization_config; the
// reader (core/pack/packed_format_config.h) checks the rest of the block.
absl::Status CheckPackedMethod(const std::string& dir,
                               const nlohmann::json& block) {
  const std::string method = block.is_object() &&
                                     block.contains("quant_method") &&
                                     block["quant_method"].is_string()
                                 ? block["quant_method"].get<std::string>()
                                 : "unknown";
  if (method == "gptq") return absl::OkStatus();
  if (method == "compressed-tensors") {
    if (block.contains("format") && block["format"] == "pack-quantized") {
      return absl::OkStatus();
    }
    return absl::FailedPreconditionError(absl::StrCat(
        "checkpoint ", dir,
        ": quantization_config is compressed-tensors with format ",
        block.contains("format") ? block["format"].dump() : "(none)",
        "; only \"pack-quantized\" is read"));
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "checkpoint ", dir, ": quantization_config quant_method \"", method,
      "\" cannot be read; packed checkpoints are read in the "
      "\"gptq\" (v1) and \"compressed-tensors\" "
      "(pack-quantized) formats"));
}

// The tensor suffixes of one packed layer: those every layer of the format
// has (the first is the packed weight itself), then those only some configs
// store. gptq_format.h and compressed_tensors_format.h describe them.
struct PackedSuffixes {
  std::vector<std::string> required;
  std::vector<std::string> optional;
};

PackedSuffixes SuffixesFor(const nlohmann::json& block) {
  if (block["quant_method"] == "gptq") {
    return {{"qweight", "qzeros", "scales", "g_idx"}, {}};
  }
  return {{"weight_packed", "weight_scale", "weight_shape"},
          {"weight_zero_point", "weight_g_idx"}};
}

}  // namespace

absl::StatusOr<std::unique_ptr<Checkpoint>> Checkpoint::Open(
    const std::string& dir, const CheckpointOptions& options) {
  if (!IsDirectory(dir)) {
    return absl::NotFoundError(
        absl::StrCat("checkpoint ", dir, ": not a directory"));
  }
  auto checkpoint = std::unique_ptr<Checkpoint>(new Checkpoint());
  checkpoint->directory_ = dir;
  QUANT_ASSIGN_OR_RETURN(checkpoint->config_,
                         LoadModelConfig(dir, options.file_system));
  const bool packed = checkpoint->config_.quantization_method.has_value();
  if (packed && !options.allow_packed) {
    return absl::FailedPreconditionError(absl::StrCat(
        "checkpoint ", dir, ": config.json has a \"quantization_config\" (",
        *checkpoint->config_.quantization_method,
        "): it is already quantized; an unquantized checkpoint is needed"));
  }
  PackedSuffixes suffixes;
  if (packed) {
    QUANT_ASSIGN_OR_RETURN(checkpoint->quantization_config_,
                           ReadQuantizationConfig(dir, options.file_system));
    QUANT_RETURN_IF_ERROR(
        CheckPackedMethod(dir, checkpoint->quantization_config_));
    suffixes = SuffixesFor(checkpoint->quantization_config_);
  }
  QUANT_ASSIGN_OR_RETURN(
      checkpoint->tensors_,
      TensorCollection::Open(dir, options.limits, options.file_system));
  const TensorCollection& tensors = *checkpoint->tensors_;
  std::map<std::string, std::string, std::less<>> layer_of_weight;
  if (packed) {
    const ModelConfig& config = checkpoint->config_;
    for (const LinearLayerSpec& spec : ListAllLinearLayers(config)) {
      layer_of_weight[spec.weight_name()] = spec.name;
    }
    for (int b = 0; b < config.num_hidden_layers; ++b) {
      for (const LinearLayerSpec& spec : ListExpertLayers(config, b)) {
        layer_of_weight[spec.weight_name()] = spec.name;
      }
    }
  }

  std::vector<std::string> problems;
  std::set<std::string, std::less<>> accounted;
  for (const ExpectedTensor& expected :
       ListExpectedTensors(checkpoint->config_)) {
    const TensorCollection::Entry entry = tensors.Find(expected.name);
    auto layer = layer_of_weight.find(expected.name);
    if (layer != layer_of_weight.end() &&
        tensors.Find(layer->second + "." + suffixes.required[0]).info !=
            nullptr) {
      const std::string& name = layer->second;
      if (entry.info != nullptr) {
        problems.push_back(absl::StrCat(
            "linear layer ", name, " is stored twice: both \"", expected.name,
            "\" and \"", name, ".", suffixes.required[0], "\" are present"));
        continue;
      }
      checkpoint->packed_layers_.push_back(name);
      checkpoint->packed_set_.insert(name);
      for (const std::vector<std::string>* list :
           {&suffixes.required, &suffixes.optional}) {
        for (const std::string& suffix : *list) {
          const std::string tensor = absl::StrCat(name, ".", suffix);
          if (tensors.Find(tensor).info != nullptr) {
            checkpoint->packed_tensors_.push_back(tensor);
            accounted.insert(tensor);
          } else if (list == &suffixes.required) {
            problems.push_back(absl::StrCat(
                "packed layer ", name, ": missing tensor \"", tensor, "\" (",
                checkpoint->config_.quantization_method.value_or(""),
                " stores ", absl::StrJoin(suffixes.required, ", "), ")"));
          }
        }
      }
      continue;
    }
    checkpoint->expected_.push_back(expected);
    accounted.insert(expected.name);
    if (entry.info == nullptr) {
      problems.push_back(
          absl::StrCat("missing tensor \"", expected.name,
                       "\" (expected shape ", ShapeString(expected.shape),
                       layer == layer_of_weight.end()
                           ? std::string()
                           : absl::StrCat(", or the packed \"", layer->second,
                                          ".", suffixes.required[0], "\""),
                       ")"));
      continue;
    }
    if (entry.info->shape != expected.shape) {
      problems.push_back(
          absl::StrCat("tensor \"", expected.name, "\" has shape ",
                       ShapeString(entry.info->shape), ", expected ",
                       ShapeString(expected.shape), " from config.json"));
      continue;
    }
    if (!IsFloatingPoint(entry.info->dtype)) {
      problems.push_back(absl::StrCat(
          "tensor \"", expected.name, "\" has dtype ",
          DTypeName(entry.info->dtype), ", expected a floating-point type"));
    }
  }
  if (!problems.empty()) return ProblemsError(dir, problems);

  for (const TensorCollection::Entry& entry : checkpoint->tensors_->Entries()) {
    if (accounted.count(entry.info->name) == 0) {
      checkpoint->unexpected_.push_back(entry.info->name);
    }
  }
  if (options.check_finite) {
    QUANT_RETURN_IF_ERROR(checkpoint->CheckAllFinite());
  }
  return checkpoint;
}

absl::StatusOr<FloatTensor> Checkpoint::ReadFloat(
    absl::string_view name) const {
  return tensors_->ReadFloat(name);
}

absl::Status Checkpoint::CheckFinite(absl::string_view name) const {
  const TensorCollection::Entry entry = tensors_->Find(name);
  if (entry.info == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("checkpoint ", directory_, ": no tensor \"", name, "\""));
  }
  const std::optional<NonFiniteValue> bad =
      FindFirstNonFinite(entry.info->dtype, entry.file->RawBytes(*entry.info),
                         entry.info->NumElements());
  if (!bad.has_value()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("checkpoint ", directory_, ": tensor \"", name, "\" has ",
                   bad->is_nan ? "NaN" : "infinity", " at index ",
                   FormatIndex(bad->index, entry.info->shape), " (element ",
                   bad->index, " of ", entry.info->NumElements(), ")"));
}

absl::Status Checkpoint::CheckAllFinite() const {
  for (const ExpectedTensor& expected : expected_) {
    QUANT_RETURN_IF_ERROR(CheckFinite(expected.name));
  }
  for (const std::string& name : packed_tensors_) {
    const TensorCollection::Entry entry = tensors_->Find(name);
    if (entry.info != nullptr && IsFloatingPoint(entry.info->dtype)) {
      QUANT_RETURN_IF_ERROR(CheckFinite(name));
    }
  }
  return absl::OkStatus();
}

}  // namespace quant

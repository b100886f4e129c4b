// Opening and validating unquantized checkpoints.
#include "core/model/checkpoint.h"

#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/file_util.h"
#include "core/base/status_macros.h"
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

}  // namespace

absl::StatusOr<std::unique_ptr<Checkpoint>> Checkpoint::Open(
    const std::string& dir, const CheckpointOptions& options) {
  if (!IsDirectory(dir)) {
    return absl::NotFoundError(
        absl::StrCat("checkpoint ", dir, ": not a directory"));
  }
  auto checkpoint = std::unique_ptr<Checkpoint>(new Checkpoint());
  checkpoint->directory_ = dir;
  QUANT_ASSIGN_OR_RETURN(checkpoint->config_, LoadModelConfig(dir));
  if (checkpoint->config_.quantization_method.has_value()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "checkpoint ", dir, ": config.json has a \"quantization_config\" (",
        *checkpoint->config_.quantization_method,
        "): it is already quantized; an unquantized checkpoint is needed"));
  }
  QUANT_ASSIGN_OR_RETURN(checkpoint->tensors_,
                         TensorCollection::Open(dir, options.limits));
  checkpoint->expected_ = ListExpectedTensors(checkpoint->config_);

  std::vector<std::string> problems;
  std::set<std::string, std::less<>> expected_names;
  for (const ExpectedTensor& expected : checkpoint->expected_) {
    expected_names.insert(expected.name);
    const TensorCollection::Entry entry =
        checkpoint->tensors_->Find(expected.name);
    if (entry.info == nullptr) {
      problems.push_back(absl::StrCat("missing tensor \"", expected.name,
                                      "\" (expected shape ",
                                      ShapeString(expected.shape), ")"));
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
    if (expected_names.count(entry.info->name) == 0) {
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
  return absl::FailedPreconditionError(
      absl::StrCat("checkpoint ", directory_, ": tensor \"", name, "\" has ",
                   bad->is_nan ? "NaN" : "infinity", " at index ",
                   FormatIndex(bad->index, entry.info->shape), " (element ",
                   bad->index, " of ", entry.info->NumElements(), ")"));
}

absl::Status Checkpoint::CheckAllFinite() const {
  for (const ExpectedTensor& expected : expected_) {
    QUANT_RETURN_IF_ERROR(CheckFinite(expected.name));
  }
  return absl::OkStatus();
}

}  // namespace quant

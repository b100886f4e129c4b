// ValidateCreateJobRequest: every check a job must pass before it exists.
#include "server/job_request.h"

#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/base/file_util.h"
#include "core/base/sha256.h"
#include "core/calib/calibration_file.h"
#include "core/model/checkpoint.h"
#include "core/pipeline/quantization_plan.h"
#include "server/recipe_convert.h"

namespace quant::server {
namespace {

absl::Status Prefixed(const absl::Status& status, absl::string_view prefix) {
  return absl::Status(status.code(), absl::StrCat(prefix, status.message()));
}

absl::Status ResolveCalibration(const v1::CalibrationRef& ref,
                                const UriPolicy& policy, store::JobStore& store,
                                int64_t max_bytes, ValidatedJobRequest* out) {
  switch (ref.source_case()) {
    case v1::CalibrationRef::kSha256: {
      if (absl::Status s = CheckSha256(ref.sha256(), "calibration.sha256");
          !s.ok()) {
        return s;
      }
      absl::StatusOr<store::CalibrationSet> set =
          store.GetCalibrationSet(ref.sha256());
      if (absl::IsNotFound(set.status())) {
        return absl::NotFoundError(
            absl::StrCat("calibration.sha256: no calibration set ",
                         ref.sha256(), " was uploaded"));
      }
      if (!set.ok()) return set.status();
      out->spec.calibration_sha256 = set->sha256;
      out->spec.calibration_path = set->path;
      return absl::OkStatus();
    }
    case v1::CalibrationRef::kUri: {
      const v1::UriWithHash& uri = ref.uri();
      if (absl::Status s = CheckSha256(uri.sha256(), "calibration.uri.sha256");
          !s.ok()) {
        return s;
      }
      absl::StatusOr<std::string> path =
          policy.Resolve(uri.uri(), "calibration.uri.uri");
      if (!path.ok()) return path.status();
      absl::StatusOr<std::string> bytes =
          ReadFileToString(*path, static_cast<size_t>(max_bytes));
      if (!bytes.ok()) {
        return Prefixed(bytes.status(), "calibration.uri.uri: ");
      }
      const std::string actual = Sha256Hex(*bytes);
      if (actual != uri.sha256()) {
        return absl::FailedPreconditionError(
            absl::StrCat("calibration.uri.sha256: expected ", uri.sha256(),
                         " but \"", uri.uri(), "\" has sha256 ", actual));
      }
      absl::StatusOr<CalibrationFile> parsed = ParseCalibrationFile(*bytes);
      if (!parsed.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("calibration.uri.uri: \"", uri.uri(),
                         "\": ", parsed.status().message()));
      }
      out->spec.calibration_sha256 = actual;
      out->spec.calibration_path = *path;
      out->calibration_from_uri = true;
      out->calibration_size_bytes = static_cast<int64_t>(bytes->size());
      return absl::OkStatus();
    }
    case v1::CalibrationRef::SOURCE_NOT_SET:
      break;
  }
  return absl::InvalidArgumentError(
      "calibration: required (sha256 of an uploaded set, or uri + sha256)");
}

}  // namespace

absl::Status CheckSha256(const std::string& sha256, absl::string_view field) {
  bool ok = sha256.size() == 64;
  for (char c : sha256) {
    ok = ok && ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'));
  }
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      field, ": \"", sha256, "\" is not a sha256 (64 lowercase hex digits)"));
}

absl::StatusOr<ValidatedJobRequest> ValidateCreateJobRequest(
    const v1::CreateJobRequest& request, const UriPolicy& policy,
    store::JobStore& store, int64_t max_calibration_bytes) {
  ValidatedJobRequest out;
  JobSpec& spec = out.spec;

  spec.checkpoint_uri = request.checkpoint_uri();
  absl::StatusOr<std::string> checkpoint_path =
      policy.Resolve(request.checkpoint_uri(), "checkpoint_uri");
  if (!checkpoint_path.ok()) return checkpoint_path.status();
  spec.checkpoint_path = *checkpoint_path;
  absl::StatusOr<std::unique_ptr<Checkpoint>> checkpoint =
      Checkpoint::Open(*checkpoint_path);
  if (!checkpoint.ok()) {
    return Prefixed(
        checkpoint.status(),
        absl::StrCat("checkpoint_uri: \"", spec.checkpoint_uri, "\": "));
  }
  const ModelConfig& config = (*checkpoint)->config();
  spec.num_blocks = config.num_hidden_layers;

  if (!request.has_recipe()) {
    return absl::InvalidArgumentError("recipe: required");
  }
  absl::StatusOr<Recipe> recipe = RecipeFromProto(request.recipe());
  if (!recipe.ok()) return recipe.status();
  absl::StatusOr<QuantizationPlan> plan = PlanQuantization(config, *recipe);
  if (!plan.ok()) return Prefixed(plan.status(), "recipe: ");
  spec.recipe = *std::move(recipe);
  spec.warnings = plan->warnings;

  if (!request.has_calibration()) {
    return absl::InvalidArgumentError(
        "calibration: required (sha256 of an uploaded set, or uri + sha256)");
  }
  if (absl::Status s = ResolveCalibration(request.calibration(), policy, store,
                                          max_calibration_bytes, &out);
      !s.ok()) {
    return s;
  }

  for (const auto& [key, value] : request.labels()) {
    if (key.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("labels: empty key (value \"", value, "\")"));
    }
    spec.labels[key] = value;
  }
  return out;
}

}  // namespace quant::server

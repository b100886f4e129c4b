// OpenPreviousRelease; see previous_release.h.
#include "core/pipeline/previous_release.h"

#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/base/file_uri.h"
#include "core/base/file_util.h"
#include "core/base/json_fields.h"
#include "core/base/sha256.h"
#include "core/base/status_macros.h"
#include "core/base/strict_json.h"
#include "core/pipeline/manifest_verify.h"

namespace quant {
namespace {

constexpr char kField[] = "gates.compare_to";
constexpr size_t kMaxManifestBytes = size_t{64} << 20;

absl::Status Refused(const std::string& compare_to, const std::string& why) {
  return absl::FailedPreconditionError(
      absl::StrCat(kField, ": \"", compare_to, "\": ", why));
}

}  // namespace

std::map<LayerType, RowMatrixF> PreviousLayersInSourceUnits(
    const BlockWeights& source, const BlockWeights& previous, bool linear_fed) {
  // previous / source per channel; 1 where the source's norm is 0 (those
  // inputs are 0 whatever the weight).
  const auto ratio = [](const Eigen::VectorXf& theirs,
                        const Eigen::VectorXf& ours) {
    Eigen::VectorXf r = Eigen::VectorXf::Ones(ours.size());
    for (Eigen::Index i = 0; i < ours.size() && i < theirs.size(); ++i) {
      if (ours[i] != 0.0f) r[i] = theirs[i] / ours[i];
    }
    return r;
  };
  const Eigen::VectorXf attention =
      ratio(previous.input_norm, source.input_norm);
  const Eigen::VectorXf mlp =
      ratio(previous.post_attention_norm, source.post_attention_norm);
  std::map<LayerType, RowMatrixF> out;
  for (const auto& [type, linear] : previous.linear) {
    switch (InputGroupOf(type)) {
      case InputGroup::kAttnIn:
        out[type] = linear.weight * attention.asDiagonal();
        break;
      case InputGroup::kMlpIn:
        out[type] = linear.weight * mlp.asDiagonal();
        break;
      case InputGroup::kAttnOut:
      case InputGroup::kMlpOut:
        if (linear_fed) out[type] = linear.weight;
        break;
    }
  }
  return out;
}

bool IsJobId(const std::string& compare_to) {
  if (!absl::StartsWith(compare_to, "job-") || compare_to.size() == 4) {
    return false;
  }
  for (size_t i = 4; i < compare_to.size(); ++i) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(compare_to[i]))) {
      return false;
    }
  }
  return true;
}

absl::StatusOr<std::string> LocalPreviousReleaseDir(
    const std::string& compare_to) {
  if (compare_to.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(kField, ": empty"));
  }
  if (IsJobId(compare_to)) {
    return absl::InvalidArgumentError(absl::StrCat(
        kField, ": \"", compare_to,
        "\" is a job id, which only quantd resolves; a local run compares "
        "with a directory (fetch the job's checkpoint with quantctl fetch)"));
  }
  if (absl::StartsWith(compare_to, kFileUriScheme)) {
    return FileUriPath(compare_to, kField);
  }
  if (absl::StrContains(compare_to, "://")) {
    return absl::InvalidArgumentError(
        absl::StrCat(kField, ": \"", compare_to,
                     "\": only directories and file:/// URIs are read"));
  }
  return compare_to;
}

absl::StatusOr<PreviousRelease> OpenPreviousRelease(
    const std::string& compare_to, const std::string& dir,
    const ModelConfig& source, const PreviousReleaseCheck& check) {
  PreviousRelease previous;
  previous.compare_to = compare_to;
  previous.dir = dir;
  std::error_code error;
  if (!std::filesystem::is_directory(dir, error)) {
    return absl::NotFoundError(
        absl::StrCat(kField, ": \"", compare_to, "\": no directory at ", dir));
  }
  // A checkpoint we published vouches for itself through its manifest: a
  // changed or added file means it is not the release that shipped.
  const std::string manifest_path = JoinPath(dir, "manifest.json");
  if (FileExists(manifest_path)) {
    QUANT_ASSIGN_OR_RETURN(const std::string manifest_text,
                           ReadFileToString(manifest_path, kMaxManifestBytes));
    if (check.verify_manifest) {
      absl::StatusOr<ManifestVerification> verified =
          VerifyCheckpointDirectory(dir);
      if (!verified.ok()) {
        return Refused(compare_to, std::string(verified.status().message()));
      }
      if (!verified->ok()) {
        return Refused(
            compare_to,
            absl::StrCat(
                "does not match its manifest.json (",
                verified->problems.front(),
                verified->problems.size() > 1
                    ? absl::StrCat(" and ", verified->problems.size() - 1,
                                   " more")
                    : std::string(),
                "): not the release that shipped"));
      }
    }
    previous.manifest_sha256 = Sha256Hex(manifest_text);
    const nlohmann::json manifest = ParseJsonOrDiscarded(manifest_text);
    previous.job_id = json_fields::StringOrEmpty(
        json_fields::MemberOrNull(manifest, "job"), "id");
    previous.verdict = json_fields::StringOrEmpty(
        json_fields::MemberOrNull(manifest, "output"), "verdict");
    const nlohmann::json& recipe =
        json_fields::MemberOrNull(manifest, "recipe");
    previous.method = json_fields::StringOrEmpty(recipe, "method");
    previous.used_awq = previous.method == "awq";
    const nlohmann::json& overrides =
        json_fields::MemberOrNull(recipe, "overrides");
    if (overrides.is_array()) {
      for (const nlohmann::json& entry : overrides) {
        previous.used_awq |=
            json_fields::StringOrEmpty(entry, "method") == "awq";
      }
    }
  }
  CheckpointOptions options;
  options.allow_packed = true;
  if (check.file_system != nullptr) options.file_system = check.file_system;
  absl::StatusOr<std::unique_ptr<Checkpoint>> checkpoint =
      Checkpoint::Open(dir, options);
  if (!checkpoint.ok()) {
    return absl::Status(checkpoint.status().code(),
                        absl::StrCat(kField, ": \"", compare_to,
                                     "\": ", checkpoint.status().message()));
  }
  const ModelConfig& config = (*checkpoint)->config();
  const auto differs = [&](const char* what, int64_t theirs, int64_t ours) {
    return Refused(compare_to,
                   absl::StrCat("its ", what, " is ", theirs, ", the source's ",
                                ours, ": not a release of this model"));
  };
  if (config.hidden_size != source.hidden_size) {
    return differs("hidden_size", config.hidden_size, source.hidden_size);
  }
  if (config.num_hidden_layers != source.num_hidden_layers) {
    return differs("num_hidden_layers", config.num_hidden_layers,
                   source.num_hidden_layers);
  }
  if (config.intermediate_size != source.intermediate_size) {
    return differs("intermediate_size", config.intermediate_size,
                   source.intermediate_size);
  }
  if (config.num_attention_heads != source.num_attention_heads) {
    return differs("num_attention_heads", config.num_attention_heads,
                   source.num_attention_heads);
  }
  if (config.num_key_value_heads != source.num_key_value_heads) {
    return differs("num_key_value_heads", config.num_key_value_heads,
                   source.num_key_value_heads);
  }
  if (config.vocab_size != source.vocab_size) {
    return differs("vocab_size", config.vocab_size, source.vocab_size);
  }
  previous.checkpoint = *std::move(checkpoint);
  return previous;
}

}  // namespace quant

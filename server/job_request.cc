// ValidateCreateJobRequest: every check a job must pass before it exists.
#include "server/job_request.h"

#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/recipe_convert.h"
#include "core/base/file_uri.h"
#include "core/base/file_util.h"
#include "core/base/read_roots.h"
#include "core/base/sha256.h"
#include "core/calib/calibration_file.h"
#include "core/calib/chat_rendering.h"
#include "core/calib/mixed_calibration.h"
#include "core/estimate/work_model.h"
#include "core/eval/task_file.h"
#include "core/model/checkpoint.h"
#include "core/pipeline/gates.h"
#include "core/pipeline/output_size.h"
#include "core/pipeline/previous_release.h"
#include "core/pipeline/quantization_plan.h"
#include "core/pipeline/round_job_tasks.h"
#include "core/recipe/recipe.h"
#include "core/text/tokenizer.h"

namespace quant::server {
namespace {

// Bounds on what a job stores and every read serves back (GetJob,
// ListJobs, WatchJob, the report): a field that cannot be served must not
// be stored. With 64 labels of at most 320 bytes and a recipe of at most
// 256 KiB (the recipe parser reads up to 1 MiB), a job stays well inside a
// standard client's 4 MiB message limit.
constexpr size_t kMaxRequestBytes = 512 << 10;
constexpr size_t kMaxRecipeJsonBytes = 256 << 10;
constexpr int kMaxLabels = 64;
constexpr size_t kMaxLabelKeyBytes = 63;
constexpr size_t kMaxLabelValueBytes = 256;
constexpr size_t kMaxRequestIdBytes = 128;

absl::Status Prefixed(const absl::Status& status, absl::string_view prefix) {
  return absl::Status(status.code(), absl::StrCat(prefix, status.message()));
}

// A file a recipe names (an absolute path or a file:/// URI) as a URI, for
// UriPolicy::Resolve.
std::string AsFileUri(const std::string& path_or_uri) {
  return absl::StartsWith(path_or_uri, kFileUriScheme)
             ? path_or_uri
             : absl::StrCat(kFileUriScheme, path_or_uri);
}

// A calibration file the request names by URI: resolved under the allowed
// roots, read (at most max_bytes), its sha256 checked against `expected`
// (when given) and parsed. Errors name `field`.
struct CheckedCalibrationFile {
  std::string path;
  std::string sha256;
  int64_t size_bytes = 0;
};
absl::StatusOr<CheckedCalibrationFile> ReadCheckedCalibrationFile(
    const std::string& uri, const std::string& expected,
    const UriPolicy& policy, int64_t max_bytes, const std::string& field,
    const std::string& sha256_field) {
  absl::StatusOr<std::string> path = policy.Resolve(uri, field);
  if (!path.ok()) return path.status();
  absl::StatusOr<std::string> bytes =
      ReadFileToString(*path, static_cast<size_t>(max_bytes));
  if (!bytes.ok()) return Prefixed(bytes.status(), field + ": ");
  const std::string actual = Sha256Hex(*bytes);
  if (!expected.empty() && actual != expected) {
    return absl::FailedPreconditionError(
        absl::StrCat(sha256_field, ": expected ", expected, " but \"", uri,
                     "\" has sha256 ", actual));
  }
  absl::StatusOr<CalibrationFile> parsed = ParseCalibrationFile(*bytes);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": \"", uri, "\": ", parsed.status().message()));
  }
  return CheckedCalibrationFile{*path, actual,
                                static_cast<int64_t>(bytes->size())};
}

// recipe.gates.compare_to: a job of this quantd that SUCCEEDED (its
// checkpoint is found in the artifact store when a task is leased), or a
// file:// URI under an allowed root holding a packed checkpoint of the same
// model. Its files are hashed against its manifest by the finalize, not
// here: a submit answers in seconds.
// recipe.calibration.chat_template: a template file must lie under an
// allowed root (workers read it by its path) and parse; the tokenizer's own
// ("auto") must parse where it has one.
absl::Status CheckChatTemplate(const Recipe& recipe,
                               const std::string& checkpoint_path,
                               const UriPolicy& policy,
                               std::string* pinned_sha256) {
  constexpr char kField[] = "recipe.calibration.chat_template";
  ChatTemplateChoice choice = ChatChoiceFromRecipe(recipe);
  if (choice.chat_template != "auto" && choice.chat_template != "none") {
    absl::StatusOr<std::string> path =
        policy.Resolve(AsFileUri(choice.chat_template), kField);
    if (!path.ok()) return path.status();
    choice.chat_template = *path;
  }
  absl::StatusOr<std::unique_ptr<ChatRenderer>> renderer =
      ChatRenderer::Load(checkpoint_path, choice);
  if (!renderer.ok()) return Prefixed(renderer.status(), "recipe: ");
  if (*renderer != nullptr) *pinned_sha256 = (*renderer)->origin().sha256;
  return absl::OkStatus();
}

// recipe.gates.tasks: under the allowed roots, a task file that parses, and
// tasks that encode with the checkpoint's tokenizer and fit its positions.
absl::Status CheckTaskFile(const Recipe& recipe,
                           const std::string& checkpoint_path,
                           const ModelConfig& config, const UriPolicy& policy,
                           std::string* pinned_sha256) {
  constexpr char kField[] = "recipe.gates.tasks";
  absl::StatusOr<std::string> path =
      policy.Resolve(AsFileUri(recipe.gates.tasks), kField);
  if (!path.ok()) return path.status();
  absl::StatusOr<TaskFile> file = LoadTaskFile(*path);
  if (!file.ok()) return Prefixed(file.status(), absl::StrCat(kField, ": "));
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer =
      Tokenizer::LoadFromDirectory(checkpoint_path);
  if (!tokenizer.ok()) return Prefixed(tokenizer.status(), "checkpoint_uri: ");
  if (absl::Status s = CheckGateTasksFit(*file, **tokenizer, config); !s.ok()) {
    return Prefixed(s, "recipe.");
  }
  *pinned_sha256 = file->sha256;
  return absl::OkStatus();
}

absl::Status ResolvePreviousRelease(const std::string& compare_to,
                                    const UriPolicy& policy,
                                    store::JobStore& store,
                                    const ModelConfig& config, JobSpec* spec) {
  constexpr char kField[] = "recipe.gates.compare_to";
  if (IsJobId(compare_to)) {
    absl::StatusOr<store::Job> job = store.GetJob(compare_to);
    if (absl::IsNotFound(job.status())) {
      return absl::InvalidArgumentError(
          absl::StrCat(kField, ": \"", compare_to, "\": no such job"));
    }
    if (!job.ok()) return job.status();
    if (job->state != store::JobState::kSucceeded) {
      return absl::FailedPreconditionError(absl::StrCat(
          kField, ": job ", compare_to, " is ", store::JobStateName(job->state),
          "; only a SUCCEEDED job has a checkpoint to compare with"));
    }
    if (job->verdict == store::Verdict::kFail) {
      spec->warnings.push_back(absl::StrCat(
          kField, ": job ", compare_to,
          " failed its own gates (verdict FAIL); it is compared with all "
          "the same"));
    }
    spec->previous_job_id = compare_to;
    return absl::OkStatus();
  }
  absl::StatusOr<std::string> path = policy.Resolve(compare_to, kField);
  if (!path.ok()) return path.status();
  PreviousReleaseCheck check;
  check.verify_manifest = false;
  absl::StatusOr<PreviousRelease> previous =
      OpenPreviousRelease(compare_to, *path, config, check);
  if (!previous.ok()) return Prefixed(previous.status(), "recipe.");
  spec->previous_path = *path;
  return absl::OkStatus();
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
      absl::StatusOr<CheckedCalibrationFile> file = ReadCheckedCalibrationFile(
          uri.uri(), uri.sha256(), policy, max_bytes, "calibration.uri.uri",
          "calibration.uri.sha256");
      if (!file.ok()) return file.status();
      out->spec.calibration_sha256 = file->sha256;
      out->spec.calibration_path = file->path;
      out->calibration_from_uri = true;
      out->calibration_size_bytes = file->size_bytes;
      return absl::OkStatus();
    }
    case v1::CalibrationRef::SOURCE_NOT_SET:
      break;
  }
  return absl::InvalidArgumentError(
      "calibration: required (sha256 of an uploaded set, or uri + sha256)");
}

// recipe.calibration.sources: each an uploaded set (sha256) or a file under
// the allowed roots (file, hashed and parsed here; with sha256, it must
// match). The job's calibration_sha256 is the mix's identity
// (core/calib/mixed_calibration.h).
absl::Status ResolveCalibrationSources(const Recipe& recipe,
                                       const UriPolicy& policy,
                                       store::JobStore& store,
                                       int64_t max_bytes,
                                       ValidatedJobRequest* out) {
  std::vector<std::pair<std::string, double>> identity;
  for (size_t i = 0; i < recipe.calibration.sources.size(); ++i) {
    const CalibrationSource& source = recipe.calibration.sources[i];
    const std::string field =
        absl::StrCat("recipe.calibration.sources[", i, "]");
    CalibrationSourceSpec resolved;
    resolved.weight = source.weight;
    if (source.file.empty()) {
      absl::StatusOr<store::CalibrationSet> set =
          store.GetCalibrationSet(source.sha256);
      if (absl::IsNotFound(set.status())) {
        return absl::NotFoundError(
            absl::StrCat(field, ".sha256: no calibration set ", source.sha256,
                         " was uploaded"));
      }
      if (!set.ok()) return set.status();
      resolved.sha256 = set->sha256;
      resolved.path = set->path;
    } else {
      absl::StatusOr<CheckedCalibrationFile> file = ReadCheckedCalibrationFile(
          AsFileUri(source.file), source.sha256, policy, max_bytes,
          field + ".file", field + ".sha256");
      if (!file.ok()) return file.status();
      resolved.sha256 = file->sha256;
      resolved.path = file->path;
    }
    identity.emplace_back(resolved.sha256, resolved.weight);
    out->spec.calibration_sources.push_back(std::move(resolved));
  }
  out->spec.calibration_sha256 = CalibrationMixSha256(identity);
  out->spec.calibration_path.clear();
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckSha256(const std::string& sha256, absl::string_view field) {
  if (IsSha256Hex(sha256)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      field, ": \"", sha256, "\" is not a sha256 (64 lowercase hex digits)"));
}

absl::StatusOr<ValidatedJobRequest> ValidateCreateJobRequest(
    const v1::CreateJobRequest& request, const UriPolicy& policy,
    store::JobStore& store, int64_t max_calibration_bytes,
    bool calibration_optional) {
  if (request.ByteSizeLong() > kMaxRequestBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "request: ", request.ByteSizeLong(),
        " bytes; a CreateJobRequest may hold at most ", kMaxRequestBytes));
  }
  if (request.request_id().size() > kMaxRequestIdBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("request_id: ", request.request_id().size(),
                     " bytes; at most ", kMaxRequestIdBytes));
  }
  if (request.labels_size() > kMaxLabels) {
    return absl::InvalidArgumentError(absl::StrCat(
        "labels: ", request.labels_size(), " labels; at most ", kMaxLabels));
  }
  ValidatedJobRequest out;
  JobSpec& spec = out.spec;
  // Every file opened below must lie under an allowed root once resolved,
  // not just the URIs: a shard or config.json may be a symlink.
  const ScopedReadRoots confined(policy.roots());

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
  absl::StatusOr<Recipe> recipe = common::RecipeFromProto(request.recipe());
  if (!recipe.ok()) return recipe.status();
  if (const size_t bytes = RecipeToJson(*recipe).size();
      bytes > kMaxRecipeJsonBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "recipe: ", bytes, " bytes as JSON; at most ", kMaxRecipeJsonBytes));
  }
  absl::StatusOr<QuantizationPlan> plan = PlanQuantization(config, *recipe);
  if (!plan.ok()) return Prefixed(plan.status(), "recipe: ");
  absl::StatusOr<std::vector<SourceTensor>> stored =
      SourceTensorsOf(**checkpoint);
  if (!stored.ok()) return Prefixed(stored.status(), "checkpoint_uri: ");
  absl::StatusOr<OutputSize> output = ComputeOutputSize(
      *stored, config, *recipe, PlannedOutputDecisions(config, *recipe, *plan));
  if (!output.ok()) return Prefixed(output.status(), "recipe: ");
  out.output = *output;
  spec.work = EstimateJobWork(config, *recipe, *plan);
  if (JobRunsAsRounds(config, *recipe)) {
    spec.rounds = PlanRoundShardCounts(*recipe);
  }
  spec.recipe = *std::move(recipe);
  spec.warnings = plan->warnings;
  if (absl::Status s = CheckChatTemplate(spec.recipe, spec.checkpoint_path,
                                         policy, &spec.chat_template_sha256);
      !s.ok()) {
    return s;
  }
  if (!spec.recipe.gates.tasks.empty()) {
    if (absl::Status s = CheckTaskFile(spec.recipe, spec.checkpoint_path,
                                       config, policy, &spec.tasks_sha256);
        !s.ok()) {
      return s;
    }
  }
  if (!spec.recipe.gates.compare_to.empty()) {
    if (absl::Status s = ResolvePreviousRelease(spec.recipe.gates.compare_to,
                                                policy, store, config, &spec);
        !s.ok()) {
      return s;
    }
  }

  if (!spec.recipe.calibration.sources.empty()) {
    if (request.has_calibration()) {
      return absl::InvalidArgumentError(
          absl::StrCat("calibration: the recipe names calibration.sources (",
                       spec.recipe.calibration.sources.size(),
                       " sets mixed by weight); leave calibration unset"));
    }
    if (absl::Status s = ResolveCalibrationSources(spec.recipe, policy, store,
                                                   max_calibration_bytes, &out);
        !s.ok()) {
      return s;
    }
  } else if (!request.has_calibration() && !calibration_optional) {
    return absl::InvalidArgumentError(
        "calibration: required (sha256 of an uploaded set, or uri + sha256)");
  }
  if (!request.has_calibration()) {
    // The dry run without one: nothing to check.
  } else if (absl::Status s =
                 ResolveCalibration(request.calibration(), policy, store,
                                    max_calibration_bytes, &out);
             !s.ok()) {
    return s;
  }

  for (const auto& [key, value] : request.labels()) {
    if (key.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "labels: empty key (value \"", value.substr(0, 64), "\")"));
    }
    if (key.size() > kMaxLabelKeyBytes || value.size() > kMaxLabelValueBytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "labels: \"", key.substr(0, 64), "\": key of ", key.size(),
          " and value of ", value.size(), " bytes; at most ", kMaxLabelKeyBytes,
          " and ", kMaxLabelValueBytes));
    }
    spec.labels[key] = value;
  }
  return out;
}

}  // namespace quant::server

// `quantctl submit`; see submit_command.h.
#include "client/submit_command.h"

#include <filesystem>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/calib_command.h"
#include "client/common_flags.h"
#include "client/estimate_print.h"
#include "client/job_json.h"
#include "client/job_print.h"
#include "client/service_client.h"
#include "client/watch_command.h"
#include "common/recipe_convert.h"
#include "core/base/sha256.h"
#include "core/base/status_macros.h"
#include "core/recipe/recipe.h"
#include "nlohmann/json.hpp"

// Defined by `quantize` (one definition per program); submit reads them too.
ABSL_DECLARE_FLAG(std::string, recipe);
ABSL_DECLARE_FLAG(std::string, calibration);

ABSL_FLAG(std::string, request_id, "",
          "Idempotency key: submitting the same request again with it "
          "returns the job created the first time instead of a new one (a "
          "different request with the same key is refused).");
ABSL_FLAG(bool, dry_run, false,
          "Create nothing: print the plan quantd would run (tasks, tokens), "
          "the packed checkpoint's size and the time on its registered "
          "workers. --calibration is optional; a sha256 is checked, a local "
          "file is not uploaded.");
ABSL_FLAG(bool, wait, false,
          "Follow the job until it ends (like `quantctl watch`, progress on "
          "stderr) and exit 0 PASS, 3 FAIL, 1 FAILED or CANCELLED.");

namespace quant {
namespace {

// EstimateJob: the plan, output size and time, printed; nothing created.
absl::Status RunDryRun(ServiceClient& client, const std::string& calibration,
                       v1::CreateJobRequest request,
                       const CommandInvocation& invocation) {
  std::error_code error;
  if (LooksLikeSha256(calibration) &&
      !std::filesystem::exists(calibration, error)) {
    request.mutable_calibration()->set_sha256(
        absl::AsciiStrToLower(calibration));
  } else if (!calibration.empty()) {
    *invocation.err << "calibration " << calibration
                    << ": not uploaded by a dry run, not checked\n";
  }
  QUANT_ASSIGN_OR_RETURN(const v1::JobEstimate reply,
                         client.EstimateJob(request));
  for (const std::string& warning : reply.warnings()) {
    *invocation.err << "warning: " << warning << "\n";
  }
  PlanEstimate estimate;
  estimate.blocks = reply.blocks();
  estimate.tasks = reply.tasks();
  estimate.calibration_tokens = reply.calibration_tokens();
  estimate.heldout_tokens = reply.heldout_tokens();
  estimate.output.tensor_bytes = reply.output_bytes();
  estimate.output.source_tensor_bytes = reply.source_bytes();
  estimate.output.packed_layers = reply.packed_layers();
  estimate.output.kept_layers = reply.kept_layers();
  estimate.workers = reply.workers();
  if (reply.has_expected_seconds()) {
    estimate.seconds = reply.expected_seconds();
  }
  const std::string where =
      absl::StrCat(reply.workers(), " registered worker",
                   reply.workers() == 1 ? "" : "s", " with measured rates");
  if (absl::GetFlag(FLAGS_json)) {
    nlohmann::ordered_json json = PlanEstimateToJson(estimate);
    json["warnings"] = std::vector<std::string>(reply.warnings().begin(),
                                                reply.warnings().end());
    *invocation.out << json.dump(2) << "\n";
  } else {
    PrintPlanEstimate(estimate, where, *invocation.out);
  }
  return absl::OkStatus();
}

absl::Status RunSubmit(const CommandInvocation& invocation) {
  const std::string checkpoint = absl::GetFlag(FLAGS_checkpoint);
  const std::string recipe_path = absl::GetFlag(FLAGS_recipe);
  const std::string calibration = absl::GetFlag(FLAGS_calibration);
  const bool dry_run = absl::GetFlag(FLAGS_dry_run);
  for (const auto& [flag, value] :
       {std::pair<const char*, const std::string*>{"checkpoint", &checkpoint},
        {"recipe", &recipe_path}}) {
    if (value->empty()) {
      return UsageError(absl::StrCat("--", flag, " is required"));
    }
  }
  absl::StatusOr<std::map<std::string, std::string>> labels =
      ParseLabels(absl::GetFlag(FLAGS_label));
  if (!labels.ok()) return UsageError(labels.status().message());
  // Checked here so that a bad recipe costs no upload.
  QUANT_ASSIGN_OR_RETURN(const Recipe recipe, LoadRecipe(recipe_path));
  // A recipe with calibration.sources names its sets itself.
  const bool mixed = !recipe.calibration.sources.empty();
  if (calibration.empty() && !mixed && !dry_run) {
    return UsageError(
        "--calibration is required (unless the recipe names "
        "calibration.sources)");
  }
  if (!calibration.empty() && mixed) {
    return UsageError(
        absl::StrCat("--calibration: the recipe names calibration.sources (",
                     recipe.calibration.sources.size(),
                     " sets mixed by weight); leave --calibration out"));
  }

  v1::CreateJobRequest request;
  request.set_checkpoint_uri(CheckpointUri(checkpoint));
  *request.mutable_recipe() = common::RecipeToProto(recipe);
  for (const auto& [key, value] : *labels) {
    (*request.mutable_labels())[key] = value;
  }
  request.set_request_id(absl::GetFlag(FLAGS_request_id));

  // What the job will make of a local calibration set, before it is sent:
  // documents, tokens, the split and T/K per layer width (`calib inspect`).
  // A checkpoint that only quantd can see is not inspected here.
  std::error_code exists_error;
  const bool local_calibration =
      !calibration.empty() &&
      std::filesystem::is_regular_file(calibration, exists_error);
  const bool local_checkpoint =
      !absl::StrContains(checkpoint, "://") &&
      std::filesystem::exists(std::filesystem::path(checkpoint) / "config.json",
                              exists_error);
  if (local_calibration && local_checkpoint) {
    QUANT_ASSIGN_OR_RETURN(
        const CalibrationInspection inspection,
        InspectCalibrationForJob(calibration, checkpoint, checkpoint, recipe));
    *invocation.err << "calibration " << calibration << ":\n"
                    << FormatCalibrationInspection(inspection);
  }

  QUANT_ASSIGN_OR_RETURN(std::unique_ptr<ServiceClient> client,
                         ServiceClient::FromFlags());
  if (dry_run) {
    return RunDryRun(*client, calibration, std::move(request), invocation);
  }
  std::error_code error;
  if (mixed) {
    // quantd reads the recipe's sets from its allowed roots or its uploads.
  } else if (LooksLikeSha256(calibration) &&
             !std::filesystem::exists(calibration, error)) {
    request.mutable_calibration()->set_sha256(
        absl::AsciiStrToLower(calibration));
  } else {
    QUANT_ASSIGN_OR_RETURN(const v1::UploadCalibrationResponse uploaded,
                           client->UploadCalibration(calibration));
    *invocation.err << "calibration " << calibration << ": sha256 "
                    << uploaded.sha256() << ", " << uploaded.documents()
                    << " documents"
                    << (uploaded.already_present() ? " (already present)"
                                                   : " (uploaded)")
                    << "\n";
    request.mutable_calibration()->set_sha256(uploaded.sha256());
  }
  QUANT_ASSIGN_OR_RETURN(const v1::Job job, client->CreateJob(request));
  for (const std::string& warning : job.warnings()) {
    *invocation.err << "warning: " << warning << "\n";
  }

  const bool json_output = absl::GetFlag(FLAGS_json);
  if (!absl::GetFlag(FLAGS_wait)) {
    PrintJob(job, json_output, absl::StrCat(job.id(), "\n"), *invocation.out);
    return absl::OkStatus();
  }
  if (!json_output) *invocation.out << job.id() << "\n" << std::flush;
  return WatchAndPrintOutcome(*client, job.id(), json_output, invocation);
}

}  // namespace

std::string CheckpointUri(const std::string& checkpoint) {
  if (absl::StrContains(checkpoint, "://")) return checkpoint;
  std::error_code error;
  // Symlinks resolved: quantd's allowed roots are real paths, and a model
  // directory reached through a link must still be found under them.
  std::filesystem::path path = std::filesystem::weakly_canonical(
      std::filesystem::absolute(checkpoint, error), error);
  if (error) {
    error.clear();
    path = std::filesystem::absolute(checkpoint, error);
    if (error) path = checkpoint;  // The server names the bad URI.
  }
  std::string text = path.lexically_normal().string();
  // "dir/" normalizes to "/abs/dir/"; the URI names the directory.
  while (text.size() > 1 && text.back() == '/') text.pop_back();
  return absl::StrCat("file://", text);
}

bool LooksLikeSha256(const std::string& text) {
  return IsSha256Hex(absl::AsciiStrToLower(text));
}

Command SubmitCommand() {
  Command command;
  command.name = "submit";
  command.summary = "Create a quantization job on quantd; print its id.";
  command.usage =
      "submit --checkpoint DIR|URI --recipe FILE --calibration FILE|SHA256 "
      "[--label K=V ...] [--request_id ID] [--wait] [--dry_run] [--json] "
      "[connection flags]";
  command.description =
      "The checkpoint is a directory as quantd sees it (a plain path "
      "becomes file://ABSOLUTE_PATH) or a file:// URI; it must lie under "
      "one of quantd's allowed roots. The recipe (YAML or JSON, see "
      "`quantctl recipe validate`) is checked here and sent with the job. "
      "--calibration is a local file, uploaded first (as by `quantctl calib "
      "upload`), or the 64-hex sha256 of a set uploaded earlier. A local "
      "file with a local checkpoint is inspected first, on stderr, as by "
      "`quantctl calib inspect`: documents, tokens, lengths, the recipe's "
      "split and T/K per layer input width. --label "
      "may be repeated (values may not contain ','). Prints the job id "
      "(with --json the job as a JSON object). With --wait it follows the "
      "job (progress on stderr) and exits 0 verdict PASS, 3 verdict FAIL, 1 "
      "FAILED or CANCELLED; 2 is a usage error. --dry_run creates nothing "
      "and prints the plan quantd would run: tasks, calibration and "
      "held-out tokens, the packed checkpoint's size (the finalize fails "
      "a checkpoint larger than its layers predict) and the expected time "
      "on the registered workers' measured rates.";
  command.example =
      "quantctl submit --checkpoint /models/stories260K/hf-f32 --recipe "
      "recipes/stories260k-gptq-w4.yaml --calibration tinystories_val.txt "
      "--label team=lm --request_id nightly-2026-11-30 --wait";
  command.flags = {
      &absl::GetFlagReflectionHandle(FLAGS_checkpoint),
      &absl::GetFlagReflectionHandle(FLAGS_recipe),
      &absl::GetFlagReflectionHandle(FLAGS_calibration),
      &absl::GetFlagReflectionHandle(FLAGS_label),
      &absl::GetFlagReflectionHandle(FLAGS_request_id),
      &absl::GetFlagReflectionHandle(FLAGS_wait),
      &absl::GetFlagReflectionHandle(FLAGS_dry_run),
      &absl::GetFlagReflectionHandle(FLAGS_json),
  };
  for (const absl::CommandLineFlag* flag : ServiceFlags()) {
    command.flags.push_back(flag);
  }
  command.run = RunSubmit;
  return command;
}

}  // namespace quant

// `quantctl quantize --local`; see quantize_command.h.
#include "client/quantize_command.h"

#include <unistd.h>

#include <cstdio>
#include <ostream>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/common_flags.h"
#include "core/base/status_macros.h"
#include "core/base/thread_pool.h"
#include "core/kernels/dispatch.h"
#include "core/pipeline/audit_report.h"
#include "core/pipeline/local_pipeline.h"
#include "core/recipe/recipe.h"
#include "nlohmann/json.hpp"

ABSL_FLAG(bool, local, false,
          "Run the job in this process. Required: to run it on quantd's "
          "workers instead, upload the calibration set with `quantctl "
          "calib` and create the job with `quantctl submit`.");
ABSL_FLAG(std::string, calibration, "",
          "Calibration set: JSONL ({\"text\": ...} or {\"input_ids\": [...]} "
          "per line, or {\"messages\": [...]} conversations) or plain text "
          "with documents separated by empty lines. Split into calibration "
          "and held-out documents as the recipe says. Required unless the "
          "recipe names calibration.sources (several sets mixed by weight, "
          "each split on its own).");
ABSL_FLAG(std::string, recipe, "",
          "Recipe file, YAML or JSON (see `quantctl recipe validate`). "
          "Required.");
ABSL_FLAG(std::string, work_dir, "",
          "Keep every block's output in this directory; rerunning the same "
          "job with it (after a crash or Ctrl-C) resumes from the last "
          "finished block instead of starting over.");
ABSL_FLAG(int64_t, max_shard_mb, 4096,
          "Largest safetensors shard in MiB; bigger checkpoints are split "
          "into model-0000i-of-0000n.safetensors with an index.");
ABSL_FLAG(int64_t, max_activation_mb, quant::kDefaultMaxActivationBytes >> 20,
          "MiB of hidden states (calibration and held-out activations "
          "between blocks) kept in memory, and as much again for what a "
          "block keeps between its layer groups. Larger ones stay in files "
          "(the --work_dir, else a folder beside --out removed at the end) "
          "and are read a chunk of sequences at a time; the output is the "
          "same. 0: always in files.");
ABSL_FLAG(int, threads, 0,
          "Threads each block runs on: that many chunks of sequences through "
          "the forward pass at once, the Hessian's tiles and a layer group's "
          "layers side by side (0: every core this process may use). The "
          "output is the same bytes for any value.");

namespace quant {
namespace {

// Progress on stderr: a line per layer and block, as they finish.
class ProgressPrinter : public PipelineObserver {
 public:
  explicit ProgressPrinter(std::ostream* err) : err_(err) {}
  void OnStage(const std::string& what) override {
    *err_ << "[quantize] " << what << "\n" << std::flush;
  }
  void OnBlockStart(int block, int blocks) override {
    *err_ << absl::StrFormat("[quantize] block %d/%d\n", block + 1, blocks)
          << std::flush;
  }
  void OnBlockResumed(int block, int blocks) override {
    *err_ << absl::StrFormat(
                 "[quantize] block %d/%d: output found in the "
                 "work directory, not recomputed\n",
                 block + 1, blocks)
          << std::flush;
  }
  void OnLayer(const LayerResult& l) override {
    if (!l.quantized) {
      *err_ << absl::StrFormat("  %-36s kept: %s\n", l.name, l.reason);
    } else {
      *err_ << absl::StrFormat(
          "  %-36s %-4s held-out rel. error %.5f (rtn %.5f) gain %.3f%s\n",
          l.name, l.audit.method, l.audit.method_heldout.relative_error,
          l.audit.rtn_heldout.relative_error, l.audit.gain_heldout,
          l.audit.previous_heldout.has_value()
              ? absl::StrFormat(", previous release %.5f",
                                l.audit.previous_heldout->relative_error)
              : std::string());
    }
    *err_ << std::flush;
  }
  void OnBlockDone(int block, int blocks, double seconds) override {
    *err_ << absl::StrFormat("[quantize] block %d/%d done in %.1f s\n",
                             block + 1, blocks, seconds)
          << std::flush;
  }

 private:
  std::ostream* err_;
};

absl::Status RunQuantize(const CommandInvocation& invocation) {
  if (!absl::GetFlag(FLAGS_local)) {
    return UsageError(
        "--local is required: `quantctl quantize` runs the job in this "
        "process; to run it on quantd's workers, upload the calibration "
        "set with `quantctl calib` and create the job with `quantctl "
        "submit`");
  }
  QUANT_RETURN_IF_ERROR(ApplyIsaFlag());
  LocalQuantizeOptions options;
  options.checkpoint_dir = absl::GetFlag(FLAGS_checkpoint);
  options.calibration_path = absl::GetFlag(FLAGS_calibration);
  options.out_dir = absl::GetFlag(FLAGS_out);
  const std::string recipe_path = absl::GetFlag(FLAGS_recipe);
  for (const auto& [flag, value] : {std::pair<const char*, const std::string*>{
                                        "checkpoint", &options.checkpoint_dir},
                                    {"recipe", &recipe_path},
                                    {"out", &options.out_dir}}) {
    if (value->empty()) {
      return UsageError(absl::StrCat("--", flag, " is required"));
    }
  }
  const int64_t shard_mb = absl::GetFlag(FLAGS_max_shard_mb);
  if (shard_mb <= 0) {
    return UsageError(
        absl::StrCat("--max_shard_mb must be positive, got ", shard_mb));
  }
  options.max_shard_bytes = shard_mb << 20;
  const int threads = absl::GetFlag(FLAGS_threads);
  if (threads < 0) {
    return UsageError(
        absl::StrCat("--threads must be >= 0 (0: all cores), got ", threads));
  }
  options.threads = threads > 0 ? threads : ThreadPool::AvailableCores();
  options.work_dir = absl::GetFlag(FLAGS_work_dir);
  const int64_t activation_mb = absl::GetFlag(FLAGS_max_activation_mb);
  if (activation_mb < 0) {
    return UsageError(
        absl::StrCat("--max_activation_mb must be >= 0, got ", activation_mb));
  }
  options.max_activation_bytes = activation_mb << 20;
  QUANT_ASSIGN_OR_RETURN(options.recipe, LoadRecipe(recipe_path));
  const bool has_sources = !options.recipe.calibration.sources.empty();
  if (options.calibration_path.empty() && !has_sources) {
    return UsageError(
        "--calibration is required (unless the recipe names "
        "calibration.sources)");
  }
  if (!options.calibration_path.empty() && has_sources) {
    return UsageError(
        absl::StrCat("--calibration: the recipe names calibration.sources (",
                     options.recipe.calibration.sources.size(),
                     " sets mixed by weight); leave --calibration out"));
  }

  const bool json_output = absl::GetFlag(FLAGS_json);
  ProgressPrinter printer(invocation.err);
  if (!json_output) {
    printer.OnStage(
        absl::StrCat("kernels ", kernels::DescribeIsa(kernels::ProcessIsa())));
  }
  QUANT_ASSIGN_OR_RETURN(
      LocalQuantizeResult result,
      RunLocalQuantization(options, json_output ? nullptr : &printer));
  const std::string verdict = result.passed ? "PASS" : "FAIL";
  if (json_output) {
    nlohmann::json out = result.audit;
    out["output"] = options.out_dir;
    out["warnings"] = result.warnings;
    out["kernels"] = KernelsJson();
    *invocation.out << out.dump(2) << "\n";
  } else {
    for (const std::string& w : result.warnings) {
      *invocation.out << "warning: " << w << "\n";
    }
    *invocation.out << FormatAuditTable(result.audit)
                    << "packed checkpoint: " << options.out_dir << " (kernels "
                    << kernels::IsaName(kernels::ProcessIsa()) << ")\n";
  }
  if (!result.passed) {
    return GateFailedError(absl::StrCat(
        "gate verdict FAIL (see ", options.out_dir,
        "/audit.json); the checkpoint was written but must not ship"));
  }
  return absl::OkStatus();
}

}  // namespace

Command QuantizeCommand() {
  Command command;
  command.name = "quantize";
  command.summary =
      "Quantize a checkpoint with a recipe and a calibration set; write the "
      "packed checkpoint, audit and gate verdict.";
  command.usage =
      "quantize --local --checkpoint DIR --calibration FILE --recipe FILE "
      "--out DIR [--work_dir DIR] [--max_shard_mb N] [--max_activation_mb N] "
      "[--threads N] [--isa LEVEL] [--json]";
  command.description =
      "Runs the job block by block in this process: the calibration set is "
      "split into calibration and held-out documents, each decoder block's "
      "linear layers are quantized (rtn, gptq or awq) and audited against "
      "round-to-nearest on both splits, and the packed checkpoint (gptq or "
      "compressed-tensors format) is written to --out with audit.json and "
      "manifest.json. The release gates (held-out perplexity ratio, mean KL, "
      "top-1 agreement against the unquantized model) are evaluated on the "
      "packed checkpoint as read back from disk. Progress goes to stderr "
      "(not with --json). Exit codes: 0 PASS, 3 gates FAIL (the checkpoint "
      "is still written), 1 error (nothing is left at --out), 2 usage.";
  command.example =
      "quantctl quantize --local --checkpoint models/stories260K/hf-f32 "
      "--calibration tinystories.txt --recipe recipe.yaml --out out/w4";
  command.flags = {
      &absl::GetFlagReflectionHandle(FLAGS_local),
      &absl::GetFlagReflectionHandle(FLAGS_checkpoint),
      &absl::GetFlagReflectionHandle(FLAGS_calibration),
      &absl::GetFlagReflectionHandle(FLAGS_recipe),
      &absl::GetFlagReflectionHandle(FLAGS_out),
      &absl::GetFlagReflectionHandle(FLAGS_work_dir),
      &absl::GetFlagReflectionHandle(FLAGS_max_shard_mb),
      &absl::GetFlagReflectionHandle(FLAGS_max_activation_mb),
      &absl::GetFlagReflectionHandle(FLAGS_threads),
      &absl::GetFlagReflectionHandle(FLAGS_isa),
      &absl::GetFlagReflectionHandle(FLAGS_json),
  };
  command.run = RunQuantize;
  return command;
}

}  // namespace quant

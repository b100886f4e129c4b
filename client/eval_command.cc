// `quantctl eval`: read the text file, load the checkpoint (and reference;
// either may be packed, GPTQ or compressed-tensors) and its tokenizer, run
// the windowed evaluation, print text or JSON.
#include "client/eval_command.h"

#include <unistd.h>

#include <functional>
#include <iostream>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "client/common_flags.h"
#include "core/base/file_util.h"
#include "core/base/status_macros.h"
#include "core/calib/calibration_file.h"
#include "core/eval/evaluate.h"
#include "core/eval/greedy_continuation.h"
#include "core/forward/llama_model.h"
#include "core/kernels/dispatch.h"
#include "core/model/checkpoint.h"
#include "core/pipeline/heldout_windows.h"
#include "core/text/tokenizer.h"
#include "nlohmann/json.hpp"

// Defined in tokenize_command.cc: a flag name may be defined once per
// program, and both commands take --text.
ABSL_DECLARE_FLAG(std::string, text);

ABSL_FLAG(std::string, reference, "",
          "Optional reference checkpoint with the same tokenizer (e.g. the "
          "unquantized model): adds ppl ratio, KL and top-1 agreement.");
ABSL_FLAG(int32_t, seq_len, 256,
          "Window length in tokens (at least 2, at most the model's "
          "max_position_embeddings).");
ABSL_FLAG(int32_t, max_documents, 0,
          "Use only the first N documents of --text; 0 = all.");
ABSL_FLAG(std::string, heldout_of, "",
          "A packed checkpoint directory (or its manifest.json) made by "
          "`quantctl quantize`: evaluate on that job's held-out windows, "
          "rebuilt from the manifest's recipe and split, instead of windows "
          "of --text. --text must then be the job's calibration file "
          "(checked by sha256); --seq_len, --packing and --max_documents "
          "come from the job.");
ABSL_FLAG(int32_t, max_windows, 0,
          "Evaluate only the first N windows; 0 = all.");
ABSL_FLAG(std::string, prompt, "",
          "Also print the greedy continuation of this prompt (after a BOS), "
          "side by side with the reference's when --reference is given.");
ABSL_FLAG(std::string, prompts, "",
          "A file of prompts, one per non-empty line, continued like "
          "--prompt.");
ABSL_FLAG(int32_t, max_new_tokens, 32,
          "Tokens generated per prompt (greedy; stops at EOS).");
ABSL_FLAG(std::string, packing, "document",
          "How documents become windows: \"document\" (each document in "
          "its own windows; no context across documents) or \"concatenate\" "
          "(one stream cut into consecutive windows).");

namespace quant {
namespace {

using nlohmann::json;

constexpr absl::string_view kPerDocument = "document";
constexpr absl::string_view kConcatenate = "concatenate";

absl::string_view PackingName(WindowPacking packing) {
  return packing == WindowPacking::kConcatenate ? kConcatenate : kPerDocument;
}

// The quant_method of a checkpoint's quantization_config; empty when it
// is unquantized.
std::string QuantizationOf(const Checkpoint& checkpoint) {
  return checkpoint.config().quantization_method.value_or("");
}

json QuantizationJson(const std::string& method) {
  return method.empty() ? json(nullptr) : json(method);
}

// Which checkpoints were evaluated: their quant_methods ("" = unquantized).
struct EvaluatedCheckpoints {
  std::string quantization;
  std::string reference_quantization;
  bool has_reference = false;
};

json EvaluationToJson(const TextEvaluation& evaluation,
                      const CalibrationFile& file,
                      const TextEvaluationOptions& options,
                      const EvaluatedCheckpoints& checkpoints) {
  const bool has_reference = checkpoints.has_reference;
  const NextTokenMetrics& m = evaluation.metrics;
  json result = json::object();
  result["checkpoint"] = absl::GetFlag(FLAGS_checkpoint);
  result["quantization"] = QuantizationJson(checkpoints.quantization);
  result["text"] = absl::GetFlag(FLAGS_text);
  result["text_sha256"] = file.sha256;
  result["seq_len"] = options.seq_len;
  result["packing"] = std::string(PackingName(options.packing));
  const std::string heldout_of = absl::GetFlag(FLAGS_heldout_of);
  result["heldout_of"] = heldout_of.empty() ? json(nullptr) : json(heldout_of);
  result["documents"] = evaluation.documents;
  result["input_tokens"] = evaluation.input_tokens;
  result["windows"] = evaluation.windows;
  result["tokens"] = m.tokens;
  // The checkpoint is the "quantized" side of the metrics.
  result["nll"] = m.quantized_nll;
  result["perplexity"] = m.quantized_ppl;
  if (has_reference) {
    result["reference"] = absl::GetFlag(FLAGS_reference);
    result["reference_quantization"] =
        QuantizationJson(checkpoints.reference_quantization);
    result["reference_nll"] = m.reference_nll;
    result["reference_perplexity"] = m.reference_ppl;
    result["ppl_ratio"] = m.ppl_ratio;
    result["mean_kl"] = m.mean_kl;
    result["top1_agreement"] = m.top1_agreement;
  }
  return result;
}

std::string EvaluationToText(const TextEvaluation& evaluation,
                             const CalibrationFile& file,
                             const TextEvaluationOptions& options,
                             const EvaluatedCheckpoints& checkpoints) {
  const bool has_reference = checkpoints.has_reference;
  const NextTokenMetrics& m = evaluation.metrics;
  std::string text = absl::StrFormat(
      "checkpoint            %s\n"
      "quantization          %s\n"
      "text                  %s (sha256 %s)\n"
      "documents             %d\n"
      "windows               %d of seq_len %d, packing %s (%d input "
      "tokens)\n"
      "tokens scored         %d\n"
      "mean NLL              %.6f nats/token\n"
      "perplexity            %.4f\n",
      absl::GetFlag(FLAGS_checkpoint),
      checkpoints.quantization.empty() ? "none" : checkpoints.quantization,
      absl::GetFlag(FLAGS_text), file.sha256, evaluation.documents,
      evaluation.windows, options.seq_len, PackingName(options.packing),
      evaluation.input_tokens, m.tokens, m.quantized_nll, m.quantized_ppl);
  if (has_reference) {
    absl::StrAppendFormat(
        &text,
        "reference             %s\n"
        "ref quantization      %s\n"
        "reference NLL         %.6f nats/token\n"
        "reference perplexity  %.4f\n"
        "ppl ratio             %.6f (checkpoint / reference)\n"
        "mean KL               %.6g nats/token (reference || checkpoint)\n"
        "top-1 agreement       %.4f\n",
        absl::GetFlag(FLAGS_reference),
        checkpoints.reference_quantization.empty()
            ? "none"
            : checkpoints.reference_quantization,
        m.reference_nll, m.reference_ppl, m.ppl_ratio, m.mean_kl,
        m.top1_agreement);
  }
  return text;
}

// --prompt and the lines of --prompts.
absl::StatusOr<std::vector<std::string>> Prompts() {
  std::vector<std::string> prompts;
  if (!absl::GetFlag(FLAGS_prompt).empty()) {
    prompts.push_back(absl::GetFlag(FLAGS_prompt));
  }
  const std::string path = absl::GetFlag(FLAGS_prompts);
  if (!path.empty()) {
    QUANT_ASSIGN_OR_RETURN(std::string text,
                           ReadFileToString(path, size_t{1} << 20));
    for (absl::string_view line : absl::StrSplit(text, '\n')) {
      line = absl::StripAsciiWhitespace(line);
      if (!line.empty()) prompts.emplace_back(line);
    }
  }
  return prompts;
}

json ContinuationsToJson(const std::vector<ContinuationComparison>& list,
                         bool has_reference) {
  json out = json::array();
  for (const ContinuationComparison& c : list) {
    json item = {{"prompt", c.prompt}, {"ids", c.ids}, {"text", c.text}};
    if (has_reference) {
      item["reference_ids"] = c.reference_ids;
      item["reference_text"] = c.reference_text;
      item["agreeing_prefix"] = c.agreeing_prefix;
    }
    out.push_back(std::move(item));
  }
  return out;
}

std::string ContinuationsToText(const std::vector<ContinuationComparison>& list,
                                bool has_reference) {
  std::string text;
  for (const ContinuationComparison& c : list) {
    absl::StrAppend(&text, "\nprompt      ", c.prompt, "\ncheckpoint  ", c.text,
                    "\n");
    if (has_reference) {
      absl::StrAppend(&text, "reference   ", c.reference_text, "\n",
                      "agree       first ", c.agreeing_prefix, " of ",
                      c.ids.size(), " tokens\n");
    }
  }
  return text;
}

// A progress line on stderr when it is a terminal (never with --json).
std::function<void(int, int)> ProgressLine() {
  if (absl::GetFlag(FLAGS_json) || !::isatty(STDERR_FILENO)) return nullptr;
  return [](int done, int total) {
    std::cerr << "\r[eval] windows " << done << "/" << total
              << (done == total ? "\n" : "") << std::flush;
  };
}

// The evaluation options from the flags; usage errors name the flag.
absl::StatusOr<TextEvaluationOptions> EvaluationOptionsFromFlags() {
  TextEvaluationOptions options;
  options.seq_len = absl::GetFlag(FLAGS_seq_len);
  options.max_documents = absl::GetFlag(FLAGS_max_documents);
  if (options.seq_len < 2) {
    return UsageError(
        absl::StrCat("--seq_len must be at least 2, got ", options.seq_len));
  }
  const std::string packing = absl::GetFlag(FLAGS_packing);
  if (packing == kConcatenate) {
    options.packing = WindowPacking::kConcatenate;
  } else if (packing == kPerDocument) {
    options.packing = WindowPacking::kPerDocument;
  } else {
    return UsageError(absl::StrCat("--packing must be \"", kPerDocument,
                                   "\" or \"", kConcatenate, "\", got \"",
                                   packing, "\""));
  }
  if (options.max_documents < 0) {
    return UsageError(absl::StrCat("--max_documents must not be negative, got ",
                                   options.max_documents));
  }
  options.max_windows = absl::GetFlag(FLAGS_max_windows);
  if (options.max_windows < 0) {
    return UsageError(absl::StrCat("--max_windows must not be negative, got ",
                                   options.max_windows));
  }
  if (!absl::GetFlag(FLAGS_heldout_of).empty() &&
      (options.max_documents != 0 || options.max_windows != 0)) {
    return UsageError(
        "--max_documents and --max_windows do not apply with --heldout_of "
        "(the job's split decides the windows)");
  }
  options.progress = ProgressLine();
  return options;
}

// The checkpoint (and reference) loaded for evaluation, with the
// checkpoint's tokenizer.
struct EvaluatedModels {
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<LlamaModel> model;
  std::unique_ptr<LlamaModel> reference;  // Null without --reference.
  EvaluatedCheckpoints checkpoints;
};

absl::StatusOr<EvaluatedModels> LoadEvaluatedModels(
    const std::string& checkpoint_dir, const std::string& reference_dir) {
  // Packed checkpoints (GPTQ, compressed-tensors) evaluate as the runtimes
  // that read them would: dequantized to float32.
  CheckpointOptions checkpoint_options;
  checkpoint_options.allow_packed = true;
  QUANT_ASSIGN_OR_RETURN(const std::unique_ptr<Checkpoint> checkpoint,
                         Checkpoint::Open(checkpoint_dir, checkpoint_options));
  std::unique_ptr<Checkpoint> reference_checkpoint;
  if (!reference_dir.empty()) {
    QUANT_ASSIGN_OR_RETURN(reference_checkpoint,
                           Checkpoint::Open(reference_dir, checkpoint_options));
  }
  EvaluatedModels models;
  models.checkpoints.quantization = QuantizationOf(*checkpoint);
  if (reference_checkpoint != nullptr) {
    models.checkpoints.reference_quantization =
        QuantizationOf(*reference_checkpoint);
  }
  QUANT_ASSIGN_OR_RETURN(models.tokenizer,
                         Tokenizer::LoadFromDirectory(checkpoint_dir));
  QUANT_ASSIGN_OR_RETURN(models.model, LlamaModel::Load(*checkpoint));
  if (reference_checkpoint != nullptr) {
    QUANT_ASSIGN_OR_RETURN(models.reference,
                           LlamaModel::Load(*reference_checkpoint));
  }
  models.checkpoints.has_reference = models.reference != nullptr;
  return models;
}

// The windows the job in --heldout_of gated on, evaluated the same way;
// `options` takes the job's seq_len and packing.
absl::StatusOr<TextEvaluation> EvaluateHeldoutOf(
    const std::string& heldout_of, const EvaluatedModels& models,
    const CalibrationFile& file, TextEvaluationOptions* options) {
  QUANT_ASSIGN_OR_RETURN(
      const CalibrationSplit split,
      SplitFromManifest(heldout_of, file, *models.tokenizer));
  options->seq_len = split.heldout.seq_len;
  options->packing = split.options.packing;
  TextEvaluation evaluation;
  QUANT_ASSIGN_OR_RETURN(
      evaluation.metrics,
      EvaluateWindows(*models.model, models.reference.get(), split.heldout,
                      options->batch_windows, options->progress));
  evaluation.documents = static_cast<int>(split.heldout_documents.size());
  evaluation.input_tokens = split.heldout.RealTokens();
  evaluation.windows = static_cast<int>(split.heldout.sequences.size());
  return evaluation;
}

absl::Status RunEval(const CommandInvocation& invocation) {
  QUANT_RETURN_IF_ERROR(ApplyIsaFlag());
  const std::string checkpoint_dir = absl::GetFlag(FLAGS_checkpoint);
  const std::string text_path = absl::GetFlag(FLAGS_text);
  if (checkpoint_dir.empty()) {
    return UsageError("--checkpoint DIR is required");
  }
  if (text_path.empty()) {
    return UsageError("--text FILE is required");
  }
  QUANT_ASSIGN_OR_RETURN(TextEvaluationOptions options,
                         EvaluationOptionsFromFlags());
  const int max_new_tokens = absl::GetFlag(FLAGS_max_new_tokens);
  if (max_new_tokens < 1) {
    return UsageError(absl::StrCat("--max_new_tokens must be positive, got ",
                                   max_new_tokens));
  }
  QUANT_ASSIGN_OR_RETURN(const std::vector<std::string> prompts, Prompts());

  // The cheap checks first, so that a bad file or directory fails before
  // any weight is read.
  QUANT_ASSIGN_OR_RETURN(const CalibrationFile file,
                         LoadCalibrationFile(text_path));
  QUANT_ASSIGN_OR_RETURN(
      const EvaluatedModels models,
      LoadEvaluatedModels(checkpoint_dir, absl::GetFlag(FLAGS_reference)));
  const std::string heldout_of = absl::GetFlag(FLAGS_heldout_of);
  TextEvaluation evaluation;
  if (heldout_of.empty()) {
    QUANT_ASSIGN_OR_RETURN(evaluation,
                           EvaluateText(*models.model, models.reference.get(),
                                        *models.tokenizer, file, options));
  } else {
    QUANT_ASSIGN_OR_RETURN(
        evaluation, EvaluateHeldoutOf(heldout_of, models, file, &options));
  }
  QUANT_ASSIGN_OR_RETURN(
      const std::vector<ContinuationComparison> continuations,
      CompareContinuations(*models.model, models.reference.get(),
                           *models.tokenizer, prompts, max_new_tokens));
  const EvaluatedCheckpoints& evaluated = models.checkpoints;
  if (absl::GetFlag(FLAGS_json)) {
    json result = EvaluationToJson(evaluation, file, options, evaluated);
    result["kernels"] = KernelsJson();
    if (!prompts.empty()) {
      result["continuations"] =
          ContinuationsToJson(continuations, evaluated.has_reference);
    }
    *invocation.out << result.dump(2, ' ', /*ensure_ascii=*/false,
                                   json::error_handler_t::replace)
                    << "\n";
  } else {
    *invocation.out << EvaluationToText(evaluation, file, options, evaluated)
                    << ContinuationsToText(continuations,
                                           evaluated.has_reference)
                    << "kernels: "
                    << kernels::DescribeIsa(kernels::ProcessIsa()) << "\n";
  }
  return absl::OkStatus();
}

}  // namespace

Command EvalCommand() {
  Command command;
  command.name = "eval";
  command.summary =
      "Perplexity of a checkpoint on a text file; with --reference also ppl "
      "ratio, KL and top-1 agreement.";
  command.usage =
      "eval --checkpoint DIR --text FILE [--reference DIR] [--seq_len N] "
      "[--max_documents N] [--max_windows N] [--packing document|concatenate] "
      "[--heldout_of OUT] [--prompt STR] [--prompts FILE] [--max_new_tokens N] "
      "[--json]";
  command.description =
      "Reads FILE as a calibration file (JSONL with {\"text\": ...} or\n"
      "{\"input_ids\": [...]} per line, or paragraphs separated by blank\n"
      "lines) and tokenizes its documents in order with the checkpoint's\n"
      "tokenizer, each text document stripped of surrounding whitespace and\n"
      "preceded by a BOS. With --packing document (default) each document is\n"
      "cut into its own windows of --seq_len tokens, so no context crosses\n"
      "documents; with --packing concatenate the documents form one stream\n"
      "cut into consecutive windows. Final partial windows are kept. Every\n"
      "position whose next token is in the same window is scored; the last\n"
      "position of each window is not. (The default reproduces llama2.c's\n"
      "reference NLL of stories260K.) Prints the positions scored\n"
      "(\"tokens\"), the mean NLL in nats and the perplexity.\n"
      "With --reference DIR (same tokenizer) it also evaluates the reference\n"
      "on the same windows and prints the ppl ratio (checkpoint / reference),\n"
      "the mean KL(reference || checkpoint) and the top-1 agreement.\n"
      "Either checkpoint may be packed (config.json quantization_config of\n"
      "quant_method \"gptq\" v1 or \"compressed-tensors\" pack-quantized):\n"
      "its packed layers are dequantized as runtimes do.\n"
      "With --heldout_of OUT (a `quantctl quantize` output) the windows are\n"
      "that job's held-out split, so the perplexity, ratio, KL and top-1\n"
      "agreement equal the gate values in OUT/audit.json.\n"
      "--json keys: checkpoint, quantization (quant_method or null), text,\n"
      "text_sha256, seq_len, packing, heldout_of, documents, input_tokens,\n"
      "windows,\n"
      "tokens, nll, perplexity, and with a reference: reference,\n"
      "reference_quantization, reference_nll, reference_perplexity,\n"
      "ppl_ratio, mean_kl, top1_agreement; with --prompt/--prompts,\n"
      "continuations: [{prompt, ids, text, reference_ids, reference_text,\n"
      "agreeing_prefix}]. A progress line goes to stderr when it is a\n"
      "terminal (never with --json). Runs locally in float32; no\n"
      "server.";
  command.example =
      "quantctl eval --checkpoint ../shared/models/stories260K/hf-bf16 "
      "--reference ../shared/models/stories260K/hf-f32 "
      "--text ../shared/data/tinystories_val.txt --max_documents 300";
  command.flags = {&absl::GetFlagReflectionHandle(FLAGS_isa),
                   &absl::GetFlagReflectionHandle(FLAGS_checkpoint),
                   &absl::GetFlagReflectionHandle(FLAGS_text),
                   &absl::GetFlagReflectionHandle(FLAGS_reference),
                   &absl::GetFlagReflectionHandle(FLAGS_seq_len),
                   &absl::GetFlagReflectionHandle(FLAGS_max_documents),
                   &absl::GetFlagReflectionHandle(FLAGS_packing),
                   &absl::GetFlagReflectionHandle(FLAGS_heldout_of),
                   &absl::GetFlagReflectionHandle(FLAGS_max_windows),
                   &absl::GetFlagReflectionHandle(FLAGS_prompt),
                   &absl::GetFlagReflectionHandle(FLAGS_prompts),
                   &absl::GetFlagReflectionHandle(FLAGS_max_new_tokens),
                   &absl::GetFlagReflectionHandle(FLAGS_json)};
  command.min_args = 0;
  command.max_args = 0;
  command.run = RunEval;
  return command;
}

}  // namespace quant

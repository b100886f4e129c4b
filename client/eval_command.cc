// `quantctl eval`: read the text file, load the checkpoint (and reference)
// and its tokenizer, run the windowed evaluation, print text or JSON.
#include "client/eval_command.h"

#include <memory>
#include <ostream>
#include <string>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "client/common_flags.h"
#include "core/base/status_macros.h"
#include "core/calib/calibration_file.h"
#include "core/eval/evaluate.h"
#include "core/forward/llama_model.h"
#include "core/model/checkpoint.h"
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

json EvaluationToJson(const TextEvaluation& evaluation,
                      const CalibrationFile& file,
                      const TextEvaluationOptions& options,
                      bool has_reference) {
  const NextTokenMetrics& m = evaluation.metrics;
  json result = json::object();
  result["checkpoint"] = absl::GetFlag(FLAGS_checkpoint);
  result["text"] = absl::GetFlag(FLAGS_text);
  result["text_sha256"] = file.sha256;
  result["seq_len"] = options.seq_len;
  result["packing"] = std::string(PackingName(options.packing));
  result["documents"] = evaluation.documents;
  result["input_tokens"] = evaluation.input_tokens;
  result["windows"] = evaluation.windows;
  result["tokens"] = m.tokens;
  // The checkpoint is the "quantized" side of the metrics.
  result["nll"] = m.quantized_nll;
  result["perplexity"] = m.quantized_ppl;
  if (has_reference) {
    result["reference"] = absl::GetFlag(FLAGS_reference);
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
                             bool has_reference) {
  const NextTokenMetrics& m = evaluation.metrics;
  std::string text = absl::StrFormat(
      "checkpoint            %s\n"
      "text                  %s (sha256 %s)\n"
      "documents             %d\n"
      "windows               %d of seq_len %d, packing %s (%d input "
      "tokens)\n"
      "tokens scored         %d\n"
      "mean NLL              %.6f nats/token\n"
      "perplexity            %.4f\n",
      absl::GetFlag(FLAGS_checkpoint), absl::GetFlag(FLAGS_text), file.sha256,
      evaluation.documents, evaluation.windows, options.seq_len,
      PackingName(options.packing), evaluation.input_tokens, m.tokens,
      m.quantized_nll, m.quantized_ppl);
  if (has_reference) {
    absl::StrAppendFormat(
        &text,
        "reference             %s\n"
        "reference NLL         %.6f nats/token\n"
        "reference perplexity  %.4f\n"
        "ppl ratio             %.6f (checkpoint / reference)\n"
        "mean KL               %.6g nats/token (reference || checkpoint)\n"
        "top-1 agreement       %.4f\n",
        absl::GetFlag(FLAGS_reference), m.reference_nll, m.reference_ppl,
        m.ppl_ratio, m.mean_kl, m.top1_agreement);
  }
  return text;
}

absl::Status RunEval(const CommandInvocation& invocation) {
  const std::string checkpoint_dir = absl::GetFlag(FLAGS_checkpoint);
  const std::string text_path = absl::GetFlag(FLAGS_text);
  const std::string reference_dir = absl::GetFlag(FLAGS_reference);
  if (checkpoint_dir.empty()) {
    return UsageError("--checkpoint DIR is required");
  }
  if (text_path.empty()) {
    return UsageError("--text FILE is required");
  }
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

  // The cheap checks first, so that a bad file or directory fails before
  // any weight is read.
  QUANT_ASSIGN_OR_RETURN(const CalibrationFile file,
                         LoadCalibrationFile(text_path));
  QUANT_ASSIGN_OR_RETURN(const std::unique_ptr<Checkpoint> checkpoint,
                         Checkpoint::Open(checkpoint_dir));
  std::unique_ptr<Checkpoint> reference_checkpoint;
  if (!reference_dir.empty()) {
    QUANT_ASSIGN_OR_RETURN(reference_checkpoint,
                           Checkpoint::Open(reference_dir));
  }
  QUANT_ASSIGN_OR_RETURN(const std::unique_ptr<Tokenizer> tokenizer,
                         Tokenizer::LoadFromDirectory(checkpoint_dir));
  QUANT_ASSIGN_OR_RETURN(const std::unique_ptr<LlamaModel> model,
                         LlamaModel::Load(*checkpoint));
  std::unique_ptr<LlamaModel> reference;
  if (reference_checkpoint != nullptr) {
    QUANT_ASSIGN_OR_RETURN(reference, LlamaModel::Load(*reference_checkpoint));
  }
  const bool has_reference = reference != nullptr;
  QUANT_ASSIGN_OR_RETURN(
      const TextEvaluation evaluation,
      EvaluateText(*model, reference.get(), *tokenizer, file, options));
  if (absl::GetFlag(FLAGS_json)) {
    *invocation.out << EvaluationToJson(evaluation, file, options,
                                        has_reference)
                           .dump(2, ' ', /*ensure_ascii=*/false,
                                 json::error_handler_t::replace)
                    << "\n";
  } else {
    *invocation.out << EvaluationToText(evaluation, file, options,
                                        has_reference);
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
      "[--max_documents N] [--packing document|concatenate] [--json]";
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
      "--json keys: checkpoint, text, text_sha256, seq_len, packing,\n"
      "documents, input_tokens, windows, tokens, nll, perplexity, and with a\n"
      "reference: reference, reference_nll, reference_perplexity, ppl_ratio,\n"
      "mean_kl, top1_agreement. Runs locally in float32; no server.";
  command.example =
      "quantctl eval --checkpoint ../shared/models/stories260K/hf-bf16 "
      "--reference ../shared/models/stories260K/hf-f32 "
      "--text ../shared/data/tinystories_val.txt --max_documents 300";
  command.flags = {&absl::GetFlagReflectionHandle(FLAGS_checkpoint),
                   &absl::GetFlagReflectionHandle(FLAGS_text),
                   &absl::GetFlagReflectionHandle(FLAGS_reference),
                   &absl::GetFlagReflectionHandle(FLAGS_seq_len),
                   &absl::GetFlagReflectionHandle(FLAGS_max_documents),
                   &absl::GetFlagReflectionHandle(FLAGS_packing),
                   &absl::GetFlagReflectionHandle(FLAGS_json)};
  command.min_args = 0;
  command.max_args = 0;
  command.run = RunEval;
  return command;
}

}  // namespace quant

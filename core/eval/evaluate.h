// Perplexity evaluation of a model on text, optionally against a reference
// model on exactly the same windows: what `quantctl eval` prints and what the
// release gates compute for a packed checkpoint.
//
// Documents are taken in file order; each text document is stripped of
// leading and trailing whitespace and encoded after a BOS. Windows of at
// most seq_len tokens are then made in one of two ways:
//   kPerDocument (default): each document is cut into its own windows, so no
//     context crosses from one document into the next;
//   kConcatenate: the documents are concatenated into one stream that is cut
//     into consecutive windows.
// Either way the final partial window is kept. Inside each window every
// position whose next token is in the same window is scored, so the last
// position of each window is not.
//
// The default reproduces llama2.c's mean NLL of stories260K in
// shared/models/stories260K/reference.json (1.4352815 over 29256 scored
// tokens on the first 300 TinyStories paragraphs, windows of 256): that
// figure scores each paragraph on its own, stripped (46 of those paragraphs
// end in a space, which would otherwise become a lone "▁" token to
// predict). Concatenation gives 1.4372 there, stripping alone 1.4271.
#ifndef QUANT_CORE_EVAL_EVALUATE_H_
#define QUANT_CORE_EVAL_EVALUATE_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/calib/calibration_file.h"
#include "core/calib/calibration_split.h"
#include "core/eval/next_token_metrics.h"
#include "core/forward/llama_model.h"
#include "core/text/tokenizer.h"

namespace quant {

struct TextEvaluationOptions {
  int seq_len = 256;      // Window length in tokens; at least 2.
  int max_documents = 0;  // The first N documents of the file; 0 = all.
  // kPerDocument: long documents are split into windows, never truncated.
  WindowPacking packing = WindowPacking::kPerDocument;
  bool add_bos = true;  // Before each text document (not input_ids ones).
  bool strip_whitespace = true;  // Around each text document.
  // Windows per forward call: larger is faster, but the logits of a batch
  // (batch_windows * seq_len * vocab floats, per model) are held at once.
  int batch_windows = 8;
  // Evaluate only the first N windows; 0 = all.
  int max_windows = 0;
  // Called after each batch with (windows done, windows in all).
  std::function<void(int, int)> progress;
};

// The token ids of documents [0, max_documents) of `file` (all when 0), in
// order: a text document encoded without special tokens, after the
// tokenizer's BOS (when `options.add_bos` and the tokenizer has one); an
// input_ids document as it is, after checking every id against the
// tokenizer's vocabulary (the error names the line and index).
absl::StatusOr<std::vector<std::vector<int32_t>>> TokenizeDocuments(
    const CalibrationFile& file, const Tokenizer& tokenizer,
    const TextEvaluationOptions& options);

// Consecutive windows of `seq_len` tokens from `stream`; the final partial
// window is kept, padded with `pad_id` up to seq_len (lengths[] says where
// its real tokens end). seq_len must be positive.
TokenWindows CutIntoWindows(absl::Span<const int32_t> stream, int seq_len,
                            int32_t pad_id);

// Windows of `documents` by `packing` (see the top of this file).
TokenWindows MakeEvaluationWindows(
    const std::vector<std::vector<int32_t>>& documents, int seq_len,
    WindowPacking packing, int32_t pad_id);

// Scores every position p < lengths[i] - 1 of each window i against its next
// token. `model` is the model under test (the "quantized" side of the
// metrics); with `reference` == nullptr its logits stand on both sides, so
// the perplexity is the model's own and the comparison fields are trivial.
// The two models must share the vocabulary size. Padding is never run
// through the model past the longest window of a batch. Errors: no position
// to score, windows longer than a model's positions, token ids outside the
// vocabulary.
// `progress`, when set, is called after each batch with (windows done,
// windows in all).
// One forward call's worth of windows, cut to the longest real length
// among them; targets[r] is the next token of row r, -1 where nothing is
// scored.
struct EvaluationBatch {
  std::vector<std::vector<int32_t>> inputs;
  std::vector<int32_t> targets;
  int windows_done = 0;  // Windows (of all) behind this batch, for progress.
};

// The batches EvaluateWindows runs, in order: up to `batch_windows` windows
// of at least 2 tokens each.
std::vector<EvaluationBatch> PlanEvaluationBatches(const TokenWindows& windows,
                                                   int batch_windows);

// What EvaluateWindows refuses before running anything: batch_windows < 1,
// malformed windows, none to score, windows longer than a model's positions,
// a reference with another vocabulary size.
absl::Status CheckEvaluationInputs(const TokenWindows& windows,
                                   int batch_windows, const ModelConfig& model,
                                   const ModelConfig* reference);

absl::StatusOr<NextTokenMetrics> EvaluateWindows(
    const LlamaModel& model, const LlamaModel* reference,
    const TokenWindows& windows, int batch_windows = 8,
    const std::function<void(int, int)>& progress = nullptr);

struct TextEvaluation {
  NextTokenMetrics metrics;
  int documents = 0;         // Documents tokenized (<= the file's).
  int64_t input_tokens = 0;  // Tokens of those documents, BOS included.
  int windows = 0;
};

// TokenizeDocuments + MakeEvaluationWindows + EvaluateWindows.
absl::StatusOr<TextEvaluation> EvaluateText(
    const LlamaModel& model, const LlamaModel* reference,
    const Tokenizer& tokenizer, const CalibrationFile& file,
    const TextEvaluationOptions& options);

}  // namespace quant

#endif  // QUANT_CORE_EVAL_EVALUATE_H_

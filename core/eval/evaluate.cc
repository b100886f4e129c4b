// Windowed next-token evaluation of one model, or of a model against a
// reference, on the documents of a text file.
#include "core/eval/evaluate.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"

namespace quant {
namespace {

absl::Status CheckWindows(const TokenWindows& windows) {
  if (windows.sequences.empty()) {
    return absl::InvalidArgumentError("evaluation has no windows");
  }
  if (windows.lengths.size() != windows.sequences.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("evaluation windows: ", windows.sequences.size(),
                     " sequences but ", windows.lengths.size(), " lengths"));
  }
  int64_t scorable = 0;
  for (size_t i = 0; i < windows.sequences.size(); ++i) {
    if (static_cast<int>(windows.sequences[i].size()) != windows.seq_len) {
      return absl::InvalidArgumentError(absl::StrCat(
          "evaluation window ", i, " has ", windows.sequences[i].size(),
          " tokens, not seq_len ", windows.seq_len));
    }
    if (windows.lengths[i] < 0 || windows.lengths[i] > windows.seq_len) {
      return absl::InvalidArgumentError(absl::StrCat(
          "evaluation window ", i, " has length ", windows.lengths[i],
          " outside [0, ", windows.seq_len, "]"));
    }
    scorable += std::max(windows.lengths[i] - 1, 0);
  }
  if (scorable == 0) {
    return absl::InvalidArgumentError(
        "evaluation has no position to score: every window has fewer than 2 "
        "tokens");
  }
  return absl::OkStatus();
}

absl::Status CheckModelFits(const ModelConfig& config, absl::string_view role,
                            int seq_len) {
  const int64_t positions = config.max_position_embeddings;
  if (positions > 0 && seq_len > positions) {
    return absl::InvalidArgumentError(
        absl::StrCat("seq_len ", seq_len, " exceeds the ", role,
                     "'s max_position_embeddings ", positions));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<std::vector<int32_t>>> TokenizeDocuments(
    const CalibrationFile& file, const Tokenizer& tokenizer,
    const TextEvaluationOptions& options) {
  if (options.max_documents < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_documents must not be negative, got ", options.max_documents));
  }
  const size_t count =
      options.max_documents == 0
          ? file.documents.size()
          : std::min(file.documents.size(),
                     static_cast<size_t>(options.max_documents));
  std::vector<std::vector<int32_t>> documents;
  documents.reserve(count);
  for (size_t d = 0; d < count; ++d) {
    const CalibrationDocument& doc = file.documents[d];
    if (doc.input_ids.has_value()) {
      const std::vector<int32_t>& ids = *doc.input_ids;
      for (size_t i = 0; i < ids.size(); ++i) {
        if (ids[i] < 0 || ids[i] >= tokenizer.vocab_size()) {
          return absl::InvalidArgumentError(absl::StrCat(
              "line ", doc.line, ": \"input_ids\"[", i, "] = ", ids[i],
              " is outside the vocabulary [0, ", tokenizer.vocab_size(), ")"));
        }
      }
      documents.push_back(ids);
      continue;
    }
    std::vector<int32_t> ids;
    if (options.add_bos && tokenizer.bos_id().has_value()) {
      ids.push_back(*tokenizer.bos_id());
    }
    const absl::string_view text = options.strip_whitespace
                                       ? absl::StripAsciiWhitespace(doc.text)
                                       : absl::string_view(doc.text);
    absl::StatusOr<std::vector<int32_t>> body =
        tokenizer.Encode(text, /*add_special_tokens=*/false);
    if (!body.ok()) {
      return absl::Status(body.status().code(),
                          absl::StrCat("line ", doc.line, ": cannot tokenize: ",
                                       body.status().message()));
    }
    ids.insert(ids.end(), body->begin(), body->end());
    documents.push_back(std::move(ids));
  }
  return documents;
}

TokenWindows CutIntoWindows(absl::Span<const int32_t> stream, int seq_len,
                            int32_t pad_id) {
  TokenWindows windows;
  windows.seq_len = seq_len;
  if (seq_len <= 0) return windows;
  for (size_t start = 0; start < stream.size(); start += seq_len) {
    const size_t end = std::min(stream.size(), start + seq_len);
    std::vector<int32_t> window(stream.begin() + start, stream.begin() + end);
    windows.lengths.push_back(static_cast<int>(window.size()));
    window.resize(seq_len, pad_id);
    windows.sequences.push_back(std::move(window));
  }
  return windows;
}

TokenWindows MakeEvaluationWindows(
    const std::vector<std::vector<int32_t>>& documents, int seq_len,
    WindowPacking packing, int32_t pad_id) {
  if (packing == WindowPacking::kConcatenate) {
    std::vector<int32_t> stream;
    for (const std::vector<int32_t>& doc : documents) {
      stream.insert(stream.end(), doc.begin(), doc.end());
    }
    return CutIntoWindows(stream, seq_len, pad_id);
  }
  TokenWindows windows;
  windows.seq_len = seq_len;
  for (const std::vector<int32_t>& doc : documents) {
    TokenWindows own = CutIntoWindows(doc, seq_len, pad_id);
    for (size_t i = 0; i < own.sequences.size(); ++i) {
      windows.sequences.push_back(std::move(own.sequences[i]));
      windows.lengths.push_back(own.lengths[i]);
    }
  }
  return windows;
}

absl::Status CheckEvaluationInputs(const TokenWindows& windows,
                                   int batch_windows, const ModelConfig& model,
                                   const ModelConfig* reference) {
  if (batch_windows <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch_windows must be positive, got ", batch_windows));
  }
  QUANT_RETURN_IF_ERROR(CheckWindows(windows));
  QUANT_RETURN_IF_ERROR(CheckModelFits(model, "model", windows.seq_len));
  if (reference != nullptr) {
    QUANT_RETURN_IF_ERROR(
        CheckModelFits(*reference, "reference", windows.seq_len));
    if (reference->vocab_size != model.vocab_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("the reference's vocab_size ", reference->vocab_size,
                       " differs from the model's ", model.vocab_size,
                       "; both must use the same tokenizer"));
    }
  }
  return absl::OkStatus();
}

std::vector<EvaluationBatch> PlanEvaluationBatches(const TokenWindows& windows,
                                                   int batch_windows) {
  std::vector<EvaluationBatch> batches;
  // Windows of one forward call, cut to the longest real length among them:
  // causal attention keeps padding from affecting real positions, so
  // padding past every window's end need not be computed at all.
  std::vector<size_t> members;
  auto close = [&](int windows_done) {
    if (members.empty()) return;
    int batch_len = 0;
    for (size_t w : members) {
      batch_len = std::max(batch_len, windows.lengths[w]);
    }
    EvaluationBatch batch;
    batch.inputs.reserve(members.size());
    batch.targets.reserve(members.size() * batch_len);
    for (size_t w : members) {
      const std::vector<int32_t>& sequence = windows.sequences[w];
      batch.inputs.emplace_back(sequence.begin(), sequence.begin() + batch_len);
      for (int p = 0; p < batch_len; ++p) {
        batch.targets.push_back(p + 1 < windows.lengths[w] ? sequence[p + 1]
                                                           : -1);
      }
    }
    batch.windows_done = windows_done;
    batches.push_back(std::move(batch));
    members.clear();
  };
  const int total = static_cast<int>(windows.sequences.size());
  for (size_t w = 0; w < windows.sequences.size(); ++w) {
    if (windows.lengths[w] < 2) continue;  // Nothing to score.
    members.push_back(w);
    if (static_cast<int>(members.size()) == batch_windows) {
      close(static_cast<int>(w + 1));
    }
  }
  close(total);
  return batches;
}

absl::StatusOr<NextTokenMetrics> EvaluateWindows(
    const LlamaModel& model, const LlamaModel* reference,
    const TokenWindows& windows, int batch_windows,
    const std::function<void(int, int)>& progress) {
  QUANT_RETURN_IF_ERROR(CheckEvaluationInputs(
      windows, batch_windows, model.config(),
      reference == nullptr ? nullptr : &reference->config()));
  NextTokenMetricsAccumulator metrics;
  const int total = static_cast<int>(windows.sequences.size());
  int reported = 0;
  for (const EvaluationBatch& batch :
       PlanEvaluationBatches(windows, batch_windows)) {
    QUANT_ASSIGN_OR_RETURN(const RowMatrixF logits,
                           model.Forward(batch.inputs));
    if (reference == nullptr) {
      QUANT_RETURN_IF_ERROR(metrics.Add(logits, logits, batch.targets));
    } else {
      QUANT_ASSIGN_OR_RETURN(const RowMatrixF reference_logits,
                             reference->Forward(batch.inputs));
      QUANT_RETURN_IF_ERROR(
          metrics.Add(reference_logits, logits, batch.targets));
    }
    reported = batch.windows_done;
    if (progress) progress(reported, total);
  }
  if (progress && reported < total) progress(total, total);
  return metrics.Result();
}

absl::StatusOr<TextEvaluation> EvaluateText(
    const LlamaModel& model, const LlamaModel* reference,
    const Tokenizer& tokenizer, const CalibrationFile& file,
    const TextEvaluationOptions& options) {
  if (options.seq_len < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("seq_len must be at least 2, got ", options.seq_len));
  }
  QUANT_ASSIGN_OR_RETURN(const std::vector<std::vector<int32_t>> documents,
                         TokenizeDocuments(file, tokenizer, options));
  TextEvaluation evaluation;
  evaluation.documents = static_cast<int>(documents.size());
  for (const std::vector<int32_t>& doc : documents) {
    evaluation.input_tokens += static_cast<int64_t>(doc.size());
  }
  if (options.max_windows < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_windows must not be negative, got ", options.max_windows));
  }
  TokenWindows windows =
      MakeEvaluationWindows(documents, options.seq_len, options.packing,
                            tokenizer.eos_id().value_or(0));
  if (options.max_windows > 0 &&
      windows.sequences.size() > static_cast<size_t>(options.max_windows)) {
    windows.sequences.resize(options.max_windows);
    windows.lengths.resize(options.max_windows);
  }
  evaluation.windows = static_cast<int>(windows.sequences.size());
  QUANT_ASSIGN_OR_RETURN(
      evaluation.metrics,
      EvaluateWindows(model, reference, windows, options.batch_windows,
                      options.progress));
  return evaluation;
}

}  // namespace quant

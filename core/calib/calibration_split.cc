// Deterministic calibration / held-out split and windowing.
#include "core/calib/calibration_split.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"

namespace quant {
namespace {

// Fisher-Yates with raw mt19937_64 output: unlike std::shuffle and the
// standard distributions, the same on every standard library.
std::vector<int> Permutation(int n, uint64_t seed) {
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(seed);
  for (int i = n - 1; i > 0; --i) {
    const int j = static_cast<int>(rng() % static_cast<uint64_t>(i + 1));
    std::swap(order[i], order[j]);
  }
  return order;
}

absl::Status CheckOptions(const CalibrationSplitOptions& o) {
  if (o.samples <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("calibration.samples must be positive, got ", o.samples));
  }
  if (o.seq_len <= 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "calibration.seq_len must be at least 2, got ", o.seq_len));
  }
  if (!(o.heldout_fraction >= 0.0 && o.heldout_fraction < 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("calibration.heldout_fraction must be in [0, 1), got ",
                     o.heldout_fraction));
  }
  if (o.heldout_count < 0 || o.heldout_samples < 0) {
    return absl::InvalidArgumentError(
        "calibration.heldout_count and heldout_samples must not be negative");
  }
  return absl::OkStatus();
}

// Builds up to `wanted` windows from `documents` (in order).
absl::StatusOr<TokenWindows> MakeWindows(
    const std::vector<std::vector<int32_t>>& documents, int wanted,
    const CalibrationSplitOptions& options, int32_t pad_id,
    absl::string_view split_name, int64_t* tokens_available) {
  TokenWindows windows;
  windows.seq_len = options.seq_len;
  int64_t total = 0;
  for (const auto& doc : documents) total += static_cast<int64_t>(doc.size());
  *tokens_available = total;
  if (options.packing == WindowPacking::kConcatenate) {
    if (total < options.seq_len) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the ", split_name, " split has ", total,
          " tokens, fewer than one window of seq_len ", options.seq_len));
    }
    std::vector<int32_t> current;
    current.reserve(options.seq_len);
    for (const auto& doc : documents) {
      for (int32_t id : doc) {
        current.push_back(id);
        if (static_cast<int>(current.size()) == options.seq_len) {
          windows.sequences.push_back(std::move(current));
          windows.lengths.push_back(options.seq_len);
          current.clear();
          if (static_cast<int>(windows.sequences.size()) == wanted) {
            return windows;
          }
        }
      }
    }
    return windows;  // The trailing partial window is dropped.
  }
  for (const auto& doc : documents) {
    if (doc.empty()) continue;
    std::vector<int32_t> sequence(
        doc.begin(),
        doc.begin() + std::min<size_t>(doc.size(), options.seq_len));
    windows.lengths.push_back(static_cast<int>(sequence.size()));
    sequence.resize(options.seq_len, pad_id);
    windows.sequences.push_back(std::move(sequence));
    if (static_cast<int>(windows.sequences.size()) == wanted) break;
  }
  if (windows.sequences.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the ", split_name, " split has no tokens"));
  }
  return windows;
}

}  // namespace

absl::StatusOr<std::vector<int32_t>> CalibrationDocumentTokens(
    const CalibrationDocument& doc, const Tokenizer& tokenizer, bool add_bos,
    const ChatRenderer* chat) {
  if (doc.conversation.has_value()) {
    if (chat == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "line ", doc.line,
          ": a conversation, but there is no chat template to render it "
          "(calibration.chat_template is none, or auto and the tokenizer "
          "has none: name a template file)"));
    }
    absl::StatusOr<std::string> text = chat->Render(*doc.conversation);
    if (!text.ok()) {
      return absl::Status(
          text.status().code(),
          absl::StrCat("line ", doc.line, ": ", text.status().message()));
    }
    absl::StatusOr<std::vector<int32_t>> ids =
        tokenizer.Encode(*text, /*add_special_tokens=*/false);
    if (!ids.ok()) {
      return absl::Status(ids.status().code(),
                          absl::StrCat("line ", doc.line, ": cannot tokenize: ",
                                       ids.status().message()));
    }
    return ids;
  }
  if (doc.input_ids.has_value()) {
    const std::vector<int32_t>& ids = *doc.input_ids;
    for (size_t i = 0; i < ids.size(); ++i) {
      if (ids[i] >= tokenizer.vocab_size()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "line ", doc.line, ": \"input_ids\"[", i, "] = ", ids[i],
            " is outside the vocabulary [0, ", tokenizer.vocab_size(), ")"));
      }
    }
    return ids;
  }
  std::vector<int32_t> ids;
  if (add_bos && tokenizer.bos_id().has_value()) {
    ids.push_back(*tokenizer.bos_id());
  }
  // Stripped like the evaluation's documents (core/eval/evaluate.h), so a
  // trailing space never becomes a lone token to calibrate on.
  absl::StatusOr<std::vector<int32_t>> body = tokenizer.Encode(
      absl::StripAsciiWhitespace(doc.text), /*add_special_tokens=*/false);
  if (!body.ok()) {
    return absl::Status(body.status().code(),
                        absl::StrCat("line ", doc.line, ": cannot tokenize: ",
                                     body.status().message()));
  }
  ids.insert(ids.end(), body->begin(), body->end());
  return ids;
}

int64_t TokenWindows::RealTokens() const {
  return std::accumulate(lengths.begin(), lengths.end(), int64_t{0});
}

absl::StatusOr<CalibrationSplit> BuildCalibrationSplit(
    const CalibrationFile& file, const Tokenizer& tokenizer,
    const CalibrationSplitOptions& options) {
  QUANT_RETURN_IF_ERROR(CheckOptions(options));
  const int n = static_cast<int>(file.documents.size());
  if (n == 0) return absl::InvalidArgumentError("calibration set is empty");
  int heldout =
      options.heldout_count > 0
          ? options.heldout_count
          : static_cast<int>(std::lround(options.heldout_fraction * n));
  if (options.heldout_count == 0 && options.heldout_fraction > 0 &&
      heldout == 0) {
    heldout = 1;
  }
  if (heldout >= n) {
    return absl::InvalidArgumentError(
        absl::StrCat("calibration set has ", n, " documents; holding out ",
                     heldout, " leaves none for calibration"));
  }
  CalibrationSplit split;
  split.calibration_hash = file.sha256;
  split.options = options;
  const std::vector<int> order = Permutation(n, options.seed);
  split.heldout_documents.assign(order.begin(), order.begin() + heldout);
  split.calibration_documents.assign(order.begin() + heldout, order.end());

  const int32_t pad_id = tokenizer.eos_id().value_or(0);
  auto tokenize = [&](const std::vector<int>& indices)
      -> absl::StatusOr<std::vector<std::vector<int32_t>>> {
    std::vector<std::vector<int32_t>> docs;
    docs.reserve(indices.size());
    for (int index : indices) {
      QUANT_ASSIGN_OR_RETURN(
          std::vector<int32_t> ids,
          CalibrationDocumentTokens(file.documents[index], tokenizer,
                                    options.add_bos, options.chat));
      split.conversation_documents +=
          file.documents[index].conversation.has_value();
      docs.push_back(std::move(ids));
    }
    return docs;
  };
  QUANT_ASSIGN_OR_RETURN(auto calibration_docs,
                         tokenize(split.calibration_documents));
  QUANT_ASSIGN_OR_RETURN(
      split.calibration,
      MakeWindows(calibration_docs, options.samples, options, pad_id,
                  "calibration", &split.calibration_tokens_available));
  if (heldout > 0) {
    QUANT_ASSIGN_OR_RETURN(auto heldout_docs,
                           tokenize(split.heldout_documents));
    const int wanted =
        options.heldout_samples > 0 ? options.heldout_samples : options.samples;
    QUANT_ASSIGN_OR_RETURN(
        split.heldout,
        MakeWindows(heldout_docs, wanted, options, pad_id, "held-out",
                    &split.heldout_tokens_available));
  }
  return split;
}

}  // namespace quant

// InspectCalibration; see calibration_inspection.h.
#include "core/calib/calibration_inspection.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/base/status_macros.h"

namespace quant {
namespace {

// The nearest-rank percentile `p` (0..100) of sorted `values`.
int64_t Percentile(const std::vector<int64_t>& sorted, int p) {
  if (sorted.empty()) return 0;
  const size_t rank = static_cast<size_t>(
      std::ceil(static_cast<double>(p) / 100.0 * sorted.size()));
  return sorted[std::min(sorted.size() - 1, rank == 0 ? 0 : rank - 1)];
}

}  // namespace

absl::StatusOr<CalibrationInspection> InspectCalibration(
    const CalibrationFile& file, const Tokenizer& tokenizer, bool add_bos,
    const ChatRenderer* chat) {
  CalibrationInspection in;
  in.sha256 = file.sha256;
  in.documents = static_cast<int>(file.documents.size());
  std::vector<int64_t> lengths;
  lengths.reserve(file.documents.size());
  for (const CalibrationDocument& doc : file.documents) {
    ++(doc.input_ids.has_value()      ? in.id_documents
       : doc.conversation.has_value() ? in.conversation_documents
                                      : in.text_documents);
    QUANT_ASSIGN_OR_RETURN(
        const std::vector<int32_t> ids,
        CalibrationDocumentTokens(doc, tokenizer, add_bos, chat));
    lengths.push_back(static_cast<int64_t>(ids.size()));
    in.tokens += static_cast<int64_t>(ids.size());
  }
  if (chat != nullptr && in.conversation_documents > 0) {
    in.chat_template = chat->origin();
  }
  std::sort(lengths.begin(), lengths.end());
  if (!lengths.empty()) {
    in.lengths.min = lengths.front();
    in.lengths.max = lengths.back();
    in.lengths.p10 = Percentile(lengths, 10);
    in.lengths.p50 = Percentile(lengths, 50);
    in.lengths.p90 = Percentile(lengths, 90);
    in.lengths.mean =
        static_cast<double>(in.tokens) / static_cast<double>(lengths.size());
  }
  return in;
}

void AddSplitInspection(
    const CalibrationSplit& split,
    const std::map<int64_t, std::vector<std::string>>& layers_by_inputs,
    CalibrationInspection* inspection) {
  SplitInspection s;
  s.calibration_documents =
      static_cast<int>(split.calibration_documents.size());
  s.heldout_documents = static_cast<int>(split.heldout_documents.size());
  s.calibration_windows = static_cast<int>(split.calibration.sequences.size());
  s.heldout_windows = static_cast<int>(split.heldout.sequences.size());
  s.seq_len = split.calibration.seq_len;
  s.calibration_tokens = split.calibration.RealTokens();
  s.heldout_tokens = split.heldout.RealTokens();
  s.calibration_tokens_available = split.calibration_tokens_available;
  s.heldout_tokens_available = split.heldout_tokens_available;
  inspection->split = s;
  inspection->rank.clear();
  for (const auto& [inputs, layers] : layers_by_inputs) {
    RankLine line;
    line.inputs = inputs;
    line.layers = layers;
    line.tokens_per_input = inputs > 0
                                ? static_cast<double>(s.calibration_tokens) /
                                      static_cast<double>(inputs)
                                : 0.0;
    line.rank_deficient = s.calibration_tokens < inputs;
    inspection->rank.push_back(std::move(line));
  }
}

nlohmann::json CalibrationInspectionToJson(const CalibrationInspection& in) {
  nlohmann::json out = {{"sha256", in.sha256},
                        {"documents", in.documents},
                        {"text_documents", in.text_documents},
                        {"id_documents", in.id_documents},
                        {"conversation_documents", in.conversation_documents},
                        {"tokens", in.tokens},
                        {"document_tokens",
                         {{"min", in.lengths.min},
                          {"p10", in.lengths.p10},
                          {"p50", in.lengths.p50},
                          {"p90", in.lengths.p90},
                          {"max", in.lengths.max},
                          {"mean", in.lengths.mean}}}};
  if (in.chat_template.has_value()) {
    out["chat_template"] = {{"source", in.chat_template->source},
                            {"sha256", in.chat_template->sha256}};
  }
  if (in.split.has_value()) {
    const SplitInspection& s = *in.split;
    out["split"] = {{"seq_len", s.seq_len},
                    {"calibration",
                     {{"documents", s.calibration_documents},
                      {"windows", s.calibration_windows},
                      {"tokens", s.calibration_tokens},
                      {"tokens_available", s.calibration_tokens_available}}},
                    {"heldout",
                     {{"documents", s.heldout_documents},
                      {"windows", s.heldout_windows},
                      {"tokens", s.heldout_tokens},
                      {"tokens_available", s.heldout_tokens_available}}}};
    nlohmann::json rank = nlohmann::json::array();
    for (const RankLine& line : in.rank) {
      rank.push_back({{"inputs", line.inputs},
                      {"layers", line.layers},
                      {"tokens_per_input", line.tokens_per_input},
                      {"rank_deficient", line.rank_deficient}});
    }
    out["rank"] = std::move(rank);
  }
  return out;
}

std::string FormatCalibrationInspection(const CalibrationInspection& in) {
  std::string out = absl::StrFormat(
      "sha256 %s\n%d documents (%d text, %d token ids, %d conversations), "
      "%d tokens\n"
      "tokens per document: min %d, p10 %d, median %d, p90 %d, max %d, "
      "mean %.1f\n",
      in.sha256, in.documents, in.text_documents, in.id_documents,
      in.conversation_documents, in.tokens, in.lengths.min, in.lengths.p10,
      in.lengths.p50, in.lengths.p90, in.lengths.max, in.lengths.mean);
  if (in.chat_template.has_value()) {
    absl::StrAppend(&out, "conversations rendered with the chat template of ",
                    in.chat_template->source, " (sha256 ",
                    in.chat_template->sha256.substr(0, 12), ")\n");
  }
  if (!in.split.has_value()) return out;
  const SplitInspection& s = *in.split;
  absl::StrAppend(
      &out, absl::StrFormat(
                "calibration: %d documents -> %d windows of %d tokens, T = %d "
                "real tokens (%d available)\n"
                "held-out:    %d documents -> %d windows, %d real tokens (%d "
                "available)\n",
                s.calibration_documents, s.calibration_windows, s.seq_len,
                s.calibration_tokens, s.calibration_tokens_available,
                s.heldout_documents, s.heldout_windows, s.heldout_tokens,
                s.heldout_tokens_available));
  for (const RankLine& line : in.rank) {
    absl::StrAppend(
        &out,
        absl::StrFormat("rank: K = %d (%s): T/K = %.2f%s\n", line.inputs,
                        absl::StrJoin(line.layers, ", "), line.tokens_per_input,
                        line.rank_deficient
                            ? "  rank-deficient (T < K): add samples or "
                              "longer windows"
                            : ""));
  }
  return out;
}

}  // namespace quant

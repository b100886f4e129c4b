// Evaluation parts scored, merged, written and read; see evaluation_parts.h.
#include "core/eval/evaluation_parts.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/io/safetensors.h"

namespace quant {
namespace {

constexpr char kFormat[] = "quant-evaluation-part/1";

std::string TensorName(size_t model, const char* what) {
  return absl::StrCat("model", model, ".", what);
}

// Tensor `name`: `dtype`, one dimension; its values copied out.
template <typename T>
absl::StatusOr<std::vector<T>> ReadVector(const SafetensorsFile& file,
                                          const std::string& path,
                                          const std::string& name,
                                          DType dtype) {
  const TensorInfo* info = file.Find(name);
  if (info == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": tensor ", name, " is missing"));
  }
  if (info->dtype != dtype || info->shape.size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": tensor ", name, " is ", DTypeName(info->dtype), " of rank ",
        info->shape.size(), "; ", DTypeName(dtype), " of rank 1 expected"));
  }
  std::vector<T> values(static_cast<size_t>(info->NumElements()));
  const absl::Span<const uint8_t> raw = file.RawBytes(*info);
  if (!raw.empty()) std::memcpy(values.data(), raw.data(), raw.size());
  return values;
}

}  // namespace

absl::StatusOr<EvaluationPart> ScoreEvaluationPart(
    const std::vector<const Checkpoint*>& models, const Checkpoint& reference,
    const TokenWindows& windows, int64_t first_batch, int64_t batch_count,
    const StreamedEvaluationOptions& options) {
  EvaluationPart part;
  part.first_batch = first_batch;
  part.batch_count = batch_count;
  part.total_batches = CountEvaluationBatches(windows, options.batch_windows);
  part.scores.resize(models.size());
  QUANT_RETURN_IF_ERROR(ScoreCheckpointBatches(
      models, reference, windows, first_batch, batch_count, options,
      [&](size_t model, absl::Span<const NextTokenScore> scores) {
        for (const NextTokenScore& score : scores) {
          if (score.scored) part.scores[model].push_back(score);
        }
      }));
  return part;
}

absl::StatusOr<std::vector<NextTokenMetrics>> MergeEvaluationParts(
    std::vector<EvaluationPart> parts) {
  if (parts.empty()) {
    return absl::InvalidArgumentError("no evaluation parts to merge");
  }
  std::sort(parts.begin(), parts.end(),
            [](const EvaluationPart& a, const EvaluationPart& b) {
              return a.first_batch < b.first_batch;
            });
  const int64_t total = parts.front().total_batches;
  const size_t models = parts.front().scores.size();
  int64_t next = 0;
  for (const EvaluationPart& part : parts) {
    if (part.total_batches != total || part.scores.size() != models) {
      return absl::InvalidArgumentError(
          absl::StrCat("evaluation parts of different evaluations: ", total,
                       " batches of ", models, " model(s) and ",
                       part.total_batches, " of ", part.scores.size()));
    }
    if (part.first_batch > next) {
      return absl::InvalidArgumentError(
          absl::StrCat("evaluation parts: batches [", next, ", ",
                       part.first_batch, ") are missing"));
    }
    if (part.first_batch < next) {
      return absl::InvalidArgumentError(absl::StrCat(
          "evaluation parts: batch ", part.first_batch, " is in two parts"));
    }
    next = part.first_batch + part.batch_count;
  }
  if (next != total) {
    return absl::InvalidArgumentError(absl::StrCat(
        "evaluation parts: batches [", next, ", ", total, ") are missing"));
  }
  std::vector<NextTokenMetricsAccumulator> metrics(models);
  for (const EvaluationPart& part : parts) {
    for (size_t m = 0; m < models; ++m) metrics[m].AddScores(part.scores[m]);
  }
  std::vector<NextTokenMetrics> results;
  for (const NextTokenMetricsAccumulator& accumulator : metrics) {
    results.push_back(accumulator.Result());
  }
  return results;
}

absl::Status WriteEvaluationPart(const std::string& path,
                                 const EvaluationPart& part, FileSystem* fs) {
  const std::map<std::string, std::string> metadata = {
      {"format", kFormat},
      {"first_batch", absl::StrCat(part.first_batch)},
      {"batch_count", absl::StrCat(part.batch_count)},
      {"total_batches", absl::StrCat(part.total_batches)},
      {"models", absl::StrCat(part.scores.size())}};
  // Column by column; kept alive until written (TensorToWrite views them).
  std::vector<std::vector<double>> doubles;
  std::vector<std::vector<uint8_t>> agrees;
  doubles.reserve(3 * part.scores.size());
  agrees.reserve(part.scores.size());
  std::vector<TensorToWrite> tensors;
  for (size_t m = 0; m < part.scores.size(); ++m) {
    const std::vector<NextTokenScore>& scores = part.scores[m];
    const int64_t rows = static_cast<int64_t>(scores.size());
    auto column = [&](const char* what, double NextTokenScore::*field) {
      std::vector<double>& values = doubles.emplace_back();
      values.reserve(scores.size());
      for (const NextTokenScore& s : scores) values.push_back(s.*field);
      tensors.push_back(
          {TensorName(m, what), DType::kF64, {rows}, VectorBytes(values)});
    };
    column("reference_nll", &NextTokenScore::reference_nll);
    column("quantized_nll", &NextTokenScore::quantized_nll);
    column("kl", &NextTokenScore::kl);
    std::vector<uint8_t>& agree = agrees.emplace_back();
    agree.reserve(scores.size());
    for (const NextTokenScore& s : scores) agree.push_back(s.agrees ? 1 : 0);
    tensors.push_back(
        {TensorName(m, "agrees"), DType::kU8, {rows}, VectorBytes(agree)});
  }
  return WriteSafetensors(path, tensors, metadata, fs);
}

absl::StatusOr<EvaluationPart> ReadEvaluationPart(const std::string& path,
                                                  FileSystem* fs) {
  QUANT_ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsFile> file,
                         SafetensorsFile::Open(path, {}, fs));
  auto format = file->metadata().find("format");
  if (format == file->metadata().end() || format->second != kFormat) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not an evaluation part (metadata format is ",
                     format == file->metadata().end()
                         ? "missing"
                         : absl::StrCat("\"", format->second, "\""),
                     ", \"", kFormat, "\" expected)"));
  }
  EvaluationPart part;
  QUANT_ASSIGN_OR_RETURN(part.first_batch, file->MetadataCount("first_batch"));
  QUANT_ASSIGN_OR_RETURN(part.batch_count, file->MetadataCount("batch_count"));
  QUANT_ASSIGN_OR_RETURN(part.total_batches,
                         file->MetadataCount("total_batches"));
  QUANT_ASSIGN_OR_RETURN(const int64_t models, file->MetadataCount("models"));
  if (part.first_batch + part.batch_count > part.total_batches) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": batches [", part.first_batch, ", ",
        part.first_batch + part.batch_count, ") of ", part.total_batches));
  }
  if (models < 1 || static_cast<size_t>(4 * models) != file->tensors().size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", file->tensors().size(), " tensors for ",
                     models, " model(s); 4 per model expected"));
  }
  part.scores.resize(static_cast<size_t>(models));
  for (size_t m = 0; m < part.scores.size(); ++m) {
    std::vector<std::vector<double>> columns;
    for (const char* what : {"reference_nll", "quantized_nll", "kl"}) {
      const std::string name = TensorName(m, what);
      QUANT_ASSIGN_OR_RETURN(
          std::vector<double> values,
          ReadVector<double>(*file, path, name, DType::kF64));
      for (size_t r = 0; r < values.size(); ++r) {
        if (!std::isfinite(values[r])) {
          return absl::InvalidArgumentError(
              absl::StrCat(path, ": tensor ", name, "[", r, "] is not finite"));
        }
      }
      columns.push_back(std::move(values));
    }
    const std::string agrees_name = TensorName(m, "agrees");
    QUANT_ASSIGN_OR_RETURN(
        const std::vector<uint8_t> agrees,
        ReadVector<uint8_t>(*file, path, agrees_name, DType::kU8));
    const size_t rows = agrees.size();
    for (const std::vector<double>& column : columns) {
      if (column.size() != rows) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ": model ", m, "'s tensors have ", column.size(),
                         " and ", rows, " rows"));
      }
    }
    std::vector<NextTokenScore>& scores = part.scores[m];
    scores.resize(rows);
    for (size_t r = 0; r < rows; ++r) {
      if (agrees[r] > 1) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ": tensor ", agrees_name, "[", r, "] is ",
                         static_cast<int>(agrees[r]), "; 0 or 1 expected"));
      }
      scores[r] = {true, agrees[r] == 1, columns[0][r], columns[1][r],
                   columns[2][r]};
    }
  }
  return part;
}

}  // namespace quant

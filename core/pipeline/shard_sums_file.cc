// A shard's sums written and read back; see shard_sums_file.h.
#include "core/pipeline/shard_sums_file.h"

#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/base/status_macros.h"
#include "core/io/safetensors.h"

namespace quant {
namespace {

constexpr char kFormat[] = "quant-shard-statistics/1";

// Tensor `name` of `dtype` and `count` elements, copied out; nullopt when
// the file does not have it.
template <typename T>
absl::StatusOr<std::optional<std::vector<T>>> ReadValues(
    const SafetensorsFile& file, const std::string& path,
    const std::string& name, DType dtype, int64_t count) {
  const TensorInfo* info = file.Find(name);
  if (info == nullptr) return std::optional<std::vector<T>>();
  if (info->dtype != dtype || info->shape.size() != 1 ||
      info->NumElements() != count) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": tensor ", name, " is ", DTypeName(info->dtype),
                     " of ", info->NumElements(), " values; ", DTypeName(dtype),
                     " [", count, "] expected"));
  }
  std::vector<T> values(static_cast<size_t>(count));
  const absl::Span<const uint8_t> raw = file.RawBytes(*info);
  std::memcpy(values.data(), raw.data(), raw.size());
  return std::optional<std::vector<T>>(std::move(values));
}

// A split's triangle: absent means no tokens; present needs tokens.
absl::StatusOr<HessianAccumulator> ReadTriangle(const SafetensorsFile& file,
                                                const std::string& path,
                                                const std::string& name,
                                                int64_t k, int64_t tokens) {
  QUANT_ASSIGN_OR_RETURN(
      std::optional<std::vector<float>> lower,
      ReadValues<float>(file, path, name, DType::kF32, k * (k + 1) / 2));
  if (!lower.has_value()) {
    if (tokens != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": tensor ", name, " is missing for ", tokens, " tokens"));
    }
    return HessianAccumulator(k);
  }
  if (tokens == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": tensor ", name, " is stored for 0 tokens"));
  }
  absl::StatusOr<HessianAccumulator> h =
      HessianAccumulator::FromLowerTriangle(k, tokens, *lower);
  if (!h.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": tensor ", name, ": ", h.status().message()));
  }
  return h;
}

}  // namespace

int64_t ShardTriangleBytes(int64_t k) {
  return k * (k + 1) / 2 * static_cast<int64_t>(sizeof(float));
}

absl::Status WriteShardSums(const std::string& path, const ShardSumsView& sums,
                            FileSystem* fs) {
  const int64_t k = sums.calibration->k();
  std::map<std::string, std::string> metadata = {
      {"format", kFormat},
      {"k", absl::StrCat(k)},
      {"calibration_tokens", absl::StrCat(sums.calibration->token_count())},
      {"heldout_tokens", absl::StrCat(sums.heldout->token_count())}};
  // Kept alive until the file is written: TensorToWrite views them.
  std::vector<std::vector<float>> triangles;
  std::vector<std::pair<std::string, size_t>> names;
  auto add = [&](const std::string& name, const HessianAccumulator& h) {
    if (h.token_count() == 0) return;
    triangles.push_back(h.LowerTriangle());
    names.emplace_back(name, triangles.size() - 1);
  };
  add("calibration", *sums.calibration);
  add("heldout", *sums.heldout);
  if (sums.split != nullptr) {
    const SplitHessianAccumulator& split = *sums.split;
    add("split.train", split.train());
    add("split.validation", split.validation());
    metadata["split.first_token"] = absl::StrCat(split.first_token());
    metadata["split.next_token"] = absl::StrCat(split.next_token());
    metadata["split.train_tokens"] = absl::StrCat(split.train().token_count());
    metadata["split.validation_tokens"] =
        absl::StrCat(split.validation().token_count());
    metadata["split.validation_fraction"] =
        absl::StrFormat("%.17g", split.validation_fraction());
  }
  std::vector<TensorToWrite> tensors;
  for (const auto& [name, index] : names) {
    const std::vector<float>& t = triangles[index];
    tensors.push_back(
        {name, DType::kF32, {static_cast<int64_t>(t.size())}, VectorBytes(t)});
  }
  if (sums.mean_abs != nullptr) {
    const Eigen::VectorXd& sum_abs = sums.mean_abs->sum_abs();
    metadata["mean_abs.tokens"] = absl::StrCat(sums.mean_abs->token_count());
    tensors.push_back(
        {"mean_abs.sum",
         DType::kF64,
         {sum_abs.size()},
         absl::string_view(reinterpret_cast<const char*>(sum_abs.data()),
                           sum_abs.size() * sizeof(double))});
  }
  return WriteSafetensors(path, tensors, metadata, fs);
}

absl::StatusOr<ShardSums> ReadShardSums(const std::string& path, int64_t k,
                                        FileSystem* fs) {
  QUANT_ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsFile> file,
                         SafetensorsFile::Open(path, {}, fs));
  auto format = file->metadata().find("format");
  if (format == file->metadata().end() || format->second != kFormat) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": metadata format is not \"", kFormat, "\""));
  }
  QUANT_ASSIGN_OR_RETURN(const int64_t stored_k, file->MetadataCount("k"));
  if (stored_k != k) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": metadata k = ", stored_k, " but the group's K is ", k));
  }
  QUANT_ASSIGN_OR_RETURN(const int64_t calibration_tokens,
                         file->MetadataCount("calibration_tokens"));
  QUANT_ASSIGN_OR_RETURN(const int64_t heldout_tokens,
                         file->MetadataCount("heldout_tokens"));
  QUANT_ASSIGN_OR_RETURN(
      HessianAccumulator calibration,
      ReadTriangle(*file, path, "calibration", k, calibration_tokens));
  QUANT_ASSIGN_OR_RETURN(
      HessianAccumulator heldout,
      ReadTriangle(*file, path, "heldout", k, heldout_tokens));
  std::optional<SplitHessianAccumulator> split;
  if (file->metadata().count("split.first_token") != 0) {
    QUANT_ASSIGN_OR_RETURN(const int64_t first,
                           file->MetadataCount("split.first_token"));
    QUANT_ASSIGN_OR_RETURN(const int64_t next,
                           file->MetadataCount("split.next_token"));
    QUANT_ASSIGN_OR_RETURN(const int64_t train_tokens,
                           file->MetadataCount("split.train_tokens"));
    QUANT_ASSIGN_OR_RETURN(const int64_t validation_tokens,
                           file->MetadataCount("split.validation_tokens"));
    const auto fraction_field =
        file->metadata().find("split.validation_fraction");
    double fraction = 0.0;
    if (fraction_field == file->metadata().end() ||
        !absl::SimpleAtod(fraction_field->second, &fraction)) {
      return absl::InvalidArgumentError(absl::StrCat(
          path,
          ": metadata split.validation_fraction is missing or not a "
          "number"));
    }
    QUANT_ASSIGN_OR_RETURN(
        HessianAccumulator train,
        ReadTriangle(*file, path, "split.train", k, train_tokens));
    QUANT_ASSIGN_OR_RETURN(
        HessianAccumulator validation,
        ReadTriangle(*file, path, "split.validation", k, validation_tokens));
    absl::StatusOr<SplitHessianAccumulator> parts =
        SplitHessianAccumulator::FromParts(
            fraction, first, next, std::move(train), std::move(validation));
    if (!parts.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": ", parts.status().message()));
    }
    split = *std::move(parts);
  } else if (file->Find("split.train") != nullptr ||
             file->Find("split.validation") != nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": split tensors without their split.* metadata"));
  }
  std::optional<ActivationStatsAccumulator> mean_abs;
  QUANT_ASSIGN_OR_RETURN(
      std::optional<std::vector<double>> sums,
      ReadValues<double>(*file, path, "mean_abs.sum", DType::kF64, k));
  if (sums.has_value()) {
    QUANT_ASSIGN_OR_RETURN(const int64_t tokens,
                           file->MetadataCount("mean_abs.tokens"));
    absl::StatusOr<ActivationStatsAccumulator> stats =
        ActivationStatsAccumulator::FromSums(
            tokens, Eigen::Map<const Eigen::VectorXd>(
                        sums->data(), static_cast<Eigen::Index>(k)));
    if (!stats.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": tensor mean_abs.sum: ", stats.status().message()));
    }
    mean_abs = *std::move(stats);
  }
  const int64_t tokens = calibration.token_count();
  if (split.has_value() &&
      split->next_token() - split->first_token() != tokens) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": metadata split.* covers ",
                     split->next_token() - split->first_token(),
                     " tokens, calibration ", tokens));
  }
  if (mean_abs.has_value() && mean_abs->token_count() != tokens) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": metadata mean_abs.tokens = ", mean_abs->token_count(),
        ", calibration ", tokens));
  }
  return ShardSums{std::move(calibration), std::move(heldout), std::move(split),
                   std::move(mean_abs)};
}

}  // namespace quant

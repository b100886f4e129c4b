// Bad checkpoints and calibration texts, built from good ones.
#include "bench/reliability/bad_input_files.h"

#include <cstring>
#include <filesystem>
#include <system_error>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/base/file_util.h"
#include "core/base/status_macros.h"
#include "core/io/safetensors.h"

namespace quant::reliability {
namespace {

constexpr char kWeights[] = "model.safetensors";
constexpr size_t kMaxCheckpointBytes = size_t{1} << 30;

std::string WeightsPath(const std::string& dir) {
  return JoinPath(dir, kWeights);
}

}  // namespace

absl::Status CopyCheckpoint(const std::string& from, const std::string& to) {
  std::error_code error;
  std::filesystem::create_directories(to, error);
  if (error) {
    return absl::InternalError(
        absl::StrCat("cannot create ", to, ": ", error.message()));
  }
  for (const auto& entry : std::filesystem::directory_iterator(from, error)) {
    if (!entry.is_regular_file()) continue;
    const std::string name = entry.path().filename().string();
    QUANT_ASSIGN_OR_RETURN(
        const std::string bytes,
        ReadFileToString(entry.path().string(), kMaxCheckpointBytes));
    QUANT_RETURN_IF_ERROR(WriteFileAtomically(JoinPath(to, name), bytes));
  }
  if (error) {
    return absl::NotFoundError(
        absl::StrCat("cannot list ", from, ": ", error.message()));
  }
  return absl::OkStatus();
}

absl::Status CorruptSafetensorsHeader(const std::string& dir) {
  QUANT_ASSIGN_OR_RETURN(
      std::string bytes,
      ReadFileToString(WeightsPath(dir), kMaxCheckpointBytes));
  constexpr char kGarbage[] = "{\"model.embed_tokens.weight\": [oops";
  const size_t garbage = sizeof(kGarbage) - 1;
  if (bytes.size() < 8 + garbage) {
    return absl::FailedPreconditionError(
        absl::StrCat(WeightsPath(dir), ": too short to corrupt"));
  }
  // Same length as before, so only the JSON is wrong.
  std::memcpy(bytes.data() + 8, kGarbage, garbage);
  return WriteFileAtomically(WeightsPath(dir), bytes);
}

absl::Status TruncateSafetensors(const std::string& dir, int64_t bytes) {
  std::error_code error;
  const uintmax_t size = std::filesystem::file_size(WeightsPath(dir), error);
  if (error || static_cast<int64_t>(size) <= bytes) {
    return absl::FailedPreconditionError(
        absl::StrCat(WeightsPath(dir), ": cannot drop ", bytes, " bytes"));
  }
  std::filesystem::resize_file(WeightsPath(dir), size - bytes, error);
  if (error) {
    return absl::InternalError(
        absl::StrCat("truncating ", WeightsPath(dir), ": ", error.message()));
  }
  return absl::OkStatus();
}

absl::Status RewriteSafetensors(
    const std::string& dir,
    const std::function<absl::Status(std::vector<EditableTensor>&)>& edit) {
  QUANT_ASSIGN_OR_RETURN(
      const std::string bytes,
      ReadFileToString(WeightsPath(dir), kMaxCheckpointBytes));
  QUANT_ASSIGN_OR_RETURN(const SafetensorsHeader header,
                         ParseSafetensorsHeader(bytes));
  std::vector<EditableTensor> tensors;
  for (const TensorInfo& info : header.tensors) {
    if (info.dtype != DType::kF32) {
      return absl::FailedPreconditionError(absl::StrCat(
          WeightsPath(dir), ": tensor \"", info.name, "\" is not F32"));
    }
    tensors.push_back(
        {info.name, info.shape,
         bytes.substr(header.data_offset + info.data_begin, info.ByteSize())});
  }
  QUANT_RETURN_IF_ERROR(edit(tensors));
  std::vector<TensorToWrite> out;
  for (const EditableTensor& tensor : tensors) {
    out.push_back({tensor.name, DType::kF32, tensor.shape, tensor.bytes});
  }
  return WriteSafetensors(WeightsPath(dir), out, header.metadata);
}

absl::Status PoisonTensor(const std::string& dir, const std::string& name,
                          int64_t index, float value) {
  QUANT_ASSIGN_OR_RETURN(
      std::string bytes,
      ReadFileToString(WeightsPath(dir), kMaxCheckpointBytes));
  QUANT_ASSIGN_OR_RETURN(const SafetensorsHeader header,
                         ParseSafetensorsHeader(bytes));
  for (const TensorInfo& info : header.tensors) {
    if (info.name != name) continue;
    if (info.dtype != DType::kF32 || index < 0 || index >= info.NumElements()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor \"", name, "\": no F32 element ", index, " to poison"));
    }
    // Little-endian hosts only, as the safetensors format itself.
    std::memcpy(bytes.data() + header.data_offset + info.data_begin +
                    static_cast<size_t>(index) * sizeof(float),
                &value, sizeof(float));
    return WriteFileAtomically(WeightsPath(dir), bytes);
  }
  return absl::NotFoundError(
      absl::StrCat(WeightsPath(dir), ": no tensor \"", name, "\""));
}

absl::Status EditConfig(const std::string& dir,
                        const std::function<void(nlohmann::json&)>& edit) {
  const std::string path = JoinPath(dir, "config.json");
  QUANT_ASSIGN_OR_RETURN(const std::string text,
                         ReadFileToString(path, size_t{1} << 20));
  nlohmann::json config =
      nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded() || !config.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not a JSON object"));
  }
  edit(config);
  return WriteFileAtomically(path, config.dump(2) + "\n");
}

std::string FirstParagraphs(absl::string_view text, int count) {
  std::string out;
  int taken = 0;
  for (absl::string_view paragraph :
       absl::StrSplit(text, "\n\n", absl::SkipWhitespace())) {
    if (taken == count) break;
    absl::StrAppend(&out, absl::StripAsciiWhitespace(paragraph), "\n\n");
    ++taken;
  }
  return out;
}

}  // namespace quant::reliability

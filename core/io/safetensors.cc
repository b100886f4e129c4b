// Safetensors parsing (strict, bounds-checked), memory-mapped reading and
// atomic writing.
#include "core/io/safetensors.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <set>
#include <tuple>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/status_macros.h"
#include "core/base/strict_json.h"
#include "core/base/utf8.h"
#include "core/io/atomic_file_writer.h"
#include "nlohmann/json.hpp"

namespace quant {
namespace {

using json = nlohmann::json;

constexpr char kMetadataKey[] = "__metadata__";
constexpr size_t kLengthPrefixBytes = 8;

// Tensor names come from untrusted bytes; keep messages printable.
std::string Quoted(absl::string_view name) {
  return absl::StrCat("\"", absl::CHexEscape(name), "\"");
}

std::string TensorPrefix(absl::string_view name) {
  return absl::StrCat("tensor ", Quoted(name), ": ");
}

absl::Status TensorError(absl::string_view name, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat(TensorPrefix(name), problem));
}

uint64_t LoadLittleEndian64(const char* p) {
  uint64_t value = 0;
  for (int i = 7; i >= 0; --i) {
    value = (value << 8) | static_cast<uint8_t>(p[i]);
  }
  return value;
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

// Number of elements of `shape`, or an error naming the overflowing shape.
absl::StatusOr<uint64_t> CheckedElementCount(
    absl::string_view name, const std::vector<int64_t>& shape) {
  uint64_t count = 1;
  for (int64_t dim : shape) {
    if (dim < 0) {
      return TensorError(name, absl::StrCat("shape ", ShapeString(shape),
                                            " has a negative dimension"));
    }
    if (__builtin_mul_overflow(count, static_cast<uint64_t>(dim), &count) ||
        count > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return TensorError(name, absl::StrCat("shape ", ShapeString(shape),
                                            " has too many elements"));
    }
  }
  return count;
}

// Bytes of `shape` elements of `dtype`, with overflow checks.
absl::StatusOr<uint64_t> CheckedByteSize(absl::string_view name, DType dtype,
                                         const std::vector<int64_t>& shape) {
  QUANT_ASSIGN_OR_RETURN(const uint64_t count,
                         CheckedElementCount(name, shape));
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(count, static_cast<uint64_t>(DTypeSize(dtype)),
                             &bytes)) {
    return TensorError(
        name, absl::StrCat("shape ", ShapeString(shape), " of ",
                           DTypeName(dtype), " overflows the byte count"));
  }
  return bytes;
}

absl::StatusOr<std::vector<int64_t>> ParseShape(
    absl::string_view name, const json& value,
    const SafetensorsLimits& limits) {
  if (!value.is_array()) {
    return TensorError(name, absl::StrCat("\"shape\" must be an array, not ",
                                          value.type_name()));
  }
  if (value.size() > static_cast<size_t>(std::max(limits.max_rank, 0))) {
    return TensorError(name,
                       absl::StrCat("shape has rank ", value.size(),
                                    ", over the limit of ", limits.max_rank));
  }
  std::vector<int64_t> shape;
  for (const json& dim : value) {
    if (dim.is_number_integer() && !dim.is_number_unsigned()) {
      return TensorError(name, absl::StrCat("\"shape\" has negative dimension ",
                                            dim.get<int64_t>()));
    }
    if (!dim.is_number_unsigned()) {
      return TensorError(name,
                         absl::StrCat("\"shape\" entries must be non-negative "
                                      "integers, found ",
                                      dim.dump()));
    }
    const uint64_t size = dim.get<uint64_t>();
    if (size > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return TensorError(
          name, absl::StrCat("\"shape\" dimension ", size, " is too large"));
    }
    shape.push_back(static_cast<int64_t>(size));
  }
  return shape;
}

absl::Status ParseOffsets(absl::string_view name, const json& value,
                          TensorInfo& info) {
  if (!value.is_array() || value.size() != 2 ||
      !value[0].is_number_unsigned() || !value[1].is_number_unsigned()) {
    return TensorError(
        name, absl::StrCat("\"data_offsets\" must be [begin, end] with two "
                           "non-negative integers, found ",
                           value.dump()));
  }
  info.data_begin = value[0].get<uint64_t>();
  info.data_end = value[1].get<uint64_t>();
  if (info.data_begin > info.data_end) {
    return TensorError(name,
                       absl::StrCat("data_offsets [", info.data_begin, ", ",
                                    info.data_end, "] end before they begin"));
  }
  return absl::OkStatus();
}

absl::StatusOr<TensorInfo> ParseEntry(const std::string& name,
                                      const json& entry,
                                      const SafetensorsLimits& limits) {
  if (!entry.is_object()) {
    return TensorError(
        name, absl::StrCat("entry must be an object, not ", entry.type_name()));
  }
  for (const auto& [key, unused] : entry.items()) {
    if (key != "dtype" && key != "shape" && key != "data_offsets") {
      return TensorError(
          name, absl::StrCat("unexpected key ", Quoted(key),
                             " (allowed: dtype, shape, data_offsets)"));
    }
  }
  for (const char* required : {"dtype", "shape", "data_offsets"}) {
    if (!entry.contains(required)) {
      return TensorError(name, absl::StrCat("missing \"", required, "\""));
    }
  }
  TensorInfo info;
  info.name = name;
  const json& dtype = entry["dtype"];
  if (!dtype.is_string()) {
    return TensorError(name, absl::StrCat("\"dtype\" must be a string, not ",
                                          dtype.type_name()));
  }
  absl::StatusOr<DType> parsed =
      ParseDType(dtype.get_ref<const std::string&>());
  if (!parsed.ok()) return TensorError(name, parsed.status().message());
  info.dtype = *parsed;
  QUANT_ASSIGN_OR_RETURN(info.shape, ParseShape(name, entry["shape"], limits));
  QUANT_RETURN_IF_ERROR(ParseOffsets(name, entry["data_offsets"], info));
  QUANT_ASSIGN_OR_RETURN(const uint64_t expected_bytes,
                         CheckedByteSize(name, info.dtype, info.shape));
  if (info.ByteSize() != expected_bytes) {
    return TensorError(
        name, absl::StrCat("data_offsets [", info.data_begin, ", ",
                           info.data_end, "] hold ", info.ByteSize(),
                           " bytes but shape ", ShapeString(info.shape), " of ",
                           DTypeName(info.dtype), " needs ", expected_bytes));
  }
  return info;
}

absl::Status ParseMetadata(const json& value,
                           std::map<std::string, std::string>& metadata) {
  if (!value.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"__metadata__\" must be an object of strings, not ",
                     value.type_name()));
  }
  for (const auto& [key, item] : value.items()) {
    if (!item.is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat("\"__metadata__\" value for ", Quoted(key),
                       " must be a string, not ", item.type_name()));
    }
    metadata[key] = item.get<std::string>();
  }
  return absl::OkStatus();
}

// Sorted by offset, tensors must tile the data section exactly.
absl::Status CheckLayout(const std::vector<TensorInfo>& tensors,
                         uint64_t data_size) {
  uint64_t expected_begin = 0;
  const TensorInfo* previous = nullptr;
  for (const TensorInfo& info : tensors) {
    if (info.data_begin > data_size) {
      return TensorError(
          info.name,
          absl::StrCat("data_offsets [", info.data_begin, ", ", info.data_end,
                       "] start beyond the end of the ", data_size,
                       "-byte data section"));
    }
    if (info.data_end > data_size) {
      return absl::DataLossError(absl::StrCat(
          TensorPrefix(info.name), "data_offsets [", info.data_begin, ", ",
          info.data_end, "] run past the end of the ", data_size,
          "-byte data section (truncated file?)"));
    }
    if (info.data_begin < expected_begin) {
      return TensorError(
          info.name,
          absl::StrCat("data_offsets [", info.data_begin, ", ", info.data_end,
                       "] overlap the previous tensor ", Quoted(previous->name),
                       " ending at ", expected_begin));
    }
    if (info.data_begin > expected_begin) {
      const std::string where =
          previous == nullptr
              ? std::string("at the start of the data section")
              : absl::StrCat("after tensor ", Quoted(previous->name),
                             " (ending at ", expected_begin, ")");
      return TensorError(
          info.name,
          absl::StrCat("data_offsets [", info.data_begin, ", ", info.data_end,
                       "] leave a gap of ", info.data_begin - expected_begin,
                       " unused bytes ", where));
    }
    expected_begin = info.data_end;
    previous = &info;
  }
  if (expected_begin != data_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the data section has ", data_size - expected_begin,
        " trailing bytes not covered by any tensor (tensors end at ",
        expected_begin, " of ", data_size, ")"));
  }
  return absl::OkStatus();
}

absl::Status WithPath(const std::string& path, const absl::Status& status) {
  return absl::Status(status.code(),
                      absl::StrCat(path, ": ", status.message()));
}

}  // namespace

int64_t TensorInfo::NumElements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

absl::StatusOr<SafetensorsHeader> ParseSafetensorsHeader(
    absl::string_view file_bytes, const SafetensorsLimits& limits) {
  if (file_bytes.size() < kLengthPrefixBytes) {
    return absl::DataLossError(absl::StrCat(
        "file is ", file_bytes.size(),
        " bytes, too short for the 8-byte header length (truncated file?)"));
  }
  const uint64_t header_length = LoadLittleEndian64(file_bytes.data());
  if (header_length > limits.max_header_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("header length ", header_length, " exceeds the limit of ",
                     limits.max_header_bytes, " bytes"));
  }
  const uint64_t available = file_bytes.size() - kLengthPrefixBytes;
  if (header_length > available) {
    return absl::DataLossError(absl::StrCat(
        "header length ", header_length, " is beyond the end of the file (",
        available, " bytes follow the length; truncated file?)"));
  }
  const absl::string_view header_text =
      file_bytes.substr(kLengthPrefixBytes, header_length);
  StrictJsonOptions json_options;
  json_options.max_values = limits.max_tensors * 12 + 1024;
  QUANT_ASSIGN_OR_RETURN(
      json header, ParseJsonStrict(header_text, "header JSON", json_options));
  if (header.is_object()) {
    const int64_t tensors = static_cast<int64_t>(header.size()) -
                            (header.contains(kMetadataKey) ? 1 : 0);
    if (tensors > limits.max_tensors) {
      return absl::InvalidArgumentError(
          absl::StrCat("header lists ", tensors, " tensors, over the limit of ",
                       limits.max_tensors));
    }
  }
  if (!header.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "header JSON must be an object, not ", header.type_name()));
  }

  SafetensorsHeader result;
  result.data_offset = kLengthPrefixBytes + header_length;
  for (const auto& [name, entry] : header.items()) {
    if (name == kMetadataKey) {
      QUANT_RETURN_IF_ERROR(ParseMetadata(entry, result.metadata));
      continue;
    }
    QUANT_ASSIGN_OR_RETURN(TensorInfo info, ParseEntry(name, entry, limits));
    result.tensors.push_back(std::move(info));
  }
  // Zero-byte tensors sort before a tensor starting at the same offset.
  std::sort(result.tensors.begin(), result.tensors.end(),
            [](const TensorInfo& a, const TensorInfo& b) {
              return std::tie(a.data_begin, a.data_end, a.name) <
                     std::tie(b.data_begin, b.data_end, b.name);
            });
  QUANT_RETURN_IF_ERROR(
      CheckLayout(result.tensors, file_bytes.size() - result.data_offset));
  return result;
}

SafetensorsFile::SafetensorsFile(std::unique_ptr<MappedFile> file,
                                 SafetensorsHeader header)
    : file_(std::move(file)), header_(std::move(header)) {
  for (size_t i = 0; i < header_.tensors.size(); ++i) {
    index_.emplace(header_.tensors[i].name, i);
  }
}

absl::StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Open(
    const std::string& path, const SafetensorsLimits& limits, FileSystem* fs) {
  QUANT_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> file, fs->MapFile(path));
  absl::StatusOr<SafetensorsHeader> header =
      ParseSafetensorsHeader(file->view(), limits);
  if (!header.ok()) return WithPath(path, header.status());
  return std::unique_ptr<SafetensorsFile>(
      new SafetensorsFile(std::move(file), *std::move(header)));
}

const TensorInfo* SafetensorsFile::Find(absl::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &header_.tensors[it->second];
}

absl::StatusOr<int64_t> SafetensorsFile::MetadataCount(
    absl::string_view name) const {
  auto it = header_.metadata.find(std::string(name));
  if (it == header_.metadata.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path(), ": metadata ", name, " is missing"));
  }
  int64_t value = 0;
  if (!absl::SimpleAtoi(it->second, &value) || value < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(path(), ": metadata ", name, " = \"", it->second,
                     "\" is not a non-negative integer"));
  }
  return value;
}

absl::Span<const uint8_t> SafetensorsFile::RawBytes(
    const TensorInfo& info) const {
  if (info.ByteSize() == 0) return {};
  return absl::Span<const uint8_t>(
      file_->data() + header_.data_offset + info.data_begin, info.ByteSize());
}

void SafetensorsFile::ReleaseBytes(const TensorInfo& info, uint64_t begin,
                                   uint64_t end) const {
  end = std::min(end, info.ByteSize());
  if (begin >= end) return;
  file_->ReleasePages(header_.data_offset + info.data_begin + begin,
                      end - begin);
}

absl::StatusOr<FloatTensor> SafetensorsFile::ReadFloat(
    absl::string_view name) const {
  const TensorInfo* info = Find(name);
  if (info == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("tensor ", Quoted(name), " not found in ", path()));
  }
  FloatTensor tensor;
  tensor.shape = info->shape;
  const size_t count = static_cast<size_t>(info->NumElements());
  tensor.data.resize(count);
  if (count > 0) {
    ConvertToFloat(info->dtype, RawBytes(*info).data(), count,
                   tensor.data.data());
  }
  return tensor;
}

namespace {

// The length prefix and padded JSON header of a file holding `tensors` in
// that order; `data_bytes` receives the data section's size.
absl::StatusOr<std::string> EncodeHeader(
    const std::string& path, const std::vector<TensorDeclaration>& tensors,
    const std::map<std::string, std::string>& metadata, uint64_t* data_bytes) {
  json header = json::object();
  if (!metadata.empty()) {
    json meta = json::object();
    for (const auto& [key, value] : metadata) {
      // nlohmann::json::dump() throws on invalid UTF-8: checked up front.
      if (!IsValidUtf8(key) || !IsValidUtf8(value)) {
        return absl::InvalidArgumentError(
            absl::StrCat("cannot write ", path, ": metadata entry ",
                         Quoted(key), " is not valid UTF-8"));
      }
      meta[key] = value;
    }
    header[kMetadataKey] = std::move(meta);
  }
  std::set<absl::string_view> names;
  uint64_t offset = 0;
  for (const TensorDeclaration& tensor : tensors) {
    const std::string where = absl::StrCat("cannot write ", path, ": ");
    if (tensor.name == kMetadataKey) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, "\"__metadata__\" is reserved and cannot name a tensor"));
    }
    if (!IsValidUtf8(tensor.name)) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, TensorPrefix(tensor.name), "name is not valid UTF-8"));
    }
    if (!names.insert(tensor.name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, TensorPrefix(tensor.name), "name is repeated"));
    }
    absl::StatusOr<uint64_t> bytes =
        CheckedByteSize(tensor.name, tensor.dtype, tensor.shape);
    if (!bytes.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, bytes.status().message()));
    }
    header[tensor.name] = {{"dtype", std::string(DTypeName(tensor.dtype))},
                           {"shape", tensor.shape},
                           {"data_offsets", {offset, offset + *bytes}}};
    offset += *bytes;
  }
  std::string header_text = header.dump();
  // Pad with spaces (valid JSON whitespace) so the data starts 8-aligned.
  header_text.append((8 - header_text.size() % 8) % 8, ' ');
  std::string out(kLengthPrefixBytes, '\0');
  uint64_t length = header_text.size();
  for (size_t i = 0; i < kLengthPrefixBytes; ++i) {
    out[i] = static_cast<char>(length & 0xFF);
    length >>= 8;
  }
  out += header_text;
  *data_bytes = offset;
  return out;
}

}  // namespace

absl::Status WriteSafetensors(
    const std::string& path, const std::vector<TensorToWrite>& tensors,
    const std::map<std::string, std::string>& metadata, FileSystem* fs) {
  std::vector<TensorDeclaration> declared;
  declared.reserve(tensors.size());
  for (const TensorToWrite& tensor : tensors) {
    declared.push_back({tensor.name, tensor.dtype, tensor.shape});
  }
  uint64_t data_bytes = 0;
  QUANT_ASSIGN_OR_RETURN(const std::string header,
                         EncodeHeader(path, declared, metadata, &data_bytes));
  for (const TensorToWrite& tensor : tensors) {
    const uint64_t bytes =
        *CheckedByteSize(tensor.name, tensor.dtype, tensor.shape);
    if (tensor.data.size() != bytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot write ", path, ": ", TensorPrefix(tensor.name),
                       "has ", tensor.data.size(), " bytes of data but shape ",
                       ShapeString(tensor.shape), " of ",
                       DTypeName(tensor.dtype), " needs ", bytes));
    }
  }
  AtomicFileWriter writer(path, fs);
  writer.Append(header);
  for (const TensorToWrite& tensor : tensors) writer.Append(tensor.data);
  return writer.Commit();
}

SafetensorsStreamWriter::SafetensorsStreamWriter(const std::string& path,
                                                 uint64_t data_bytes,
                                                 FileSystem* fs)
    : path_(path), writer_(path, fs), data_bytes_(data_bytes) {}

absl::StatusOr<std::unique_ptr<SafetensorsStreamWriter>>
SafetensorsStreamWriter::Create(
    const std::string& path, const std::vector<TensorDeclaration>& tensors,
    const std::map<std::string, std::string>& metadata, FileSystem* fs) {
  uint64_t data_bytes = 0;
  QUANT_ASSIGN_OR_RETURN(const std::string header,
                         EncodeHeader(path, tensors, metadata, &data_bytes));
  std::unique_ptr<SafetensorsStreamWriter> writer(
      new SafetensorsStreamWriter(path, data_bytes, fs));
  writer->writer_.Append(header);
  QUANT_RETURN_IF_ERROR(writer->writer_.status());
  return writer;
}

absl::Status SafetensorsStreamWriter::Append(absl::string_view bytes) {
  if (written_ + bytes.size() > data_bytes_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot write ", path_, ": ", written_ + bytes.size(),
        " data bytes appended, more than the ", data_bytes_, " declared"));
  }
  writer_.Append(bytes);
  written_ += bytes.size();
  return writer_.status();
}

absl::Status SafetensorsStreamWriter::Commit() {
  if (written_ != data_bytes_) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot write ", path_, ": ", written_, " of the ",
                     data_bytes_, " declared data bytes appended"));
  }
  return writer_.Commit();
}

}  // namespace quant

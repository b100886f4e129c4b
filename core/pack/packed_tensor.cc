// Byte encodings of packed tensors.
#include "core/pack/packed_tensor.h"

#include <cstring>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/pack/bit_packing.h"

namespace quant {
namespace {

template <typename T>
std::string LittleEndianBytes(const std::vector<T>& values) {
  std::string bytes(values.size() * sizeof(T), '\0');
  for (size_t i = 0; i < values.size(); ++i) {
    const auto bits = static_cast<std::make_unsigned_t<T>>(values[i]);
    for (size_t b = 0; b < sizeof(T); ++b) {
      bytes[sizeof(T) * i + b] = static_cast<char>((bits >> (8 * b)) & 0xFF);
    }
  }
  return bytes;
}

int64_t ElementCount(const std::vector<int64_t>& shape) {
  int64_t count = 1;
  for (int64_t d : shape) count *= d;
  return count;
}

}  // namespace

std::vector<TensorToWrite> AsTensorsToWrite(
    const std::vector<PackedTensor>& tensors) {
  std::vector<TensorToWrite> views;
  views.reserve(tensors.size());
  for (const PackedTensor& t : tensors) {
    TensorToWrite view;
    view.name = t.name;
    view.dtype = t.dtype;
    view.shape = t.shape;
    view.data = t.bytes;
    views.push_back(std::move(view));
  }
  return views;
}

PackedTensor Int32Tensor(std::string name, std::vector<int64_t> shape,
                         const std::vector<int32_t>& values) {
  return {std::move(name), DType::kI32, std::move(shape),
          LittleEndianBytes(values)};
}

PackedTensor Int64Tensor(std::string name, std::vector<int64_t> shape,
                         const std::vector<int64_t>& values) {
  return {std::move(name), DType::kI64, std::move(shape),
          LittleEndianBytes(values)};
}

PackedTensor WordTensor(std::string name, std::vector<int64_t> shape,
                        const std::vector<uint32_t>& words) {
  return {std::move(name), DType::kI32, std::move(shape),
          WordsToLittleEndianBytes(words)};
}

absl::StatusOr<PackedTensor> FloatTensorAs(std::string name,
                                           std::vector<int64_t> shape,
                                           const std::vector<float>& values,
                                           DType dtype) {
  if (ElementCount(shape) != static_cast<int64_t>(values.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor ", name, ": shape holds ", ElementCount(shape),
                     " elements but ", values.size(), " values were given"));
  }
  if (dtype != DType::kF32 && dtype != DType::kF16 && dtype != DType::kBF16) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor ", name, ": cannot store floats as ",
                     DTypeName(dtype), " (F32, F16 or BF16 only)"));
  }
  PackedTensor tensor{std::move(name), dtype, std::move(shape), {}};
  tensor.bytes.resize(values.size() * DTypeSize(dtype));
  QUANT_RETURN_IF_ERROR(ConvertFromFloat(values.data(), values.size(), dtype,
                                         tensor.bytes.data()));
  return tensor;
}

std::string FloatsToBytes(const std::vector<float>& values, DType dtype) {
  if (dtype == DType::kF16 || dtype == DType::kBF16) {
    std::vector<uint16_t> halves(values.size());
    for (size_t i = 0; i < values.size(); ++i) {
      halves[i] = dtype == DType::kF16 ? FloatToHalf(values[i])
                                       : FloatToBFloat16(values[i]);
    }
    return LittleEndianBytes(halves);
  }
  std::vector<uint32_t> bits(values.size());
  static_assert(sizeof(float) == sizeof(uint32_t), "float is 32 bits");
  for (size_t i = 0; i < values.size(); ++i) {
    std::memcpy(&bits[i], &values[i], sizeof(float));
  }
  return LittleEndianBytes(bits);
}

float RoundTripThrough(float value, DType dtype) {
  switch (dtype) {
    case DType::kF16:
      return HalfToFloat(FloatToHalf(value));
    case DType::kBF16:
      return BFloat16ToFloat(FloatToBFloat16(value));
    default:
      return value;
  }
}

}  // namespace quant

// The independent reference reader of packed GPTQ v1 and compressed-tensors
// layers (see reference_unpacker.h).
#include "tests/pack/reference_unpacker.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace quant::testing {
namespace {

absl::StatusOr<const StoredTensor*> Get(const StoredTensors& tensors,
                                        const std::string& name, DType dtype,
                                        size_t rank) {
  auto it = tensors.find(name);
  if (it == tensors.end()) {
    return absl::NotFoundError(absl::StrCat("missing tensor ", name));
  }
  if (it->second.dtype != dtype) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, " has dtype ", DTypeName(it->second.dtype),
                     ", expected ", DTypeName(dtype)));
  }
  if (it->second.shape.size() != rank) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, " has rank ", it->second.shape.size()));
  }
  return &it->second;
}

// Byte i*4..i*4+3 of `bytes` as a little-endian 32-bit value.
uint32_t Word(const std::string& bytes, int64_t i) {
  uint32_t value = 0;
  for (int b = 3; b >= 0; --b) {
    value = (value << 8) | static_cast<uint8_t>(bytes[4 * i + b]);
  }
  return value;
}

int32_t Int32At(const std::string& bytes, int64_t i) {
  return static_cast<int32_t>(Word(bytes, i));
}

// `bits` bits starting at stream bit `start` of a line of words located at
// word_index(0), word_index(1), ... (one bit at a time).
template <typename WordIndex>
int ReadStreamBits(const std::string& bytes, WordIndex word_index,
                   int64_t start, int bits) {
  int value = 0;
  for (int t = 0; t < bits; ++t) {
    const int64_t pos = start + t;
    const uint32_t word = Word(bytes, word_index(pos / 32));
    value |= static_cast<int>((word >> (pos % 32)) & 1u) << t;
  }
  return value;
}

std::vector<float> ToFloats(const StoredTensor& tensor) {
  size_t count = tensor.bytes.size() / DTypeSize(tensor.dtype);
  std::vector<float> values(count);
  ConvertToFloat(tensor.dtype, tensor.bytes.data(), count, values.data());
  return values;
}

}  // namespace

StoredTensors ReadAllTensors(const SafetensorsFile& file) {
  StoredTensors tensors;
  for (const TensorInfo& info : file.tensors()) {
    absl::Span<const uint8_t> raw = file.RawBytes(info);
    tensors[info.name] = {
        info.dtype, info.shape,
        std::string(reinterpret_cast<const char*>(raw.data()), raw.size())};
  }
  return tensors;
}

absl::StatusOr<UnpackedLayer> UnpackGptqV1(const StoredTensors& tensors,
                                           const std::string& layer, int bits) {
  auto qweight = Get(tensors, layer + ".qweight", DType::kI32, 2);
  auto qzeros = Get(tensors, layer + ".qzeros", DType::kI32, 2);
  auto scales = Get(tensors, layer + ".scales", DType::kF16, 2);
  auto g_idx = Get(tensors, layer + ".g_idx", DType::kI32, 1);
  for (const auto* t : {&qweight, &qzeros, &scales, &g_idx}) {
    if (!t->ok()) return t->status();
  }
  UnpackedLayer out;
  out.rows = (*qweight)->shape[1];
  out.cols = (*qweight)->shape[0] * 32 / bits;
  const int64_t n = out.rows;
  const int64_t k = out.cols;
  const int64_t groups = (*scales)->shape[0];
  if ((*qweight)->shape[0] * 32 != k * bits || (*g_idx)->shape[0] != k ||
      (*scales)->shape[1] != n || (*qzeros)->shape[0] != groups ||
      (*qzeros)->shape[1] * 32 != n * bits) {
    return absl::InvalidArgumentError(
        absl::StrCat(layer, ": GPTQ tensor shapes disagree"));
  }
  const std::vector<float> scale = ToFloats(**scales);
  const int64_t zero_words = (*qzeros)->shape[1];
  out.weight.resize(static_cast<size_t>(n * k));
  out.codes.resize(static_cast<size_t>(n * k));
  for (int64_t c = 0; c < k; ++c) {
    const int32_t g = Int32At((*g_idx)->bytes, c);
    if (g < 0 || g >= groups) {
      return absl::InvalidArgumentError(
          absl::StrCat(layer, ": g_idx[", c, "] out of range"));
    }
    for (int64_t r = 0; r < n; ++r) {
      // Column r of qweight: word w is element [w, r].
      const int q =
          ReadStreamBits((*qweight)->bytes,
                         [&](int64_t w) { return w * n + r; }, c * bits, bits);
      const int stored_zero = ReadStreamBits(
          (*qzeros)->bytes, [&](int64_t w) { return g * zero_words + w; },
          r * bits, bits);
      const float s = scale[static_cast<size_t>(g * n + r)];
      out.codes[static_cast<size_t>(r * k + c)] = q;
      out.weight[static_cast<size_t>(r * k + c)] =
          s * (static_cast<float>(q) - static_cast<float>(stored_zero + 1));
    }
  }
  return out;
}

absl::StatusOr<UnpackedLayer> UnpackCompressedTensors(
    const StoredTensors& tensors, const std::string& layer, int bits,
    bool symmetric, int64_t group_size, bool dense) {
  auto packed = Get(tensors, layer + ".weight_packed", DType::kI32, 2);
  auto shape = Get(tensors, layer + ".weight_shape", DType::kI64, 1);
  if (!packed.ok()) return packed.status();
  if (!shape.ok()) return shape.status();
  auto scale_it = tensors.find(layer + ".weight_scale");
  if (scale_it == tensors.end() || scale_it->second.shape.size() != 2 ||
      !IsFloatingPoint(scale_it->second.dtype)) {
    return absl::InvalidArgumentError(
        absl::StrCat(layer, ".weight_scale missing or not a float matrix"));
  }
  const StoredTensor& scale_tensor = scale_it->second;
  std::vector<int64_t> dims(2);
  for (int i = 0; i < 2; ++i) {
    int64_t value = 0;
    for (int b = 7; b >= 0; --b) {
      value = (value << 8) | static_cast<uint8_t>((*shape)->bytes[8 * i + b]);
    }
    dims[i] = value;
  }
  UnpackedLayer out;
  out.rows = dims[0];
  out.cols = dims[1];
  const int64_t n = out.rows;
  const int64_t k = out.cols;
  const int per_word = 32 / bits;
  // Words holding `count` codes.
  const auto words_for = [&](int64_t count) {
    return dense ? (count * bits + 31) / 32 : (count + per_word - 1) / per_word;
  };
  // Code `index` of the line starting at word `first` (a row, or a column
  // of `stride` words apart), read bit by bit.
  const auto code_at = [&](const std::string& bytes, int64_t first,
                           int64_t stride, int64_t index) {
    int value = 0;
    for (int bit = 0; bit < bits; ++bit) {
      const int64_t position =
          dense ? index * bits + bit
                : (index / per_word) * 32 + (index % per_word) * bits + bit;
      const uint32_t word = Word(bytes, first + (position / 32) * stride);
      value |= static_cast<int>((word >> (position % 32)) & 1u) << bit;
    }
    return value;
  };
  const int64_t words_per_row = words_for(k);
  const int64_t groups = scale_tensor.shape[1];
  if ((*packed)->shape[0] != n || (*packed)->shape[1] != words_per_row ||
      scale_tensor.shape[0] != n) {
    return absl::InvalidArgumentError(
        absl::StrCat(layer, ": compressed-tensors shapes disagree"));
  }
  const std::vector<float> scale = ToFloats(scale_tensor);
  const StoredTensor* zero_point = nullptr;
  if (!symmetric) {
    auto zp = Get(tensors, layer + ".weight_zero_point", DType::kI32, 2);
    if (!zp.ok()) return zp.status();
    if ((*zp)->shape[0] != words_for(n) || (*zp)->shape[1] != groups) {
      return absl::InvalidArgumentError(
          absl::StrCat(layer, ": weight_zero_point shape disagrees"));
    }
    zero_point = *zp;
  } else if (tensors.count(layer + ".weight_zero_point") != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(layer, ": symmetric layer has weight_zero_point"));
  }
  const StoredTensor* g_idx = nullptr;
  auto g_it = tensors.find(layer + ".weight_g_idx");
  if (g_it != tensors.end()) g_idx = &g_it->second;
  const int offset = 1 << (bits - 1);
  out.weight.resize(static_cast<size_t>(n * k));
  out.codes.resize(static_cast<size_t>(n * k));
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t c = 0; c < k; ++c) {
      const int u = code_at((*packed)->bytes, r * words_per_row, 1, c);
      const int q = u - offset;
      const int64_t g = g_idx != nullptr ? Int32At(g_idx->bytes, c)
                        : group_size > 0 ? c / group_size
                                         : 0;
      if (g < 0 || g >= groups) {
        return absl::InvalidArgumentError(
            absl::StrCat(layer, ": group of column ", c, " out of range"));
      }
      int zp = 0;
      if (zero_point != nullptr) {
        zp = code_at(zero_point->bytes, g, groups, r) - offset;
      }
      out.codes[static_cast<size_t>(r * k + c)] = u;
      out.weight[static_cast<size_t>(r * k + c)] =
          scale[static_cast<size_t>(r * groups + g)] *
          static_cast<float>(q - zp);
    }
  }
  return out;
}

}  // namespace quant::testing

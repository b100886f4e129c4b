// NaN/Inf detection on the raw bit patterns of each floating-point dtype.
#include "core/model/finite_scan.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace quant {
namespace {

// Scans `count` little-endian words of type Word. A value is non-finite when
// all its exponent bits are set; it is NaN when its mantissa is also nonzero.
template <typename Word>
std::optional<NonFiniteValue> Scan(const uint8_t* data, int64_t count,
                                   Word exponent_mask, Word mantissa_mask) {
  for (int64_t i = 0; i < count; ++i) {
    Word word;
    std::memcpy(&word, data + i * sizeof(Word), sizeof(Word));
    if ((word & exponent_mask) == exponent_mask) {
      return NonFiniteValue{i, (word & mantissa_mask) != 0};
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<NonFiniteValue> FindFirstNonFinite(
    DType dtype, absl::Span<const uint8_t> bytes, int64_t count) {
  if (count < 0 ||
      bytes.size() < static_cast<uint64_t>(count) * DTypeSize(dtype)) {
    count = static_cast<int64_t>(bytes.size() / DTypeSize(dtype));
  }
  switch (dtype) {
    case DType::kF64:
      return Scan<uint64_t>(bytes.data(), count, 0x7FF0000000000000ULL,
                            0x000FFFFFFFFFFFFFULL);
    case DType::kF32:
      return Scan<uint32_t>(bytes.data(), count, 0x7F800000u, 0x007FFFFFu);
    case DType::kF16:
      return Scan<uint16_t>(bytes.data(), count, 0x7C00, 0x03FF);
    case DType::kBF16:
      return Scan<uint16_t>(bytes.data(), count, 0x7F80, 0x007F);
    default:
      return std::nullopt;  // Integer types are always finite.
  }
}

std::string FormatIndex(int64_t flat_index, const std::vector<int64_t>& shape) {
  std::vector<int64_t> index(shape.size(), 0);
  for (size_t d = shape.size(); d-- > 0;) {
    if (shape[d] <= 0) continue;
    index[d] = flat_index % shape[d];
    flat_index /= shape[d];
  }
  return absl::StrCat("[", absl::StrJoin(index, ", "), "]");
}

}  // namespace quant

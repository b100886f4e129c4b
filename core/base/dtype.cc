// Element types and their float32 conversions.
#include "core/base/dtype.h"

#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace quant {
namespace {

struct DTypeInfo {
  DType dtype;
  const char* name;
  size_t size;
};

constexpr DTypeInfo kDTypes[] = {
    {DType::kF64, "F64", 8},   {DType::kF32, "F32", 4}, {DType::kF16, "F16", 2},
    {DType::kBF16, "BF16", 2}, {DType::kI64, "I64", 8}, {DType::kI32, "I32", 4},
    {DType::kI16, "I16", 2},   {DType::kI8, "I8", 1},   {DType::kU8, "U8", 1},
    {DType::kBool, "BOOL", 1},
};

const DTypeInfo& Info(DType dtype) { return kDTypes[static_cast<int>(dtype)]; }

template <typename T>
T LoadUnaligned(const unsigned char* p) {
  T value;
  std::memcpy(&value, p, sizeof(T));
  return value;
}

uint32_t FloatBits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  return bits;
}

float BitsToFloat(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

}  // namespace

size_t DTypeSize(DType dtype) { return Info(dtype).size; }

absl::string_view DTypeName(DType dtype) { return Info(dtype).name; }

absl::StatusOr<DType> ParseDType(absl::string_view name) {
  for (const DTypeInfo& info : kDTypes) {
    if (name == info.name) return info.dtype;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown dtype \"", name,
                   "\" (known: F64, F32, F16, BF16, I64, I32, I16, I8, U8, "
                   "BOOL)"));
}

bool IsFloatingPoint(DType dtype) {
  return dtype == DType::kF64 || dtype == DType::kF32 || dtype == DType::kF16 ||
         dtype == DType::kBF16;
}

float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1Fu;
  const uint32_t mantissa = h & 0x3FFu;
  if (exponent == 0) {
    // Zero or subnormal: value = mantissa * 2^-24.
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 0x1F) {
    return BitsToFloat(sign | 0x7F800000u | (mantissa << 13));
  }
  return BitsToFloat(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

uint16_t FloatToHalf(float f) {
  const uint32_t bits = FloatBits(f);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t abs_bits = bits & 0x7FFFFFFFu;
  if (abs_bits >= 0x7F800000u) {  // Inf or NaN.
    const bool is_nan = abs_bits > 0x7F800000u;
    return sign | 0x7C00u | (is_nan ? 0x200u : 0u);
  }
  if (abs_bits >= 0x477FF000u) return sign | 0x7C00u;  // Rounds past 65504.
  if (abs_bits < 0x38800000u) {
    // Result is subnormal or zero: round |f| / 2^-24 to nearest even.
    const float scaled = std::ldexp(BitsToFloat(abs_bits), 24);
    return sign | static_cast<uint16_t>(std::nearbyint(scaled));
  }
  // Normal: rebias the exponent and round the mantissa to 10 bits.
  uint32_t half = abs_bits - 0x38000000u;  // Exponent bias 127 -> 15.
  const uint32_t round_bit = 0x1000u;
  const uint32_t lower = half & 0x1FFFu;
  half >>= 13;
  if (lower > round_bit || (lower == round_bit && (half & 1u))) ++half;
  return sign | static_cast<uint16_t>(half);
}

float BFloat16ToFloat(uint16_t b) {
  return BitsToFloat(static_cast<uint32_t>(b) << 16);
}

uint16_t FloatToBFloat16(float f) {
  const uint32_t bits = FloatBits(f);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) {
    return static_cast<uint16_t>((bits >> 16) | 0x40u);  // Quiet NaN.
  }
  const uint32_t rounding = 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

void ConvertToFloat(DType dtype, const void* src, size_t count, float* dst) {
  const auto* p = static_cast<const unsigned char*>(src);
  const size_t size = DTypeSize(dtype);
  for (size_t i = 0; i < count; ++i, p += size) {
    switch (dtype) {
      case DType::kF64:
        dst[i] = static_cast<float>(LoadUnaligned<double>(p));
        break;
      case DType::kF32:
        dst[i] = LoadUnaligned<float>(p);
        break;
      case DType::kF16:
        dst[i] = HalfToFloat(LoadUnaligned<uint16_t>(p));
        break;
      case DType::kBF16:
        dst[i] = BFloat16ToFloat(LoadUnaligned<uint16_t>(p));
        break;
      case DType::kI64:
        dst[i] = static_cast<float>(LoadUnaligned<int64_t>(p));
        break;
      case DType::kI32:
        dst[i] = static_cast<float>(LoadUnaligned<int32_t>(p));
        break;
      case DType::kI16:
        dst[i] = static_cast<float>(LoadUnaligned<int16_t>(p));
        break;
      case DType::kI8:
        dst[i] = static_cast<float>(LoadUnaligned<int8_t>(p));
        break;
      case DType::kU8:
      case DType::kBool:
        dst[i] = static_cast<float>(*p);
        break;
    }
  }
}

absl::Status ConvertFromFloat(const float* src, size_t count, DType dtype,
                              void* dst) {
  auto* out = static_cast<unsigned char*>(dst);
  switch (dtype) {
    case DType::kF32:
      std::memcpy(out, src, count * sizeof(float));
      return absl::OkStatus();
    case DType::kF16:
      for (size_t i = 0; i < count; ++i) {
        const uint16_t h = FloatToHalf(src[i]);
        std::memcpy(out + 2 * i, &h, 2);
      }
      return absl::OkStatus();
    case DType::kBF16:
      for (size_t i = 0; i < count; ++i) {
        const uint16_t b = FloatToBFloat16(src[i]);
        std::memcpy(out + 2 * i, &b, 2);
      }
      return absl::OkStatus();
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("cannot convert float32 to ", DTypeName(dtype),
                       " (only F32, F16, BF16)"));
  }
}

}  // namespace quant

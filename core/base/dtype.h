// Element types of stored tensors (the safetensors set) and conversions
// between them and float32, the type all computation happens in.
#ifndef QUANT_CORE_BASE_DTYPE_H_
#define QUANT_CORE_BASE_DTYPE_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace quant {

enum class DType {
  kF64,
  kF32,
  kF16,
  kBF16,
  kI64,
  kI32,
  kI16,
  kI8,
  kU8,
  kBool,
};

// Size in bytes of one element.
size_t DTypeSize(DType dtype);

// The safetensors name ("F32", "BF16", ...).
absl::string_view DTypeName(DType dtype);

// Parses a safetensors dtype name; the error names the unknown value.
absl::StatusOr<DType> ParseDType(absl::string_view name);

bool IsFloatingPoint(DType dtype);

// IEEE binary16 and bfloat16 conversions. Float to half rounds to nearest
// even; overflow gives infinity; NaN stays NaN.
float HalfToFloat(uint16_t h);
uint16_t FloatToHalf(float f);
float BFloat16ToFloat(uint16_t b);
uint16_t FloatToBFloat16(float f);

// Converts `count` elements at `src` (of type `dtype`, little-endian, any
// alignment) to float32. Integer types convert by value.
void ConvertToFloat(DType dtype, const void* src, size_t count, float* dst);

// Converts `count` floats to `dtype` at `dst` (F32, F16 or BF16 only;
// returns InvalidArgument for other types).
absl::Status ConvertFromFloat(const float* src, size_t count, DType dtype,
                              void* dst);

}  // namespace quant

#endif  // QUANT_CORE_BASE_DTYPE_H_

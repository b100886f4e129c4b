// A tensor produced by a packer, owning its stored bytes, and the helpers
// that turn typed values into those bytes and hand them to WriteSafetensors.
#ifndef QUANT_CORE_PACK_PACKED_TENSOR_H_
#define QUANT_CORE_PACK_PACKED_TENSOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/base/dtype.h"
#include "core/io/safetensors.h"

namespace quant {

struct PackedTensor {
  std::string name;
  DType dtype = DType::kI32;
  std::vector<int64_t> shape;
  std::string bytes;  // Little-endian, C order, product(shape) elements.
};

// Views for WriteSafetensors; valid while `tensors` lives unchanged.
std::vector<TensorToWrite> AsTensorsToWrite(
    const std::vector<PackedTensor>& tensors);

PackedTensor Int32Tensor(std::string name, std::vector<int64_t> shape,
                         const std::vector<int32_t>& values);
PackedTensor Int64Tensor(std::string name, std::vector<int64_t> shape,
                         const std::vector<int64_t>& values);
// Packed words stored as int32 (same bit pattern).
PackedTensor WordTensor(std::string name, std::vector<int64_t> shape,
                        const std::vector<uint32_t>& words);
// Floats converted to `dtype` (F32, F16 or BF16), e.g. a kept bias.
// InvalidArgument names the tensor for another dtype or a size mismatch.
absl::StatusOr<PackedTensor> FloatTensorAs(std::string name,
                                           std::vector<int64_t> shape,
                                           const std::vector<float>& values,
                                           DType dtype);

// Floats encoded as little-endian F16 or BF16 (rounded to nearest even), or
// F32 for any other `dtype`.
std::string FloatsToBytes(const std::vector<float>& values, DType dtype);

// Rounds a float through `dtype` (F32, F16, BF16) and back: the value a
// reader of the stored tensor sees.
float RoundTripThrough(float value, DType dtype);

}  // namespace quant

#endif  // QUANT_CORE_PACK_PACKED_TENSOR_H_

// An independent reader of the packed formats, written from their published
// descriptions alone (it shares no code with core/pack): it extracts every
// code bit by bit, applies the format's own zero and sign conventions, and
// dequantizes. Tests compare its output with QuantizedLayer::dequantized.
#ifndef QUANT_TESTS_PACK_REFERENCE_UNPACKER_H_
#define QUANT_TESTS_PACK_REFERENCE_UNPACKER_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/base/dtype.h"
#include "core/io/safetensors.h"

namespace quant::testing {

struct StoredTensor {
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  std::string bytes;  // Little-endian, C order.
};
using StoredTensors = std::map<std::string, StoredTensor>;

// Every tensor of an opened safetensors file.
StoredTensors ReadAllTensors(const SafetensorsFile& file);

struct UnpackedLayer {
  int64_t rows = 0;           // N
  int64_t cols = 0;           // K
  std::vector<float> weight;  // [N, K] dequantized.
  std::vector<int> codes;     // [N, K] stored unsigned codes.
};

// GPTQ v1: qweight int32 [K*b/32, N] (code j of column n at bit j*b of the
// column's LSB-first bit stream), qzeros int32 [G, N*b/32] holding zero-1 the
// same way along N, scales fp16 [G, N], g_idx int32 [K];
// W[n,k] = scales[g,n] * (q - (stored_zero + 1)), g = g_idx[k].
absl::StatusOr<UnpackedLayer> UnpackGptqV1(const StoredTensors& tensors,
                                           const std::string& layer, int bits);

// compressed-tensors pack-quantized. Dense (0.18, `dense` true):
// weight_packed int32 [N, ceil(K*b/32)], code j at bits [j*b, j*b+b) of the
// row's LSB-first bit stream over its words; the 0.17 layout (`dense`
// false): [N, ceil(K/p)], p = 32/b codes per word, code j in word j/p at bit
// (j%p)*b. Stored u means signed q = u - 2^(b-1); weight_zero_point int32
// [words for N, G] packed along N the same way (signed zp = stored -
// 2^(b-1)), zp = 0 when symmetric; weight_scale float [N, G]; weight_g_idx
// [K] or k / group_size; W = scale * (q - zp).
absl::StatusOr<UnpackedLayer> UnpackCompressedTensors(
    const StoredTensors& tensors, const std::string& layer, int bits,
    bool symmetric, int64_t group_size, bool dense = true);

}  // namespace quant::testing

#endif  // QUANT_TESTS_PACK_REFERENCE_UNPACKER_H_

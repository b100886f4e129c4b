// Quantization grids: how a slice of weights (one output row, or one group of
// input columns of a row) maps to integer codes and back.
//
// Every grid stores codes as unsigned integers 0..2^b-1 with a per-group scale
// and zero point, and dequantizes as scale * (code - zero):
//   kSym            scale = 2*amax/(2^b-1), zero = 2^(b-1), codes 0..2^b-1
//                   (the packing convention of GPTQ kernels).
//   kSymRestricted  scale = amax/(2^(b-1)-1), zero = 2^(b-1), codes
//                   1..2^b-1, i.e. signed -(2^(b-1)-1)..2^(b-1)-1 (the seed
//                   documents' convention: 15 of 16 codes at 4 bits).
//   kAsym           lo = min(min w, 0), hi = max(max w, 0),
//                   scale = (hi-lo)/(2^b-1), zero = round(-lo/scale),
//                   codes 0..2^b-1.
// A slice whose range is zero gets scale 1 (never a division by zero).
#ifndef QUANT_CORE_QUANT_GRID_H_
#define QUANT_CORE_QUANT_GRID_H_

#include <cmath>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace quant {

enum class GridKind { kSym, kSymRestricted, kAsym };

// "sym", "sym-restricted", "asym".
absl::StatusOr<GridKind> ParseGridKind(absl::string_view name);
const char* GridKindName(GridKind kind);

struct GridSpec {
  GridKind kind = GridKind::kSym;
  int bits = 4;  // 2, 3, 4 or 8.
  // Input columns per group; 0 means one group per output row. Need not
  // divide K: the last group is then partial.
  int64_t group_size = 0;
  // Round every scale to fp16 (the stored precision of both packed formats)
  // before codes are chosen, so a packed layer dequantizes to exactly the
  // weights the quantizer produced and the audit measured. Off by default:
  // the seed documents' tables use float scales.
  bool f16_scales = false;
};

// Checks bits and group_size; errors name the field.
absl::Status ValidateGridSpec(const GridSpec& grid);

// Number of groups along K (1 for per-row grids).
int64_t NumGroups(const GridSpec& grid, int64_t k);
// Columns per group along K (K for per-row grids).
inline int64_t EffectiveGroupSize(const GridSpec& grid, int64_t k) {
  return grid.group_size > 0 ? grid.group_size : k;
}

struct CodeRange {
  int lo = 0;
  int hi = 0;
};
CodeRange CodeRangeFor(const GridSpec& grid);

struct GroupParams {
  float scale = 1.0f;
  float zero = 0.0f;  // In code units; an integer value.
};

// Parameters for a slice of `count` values spaced `stride` apart. With
// clip_ratio < 1 the range is shrunk (AWQ's clipping search).
// With grid.f16_scales the scale is rounded to fp16 first (a scale below
// fp16's smallest subnormal becomes that subnormal; one above its range stays
// as it is, and the packer refuses it).
GroupParams ComputeGroupParams(const GridSpec& grid, const float* values,
                               int64_t count, int64_t stride = 1,
                               float clip_ratio = 1.0f);

// Round to nearest (ties to even, like torch.round), offset, clamp. Divides
// rather than multiplying by 1/scale so results match the reference bit for
// bit.
inline int QuantizeToCode(float w, const GroupParams& p, const CodeRange& r) {
  float q = std::nearbyint(w / p.scale) + p.zero;
  q = q < static_cast<float>(r.lo) ? static_cast<float>(r.lo) : q;
  q = q > static_cast<float>(r.hi) ? static_cast<float>(r.hi) : q;
  return static_cast<int>(q);
}

inline float DequantizeCode(int code, const GroupParams& p) {
  return p.scale * (static_cast<float>(code) - p.zero);
}

}  // namespace quant

#endif  // QUANT_CORE_QUANT_GRID_H_

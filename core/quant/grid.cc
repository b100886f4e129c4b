// Grid parameters (scale, zero) per slice; see grid.h for the conventions.
#include "core/quant/grid.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "core/base/dtype.h"

namespace quant {

absl::StatusOr<GridKind> ParseGridKind(absl::string_view name) {
  if (name == "sym") return GridKind::kSym;
  if (name == "sym-restricted") return GridKind::kSymRestricted;
  if (name == "asym") return GridKind::kAsym;
  return absl::InvalidArgumentError(absl::StrCat(
      "grid kind '", name, "' is not one of sym, sym-restricted, asym"));
}

const char* GridKindName(GridKind kind) {
  switch (kind) {
    case GridKind::kSym:
      return "sym";
    case GridKind::kSymRestricted:
      return "sym-restricted";
    case GridKind::kAsym:
      return "asym";
  }
  return "unknown";
}

absl::Status ValidateGridSpec(const GridSpec& grid) {
  if (grid.bits != 2 && grid.bits != 3 && grid.bits != 4 && grid.bits != 8) {
    return absl::InvalidArgumentError(
        absl::StrCat("grid.bits is ", grid.bits, "; supported: 2, 3, 4, 8"));
  }
  if (grid.group_size < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "grid.group_size is ", grid.group_size, "; must be 0 (per row) or >0"));
  }
  return absl::OkStatus();
}

int64_t NumGroups(const GridSpec& grid, int64_t k) {
  if (grid.group_size <= 0) return 1;
  return (k + grid.group_size - 1) / grid.group_size;
}

CodeRange CodeRangeFor(const GridSpec& grid) {
  const int maxq = (1 << grid.bits) - 1;
  if (grid.kind == GridKind::kSymRestricted) return {1, maxq};
  return {0, maxq};
}

namespace {

// fp16's largest finite value and smallest positive subnormal.
constexpr float kHalfMax = 65504.0f;
constexpr float kHalfMinSubnormal = 5.9604645e-8f;

float StorableScale(float scale) {
  if (!(scale <= kHalfMax)) return scale;  // The packer reports it.
  const float rounded = HalfToFloat(FloatToHalf(scale));
  return rounded > 0.0f ? rounded : kHalfMinSubnormal;
}

}  // namespace

GroupParams ComputeGroupParams(const GridSpec& grid, const float* values,
                               int64_t count, int64_t stride,
                               float clip_ratio) {
  const GridKind kind = grid.kind;
  const int bits = grid.bits;
  const int maxq = (1 << bits) - 1;
  const float half = static_cast<float>(1 << (bits - 1));
  float lo = 0.0f;
  float hi = 0.0f;
  for (int64_t i = 0; i < count; ++i) {
    const float v = values[i * stride];
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  GroupParams p;
  if (kind == GridKind::kAsym) {
    lo *= clip_ratio;
    hi *= clip_ratio;
    if (hi == lo) return {1.0f, 0.0f};
    p.scale = (hi - lo) / static_cast<float>(maxq);
    if (grid.f16_scales) p.scale = StorableScale(p.scale);
    p.zero = std::nearbyint(-lo / p.scale);
    return p;
  }
  const float amax = std::max(-lo, hi) * clip_ratio;
  p.zero = half;
  if (amax == 0.0f) {
    p.scale = 1.0f;
    return p;
  }
  p.scale = kind == GridKind::kSym
                ? (2.0f * amax) / static_cast<float>(maxq)
                : amax / static_cast<float>((1 << (bits - 1)) - 1);
  if (grid.f16_scales) p.scale = StorableScale(p.scale);
  return p;
}

}  // namespace quant

// Layer consistency checks done before packing.
#include "core/pack/pack_validation.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/pack/bit_packing.h"
#include "core/pack/packed_tensor.h"

namespace quant {

int64_t PackGroupCount(const GridSpec& grid, int64_t k) {
  if (grid.group_size <= 0) return 1;
  return (k + grid.group_size - 1) / grid.group_size;
}

absl::Status ValidateLayerForPacking(const QuantizedLayer& layer,
                                     absl::string_view layer_name) {
  const int bits = layer.grid.bits;
  const int64_t n = layer.rows;
  const int64_t k = layer.cols;
  auto error = [&](auto&&... parts) {
    return absl::InvalidArgumentError(
        absl::StrCat("layer ", layer_name, ": ", parts...));
  };
  if (!IsPackableBits(bits)) {
    return error("bits = ", bits, " cannot be packed (2, 3, 4 or 8)");
  }
  if (n <= 0 || k <= 0) {
    return error("empty weight [", n, ", ", k, "]");
  }
  if (layer.grid.group_size < 0) {
    return error("group_size = ", layer.grid.group_size, " is negative");
  }
  if (layer.codes.rows() != n || layer.codes.cols() != k) {
    return error("codes are [", layer.codes.rows(), ", ", layer.codes.cols(),
                 "], expected [", n, ", ", k, "]");
  }
  const int64_t groups = PackGroupCount(layer.grid, k);
  if (layer.scales.rows() != groups || layer.scales.cols() != n) {
    return error("scales are [", layer.scales.rows(), ", ", layer.scales.cols(),
                 "], expected [groups=", groups, ", ", n, "]");
  }
  if (layer.zeros.rows() != groups || layer.zeros.cols() != n) {
    return error("zeros are [", layer.zeros.rows(), ", ", layer.zeros.cols(),
                 "], expected [groups=", groups, ", ", n, "]");
  }
  if (static_cast<int64_t>(layer.g_idx.size()) != k) {
    return error("g_idx has ", layer.g_idx.size(), " entries, expected K=", k);
  }
  const int max_code = (1 << bits) - 1;
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t c = 0; c < k; ++c) {
      if (layer.codes(r, c) > max_code) {
        return error("code ", static_cast<int>(layer.codes(r, c)), " at [", r,
                     ", ", c, "] exceeds 2^", bits, "-1 = ", max_code);
      }
    }
  }
  const bool symmetric = layer.grid.kind != GridKind::kAsym;
  const float sym_zero = static_cast<float>(1 << (bits - 1));
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t r = 0; r < n; ++r) {
      const float zero = layer.zeros(g, r);
      if (!(zero >= 0.0f && zero <= static_cast<float>(max_code)) ||
          zero != std::floor(zero)) {
        return error("zero ", zero, " at [group ", g, ", row ", r,
                     "] is not an integer in 0..", max_code);
      }
      if (symmetric && zero != sym_zero) {
        return error("zero ", zero, " at [group ", g, ", row ", r,
                     "] differs from 2^(b-1) = ", sym_zero, " on a ",
                     "symmetric grid");
      }
      const float scale = layer.scales(g, r);
      if (!std::isfinite(scale) || scale <= 0.0f) {
        return error("scale ", scale, " at [group ", g, ", row ", r,
                     "] is not finite and positive");
      }
    }
  }
  for (int64_t c = 0; c < k; ++c) {
    const int32_t g = layer.g_idx[c];
    if (g < 0 || g >= groups) {
      return error("g_idx[", c, "] = ", g, " is outside [0, ", groups, ")");
    }
  }
  return absl::OkStatus();
}

bool HasSequentialGroups(const QuantizedLayer& layer) {
  for (int64_t c = 0; c < static_cast<int64_t>(layer.g_idx.size()); ++c) {
    const int64_t expected =
        layer.grid.group_size > 0 ? c / layer.grid.group_size : 0;
    if (layer.g_idx[c] != expected) return false;
  }
  return true;
}

absl::StatusOr<StoredScales> RoundScalesForStorage(const QuantizedLayer& layer,
                                                   absl::string_view layer_name,
                                                   DType dtype,
                                                   bool transpose_to_rows) {
  const int64_t groups = layer.scales.rows();
  const int64_t n = layer.scales.cols();
  StoredScales stored;
  stored.values.resize(static_cast<size_t>(groups * n));
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t r = 0; r < n; ++r) {
      const float scale = layer.scales(g, r);
      const float kept = RoundTripThrough(scale, dtype);
      if (!std::isfinite(kept) || kept == 0.0f) {
        return absl::OutOfRangeError(absl::StrCat(
            "layer ", layer_name, ": scale ", scale, " at [group ", g, ", row ",
            r, "] becomes ", kept, " when stored as ", DTypeName(dtype)));
      }
      const float change = std::fabs(kept - scale) / scale;
      if (change > stored.max_relative_change) {
        stored.max_relative_change = change;
      }
      const int64_t at = transpose_to_rows ? r * groups + g : g * n + r;
      stored.values[static_cast<size_t>(at)] = kept;
    }
  }
  return stored;
}

}  // namespace quant

// The `quantization_config` block of a packed checkpoint's config.json, as a
// reader of its tensors needs it: which of the two packed formats
// (gptq_format.h, compressed_tensors_format.h), how many bits, the group
// size, symmetry and act-order, by default and per layer (GPTQ "dynamic"
// rules, compressed-tensors config groups and "ignore"). Anything a reader
// could misinterpret is refused rather than guessed.
#ifndef QUANT_CORE_PACK_PACKED_FORMAT_CONFIG_H_
#define QUANT_CORE_PACK_PACKED_FORMAT_CONFIG_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/pack/bit_packing.h"
#include "nlohmann/json.hpp"

namespace quant {

enum class PackedFormat {
  kGptq,               // quant_method "gptq", checkpoint_format "gptq" (v1).
  kCompressedTensors,  // quant_method "compressed-tensors", "pack-quantized".
};

// "gptq" or "compressed-tensors" (the config's quant_method).
const char* PackedFormatName(PackedFormat format);

// How one layer is packed.
struct PackedScheme {
  int bits = 4;
  int64_t group_size = 0;  // 0: one group per output row.
  bool symmetric = true;
  // GPTQ desc_act / compressed-tensors actorder "group" (see below).
  bool act_order = false;

  bool operator==(const PackedScheme& other) const {
    return bits == other.bits && group_size == other.group_size &&
           symmetric == other.symmetric && act_order == other.act_order;
  }
};

// A per-layer rule. Only literal module names are read: a GPTQ "dynamic"
// key must be a literal (regex metacharacters escaped; "^...$" anchors an
// exact match, without "$" it matches names starting with it), a
// compressed-tensors target or ignore entry an exact module name.
struct PackedSchemeRule {
  std::string name;          // Unescaped module name.
  bool prefix = false;       // Matches names that start with `name`.
  bool unquantized = false;  // GPTQ "-:" rule, compressed-tensors "ignore".
  PackedScheme scheme;       // When quantized.
  std::string source;        // The rule as written, for error messages.
};

struct PackedFormatConfig {
  PackedFormat format = PackedFormat::kGptq;
  // The default scheme (GPTQ's top level, compressed-tensors' group that
  // targets "Linear").
  bool has_default = true;  // false: unmatched layers stay unquantized.
  int bits = 4;
  int64_t group_size = 0;  // 0: one group per output row.
  bool symmetric = true;
  // GPTQ: desc_act (g_idx may group columns in any order; without it g_idx
  // must be k / group_size). compressed-tensors: actorder "group"
  // (weight_g_idx stored for every packed layer).
  bool act_order = false;
  std::vector<PackedSchemeRule> rules;
  // compressed-tensors: how codes sit in the words (compressed_tensors_format
  // .h). Dense (kBitstream) when "version" is 0.18 or later, the 0.17
  // layout (kWholeCodes) when it is older or absent; the same words for 2,
  // 4 and 8 bits.
  PackLayout compressed_tensors_layout = PackLayout::kBitstream;

  PackedScheme DefaultScheme() const {
    return {bits, group_size, symmetric, act_order};
  }
};

// The scheme `layer` is packed with, or nullopt when the config leaves it
// unquantized. InvalidArgument names the rules when several disagree.
absl::StatusOr<std::optional<PackedScheme>> SchemeForLayer(
    const PackedFormatConfig& config, absl::string_view layer);

// Parses the block. InvalidArgument names the bad field; Unimplemented for
// a well-formed configuration this reader does not support (another
// quant_method, GPTQ v2, another compressed-tensors format, activation
// quantization, regular-expression module rules, a quantized lm_head).
absl::StatusOr<PackedFormatConfig> ParsePackedFormatConfig(
    const nlohmann::json& quantization_config);

}  // namespace quant

#endif  // QUANT_CORE_PACK_PACKED_FORMAT_CONFIG_H_

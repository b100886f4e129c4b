// Puts a format's `quantization_config` block into a model's config.json.
#ifndef QUANT_CORE_PACK_CHECKPOINT_CONFIG_H_
#define QUANT_CORE_PACK_CHECKPOINT_CONFIG_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace quant {

// config.json text with "quantization_config" set to `block` (replacing any
// earlier one), pretty-printed with 2-space indents. InvalidArgument when
// the text is not a JSON object or `block` is not an object.
absl::StatusOr<std::string> WithQuantizationConfig(
    absl::string_view config_json, const nlohmann::json& block);

}  // namespace quant

#endif  // QUANT_CORE_PACK_CHECKPOINT_CONFIG_H_

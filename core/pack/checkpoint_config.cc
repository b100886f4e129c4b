// config.json editing for packed checkpoints.
#include "core/pack/checkpoint_config.h"

#include "absl/status/status.h"
#include "core/base/strict_json.h"

namespace quant {

absl::StatusOr<std::string> WithQuantizationConfig(
    absl::string_view config_json, const nlohmann::json& block) {
  if (!block.is_object()) {
    return absl::InvalidArgumentError(
        "quantization_config block is not a JSON object");
  }
  nlohmann::json config = ParseJsonOrDiscarded(config_json);
  if (config.is_discarded() || !config.is_object()) {
    return absl::InvalidArgumentError(
        "config.json is not a JSON object; cannot add quantization_config");
  }
  config["quantization_config"] = block;
  return config.dump(2) + "\n";
}

}  // namespace quant

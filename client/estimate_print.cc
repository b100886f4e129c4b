// PrintPlanEstimate, PlanEstimateToJson.
#include "client/estimate_print.h"

#include "absl/strings/str_format.h"

namespace quant {

void PrintPlanEstimate(const PlanEstimate& e, const std::string& where,
                       std::ostream& out) {
  out << absl::StrFormat("plan: %d blocks + finalize = %d tasks\n", e.blocks,
                         e.tasks);
  out << absl::StrFormat(
      "tokens: at most %d calibration and %d held-out per block\n",
      e.calibration_tokens, e.heldout_tokens);
  const double ratio =
      e.output.source_tensor_bytes > 0
          ? static_cast<double>(e.output.tensor_bytes) /
                static_cast<double>(e.output.source_tensor_bytes)
          : 0.0;
  out << absl::StrFormat(
      "output: %s of tensors (%.2fx the source's %s), %d layers packed, %d "
      "kept unquantized\n",
      HumanBytes(e.output.tensor_bytes), ratio,
      HumanBytes(e.output.source_tensor_bytes), e.output.packed_layers,
      e.output.kept_layers);
  if (e.seconds.has_value()) {
    out << "time: about " << HumanSeconds(*e.seconds) << " on " << where
        << "\n";
  } else {
    out << "time: unknown (no rates measured on " << where << ")\n";
  }
}

nlohmann::ordered_json PlanEstimateToJson(const PlanEstimate& e) {
  nlohmann::ordered_json json = nlohmann::ordered_json::object();
  json["blocks"] = e.blocks;
  json["tasks"] = e.tasks;
  json["calibration_tokens"] = e.calibration_tokens;
  json["heldout_tokens"] = e.heldout_tokens;
  json["output_bytes"] = e.output.tensor_bytes;
  json["source_bytes"] = e.output.source_tensor_bytes;
  json["packed_layers"] = e.output.packed_layers;
  json["kept_layers"] = e.output.kept_layers;
  json["workers"] = e.workers;
  json["expected_seconds"] = e.seconds.has_value()
                                 ? nlohmann::ordered_json(*e.seconds)
                                 : nlohmann::ordered_json(nullptr);
  return json;
}

}  // namespace quant

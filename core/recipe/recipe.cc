// Recipe value names, equality and the canonical JSON form.
#include "core/recipe/recipe.h"

#include "absl/strings/str_cat.h"
#include "core/base/sha256.h"
#include "nlohmann/json.hpp"

namespace quant {
namespace {

// JSON text as YAML also reads it: code points that JSON leaves raw but YAML
// forbids (DEL, C1 controls, U+FFFE/U+FFFF) or reads as line breaks (NEL,
// U+2028, U+2029) are written as \u escapes. They can only occur inside
// strings, where the escape means the same character.
std::string EscapeForYaml(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const auto byte = static_cast<unsigned char>(text[i]);
    size_t length = 1;
    uint32_t cp = byte;
    if (byte >= 0xF0) {
      length = 4;
    } else if (byte >= 0xE0) {
      length = 3;
      cp = byte & 0x0F;
    } else if (byte >= 0xC0) {
      length = 2;
      cp = byte & 0x1F;
    }
    if (length > 1 && length <= 3 && i + length <= text.size()) {
      for (size_t k = 1; k < length; ++k) {
        cp = (cp << 6) | (static_cast<unsigned char>(text[i + k]) & 0x3F);
      }
    }
    const bool escape = (length == 1 && cp == 0x7F) ||
                        (length == 2 && cp >= 0x80 && cp <= 0x9F) ||
                        (length == 3 && (cp == 0x2028 || cp == 0x2029 ||
                                         cp == 0xFFFE || cp == 0xFFFF));
    if (escape) {
      absl::StrAppend(&out, "\\u", absl::Hex(cp, absl::kZeroPad4));
    } else {
      out.append(text, i, length);
    }
    i += length;
  }
  return out;
}

using OrderedJson = nlohmann::ordered_json;

// -0.0 and 0.0 compare equal, so they must print alike.
double Canonical(double value) { return value == 0.0 ? 0.0 : value; }

OrderedJson NumbersToJson(const std::vector<double>& values) {
  OrderedJson json = OrderedJson::array();
  for (double value : values) json.push_back(Canonical(value));
  return json;
}

OrderedJson OptionalToJson(const std::optional<double>& value) {
  if (!value.has_value()) return nullptr;
  return Canonical(*value);
}

OrderedJson OptionalToJson(const std::optional<int>& value) {
  if (!value.has_value()) return nullptr;
  return *value;
}

// A damping value as the recipe spells it: a number, or "auto".
OrderedJson DampToJson(bool automatic, double fraction) {
  if (automatic) return "auto";
  return Canonical(fraction);
}

OrderedJson DampToJson(const Damping& damp) {
  return DampToJson(damp.automatic, damp.fraction);
}

OrderedJson OverrideToJson(const LayerOverride& entry) {
  OrderedJson json = OrderedJson::object();
  json["match"] = entry.match;
  json["bits"] = OptionalToJson(entry.bits);
  json["group_size"] = OptionalToJson(entry.group_size);
  json["method"] = entry.method.has_value()
                       ? OrderedJson(QuantMethodName(*entry.method))
                       : OrderedJson(nullptr);
  json["grid"] = entry.grid.has_value()
                     ? OrderedJson(QuantGridName(*entry.grid))
                     : OrderedJson(nullptr);
  json["damp"] = entry.damp.has_value()
                     ? DampToJson(entry.damp->automatic, entry.damp->fraction)
                     : OrderedJson(nullptr);
  json["keep_unquantized"] = entry.keep_unquantized;
  return json;
}

}  // namespace

const char* QuantMethodName(QuantMethod method) {
  switch (method) {
    case QuantMethod::kRtn:
      return "rtn";
    case QuantMethod::kGptq:
      return "gptq";
    case QuantMethod::kAwq:
      return "awq";
  }
  return "?";
}

const char* QuantGridName(QuantGrid grid) {
  switch (grid) {
    case QuantGrid::kSym:
      return "sym";
    case QuantGrid::kSymRestricted:
      return "sym-restricted";
    case QuantGrid::kAsym:
      return "asym";
  }
  return "?";
}

const char* PropagationName(Propagation propagation) {
  switch (propagation) {
    case Propagation::kSequential:
      return "sequential";
    case Propagation::kIndependent:
      return "independent";
  }
  return "?";
}

const char* OutputFormatName(OutputFormat format) {
  switch (format) {
    case OutputFormat::kGptq:
      return "gptq";
    case OutputFormat::kCompressedTensors:
      return "compressed-tensors";
  }
  return "?";
}

const char* ExpertRoutingName(ExpertRouting routing) {
  return routing == ExpertRouting::kNatural ? "natural" : "all_experts";
}

const char* StarvedExpertActionName(StarvedExpertAction action) {
  switch (action) {
    case StarvedExpertAction::kRtn:
      return "rtn";
    case StarvedExpertAction::kDamp:
      return "damp";
    case StarvedExpertAction::kFail:
      return "fail";
  }
  return "?";
}

const char* CalibrationPackingName(CalibrationPacking packing) {
  switch (packing) {
    case CalibrationPacking::kConcatenate:
      return "concatenate";
    case CalibrationPacking::kPerDocument:
      return "per-document";
  }
  return "?";
}

// The fraction of an automatic damping is unused (a oneof in the API), so
// it does not take part in equality.
bool operator==(const DampValue& a, const DampValue& b) {
  return a.automatic == b.automatic &&
         (a.automatic || a.fraction == b.fraction);
}

bool operator==(const Damping& a, const Damping& b) {
  return a.automatic == b.automatic &&
         (a.automatic || a.fraction == b.fraction) &&
         a.auto_grid == b.auto_grid;
}

bool operator==(const CalibrationSource& a, const CalibrationSource& b) {
  return a.file == b.file && a.sha256 == b.sha256 && a.weight == b.weight;
}

bool operator==(const CalibrationSettings& a, const CalibrationSettings& b) {
  return a.samples == b.samples && a.seq_len == b.seq_len &&
         a.heldout_fraction == b.heldout_fraction &&
         a.heldout_count == b.heldout_count &&
         a.heldout_samples == b.heldout_samples && a.seed == b.seed &&
         a.packing == b.packing && a.chat_template == b.chat_template &&
         a.system_prompt == b.system_prompt &&
         a.add_generation_prompt == b.add_generation_prompt &&
         a.sources == b.sources;
}

bool operator==(const LayerOverride& a, const LayerOverride& b) {
  return a.match == b.match && a.bits == b.bits &&
         a.group_size == b.group_size && a.method == b.method &&
         a.grid == b.grid && a.damp == b.damp &&
         a.keep_unquantized == b.keep_unquantized;
}

bool operator==(const Gates& a, const Gates& b) {
  return a.max_ppl_ratio == b.max_ppl_ratio && a.max_mean_kl == b.max_mean_kl &&
         a.min_top1_agreement == b.min_top1_agreement &&
         a.compare_to == b.compare_to &&
         a.max_ppl_ratio_vs_previous == b.max_ppl_ratio_vs_previous &&
         a.tasks == b.tasks &&
         a.min_task_accuracy_ratio == b.min_task_accuracy_ratio &&
         a.max_starved_experts == b.max_starved_experts &&
         a.runtime == b.runtime;
}

bool operator==(const Recipe& a, const Recipe& b) {
  return a.method == b.method && a.bits == b.bits &&
         a.group_size == b.group_size && a.grid == b.grid && a.damp == b.damp &&
         a.act_order == b.act_order && a.static_groups == b.static_groups &&
         a.propagation == b.propagation && a.calibration == b.calibration &&
         a.ignore == b.ignore && a.overrides == b.overrides &&
         a.gates == b.gates && a.format == b.format &&
         a.awq_alpha_grid == b.awq_alpha_grid &&
         a.awq_clip_search == b.awq_clip_search &&
         a.mixed_precision == b.mixed_precision && a.moe == b.moe;
}

bool operator==(const MoeCalibration& a, const MoeCalibration& b) {
  return a.routing == b.routing &&
         a.min_tokens_per_expert == b.min_tokens_per_expert &&
         a.on_starved_expert == b.on_starved_expert;
}

bool operator==(const MixedPrecision& a, const MixedPrecision& b) {
  return a.average_bits == b.average_bits && a.bits == b.bits &&
         a.group_sizes == b.group_sizes && a.keep_float == b.keep_float;
}

std::string RecipeToJson(const Recipe& recipe) {
  OrderedJson json = OrderedJson::object();
  json["method"] = QuantMethodName(recipe.method);
  json["bits"] = recipe.bits;
  json["group_size"] = recipe.group_size;
  json["grid"] = QuantGridName(recipe.grid);
  json["damp"] = DampToJson(recipe.damp);
  json["damp_grid"] = NumbersToJson(recipe.damp.auto_grid);
  json["act_order"] = recipe.act_order;
  json["static_groups"] = recipe.static_groups;
  json["propagation"] = PropagationName(recipe.propagation);

  const CalibrationSettings& calibration = recipe.calibration;
  OrderedJson& calibration_json = json["calibration"];
  calibration_json = OrderedJson::object();
  calibration_json["samples"] = calibration.samples;
  calibration_json["seq_len"] = calibration.seq_len;
  calibration_json["heldout_fraction"] =
      Canonical(calibration.heldout_fraction);
  calibration_json["heldout_count"] = calibration.heldout_count;
  calibration_json["heldout_samples"] = calibration.heldout_samples;
  calibration_json["seed"] = calibration.seed;
  calibration_json["packing"] = CalibrationPackingName(calibration.packing);
  // Written only when they differ from the defaults, so that the hashes of
  // recipes that never name them stay what they were.
  if (calibration.chat_template != "auto") {
    calibration_json["chat_template"] = calibration.chat_template;
  }
  if (calibration.system_prompt.has_value()) {
    calibration_json["system_prompt"] = *calibration.system_prompt;
  }
  if (calibration.add_generation_prompt) {
    calibration_json["add_generation_prompt"] = true;
  }
  if (!calibration.sources.empty()) {
    OrderedJson& sources = calibration_json["sources"];
    sources = OrderedJson::array();
    for (const CalibrationSource& source : calibration.sources) {
      OrderedJson entry = OrderedJson::object();
      if (!source.file.empty()) entry["file"] = source.file;
      if (!source.sha256.empty()) entry["sha256"] = source.sha256;
      entry["weight"] = source.weight;
      sources.push_back(std::move(entry));
    }
  }

  json["ignore"] = recipe.ignore;
  OrderedJson& overrides_json = json["overrides"];
  overrides_json = OrderedJson::array();
  for (const LayerOverride& entry : recipe.overrides) {
    overrides_json.push_back(OverrideToJson(entry));
  }

  OrderedJson& gates_json = json["gates"];
  gates_json = OrderedJson::object();
  gates_json["max_ppl_ratio"] = OptionalToJson(recipe.gates.max_ppl_ratio);
  gates_json["max_mean_kl"] = OptionalToJson(recipe.gates.max_mean_kl);
  gates_json["min_top1_agreement"] =
      OptionalToJson(recipe.gates.min_top1_agreement);
  // Written only when set, so that recipes from before they existed keep
  // their canonical form and hash.
  if (!recipe.gates.compare_to.empty()) {
    gates_json["compare_to"] = recipe.gates.compare_to;
  }
  if (recipe.gates.max_ppl_ratio_vs_previous.has_value()) {
    gates_json["max_ppl_ratio_vs_previous"] =
        OptionalToJson(recipe.gates.max_ppl_ratio_vs_previous);
  }
  if (!recipe.gates.tasks.empty()) gates_json["tasks"] = recipe.gates.tasks;
  if (recipe.gates.min_task_accuracy_ratio.has_value()) {
    gates_json["min_task_accuracy_ratio"] =
        OptionalToJson(recipe.gates.min_task_accuracy_ratio);
  }
  if (recipe.gates.max_starved_experts.has_value()) {
    gates_json["max_starved_experts"] =
        OptionalToJson(recipe.gates.max_starved_experts);
  }
  if (!recipe.gates.runtime.empty()) {
    gates_json["runtime"] = recipe.gates.runtime;
  }

  json["format"] = OutputFormatName(recipe.format);
  json["awq_alpha_grid"] = NumbersToJson(recipe.awq_alpha_grid);
  json["awq_clip_search"] = recipe.awq_clip_search;
  // Written only when set, so that older recipes keep their hash.
  if (recipe.mixed_precision.has_value()) {
    const MixedPrecision& m = *recipe.mixed_precision;
    OrderedJson& mixed = json["mixed_precision"];
    mixed["average_bits"] = m.average_bits;
    mixed["bits"] = m.bits;
    mixed["group_sizes"] = m.group_sizes;
    mixed["keep_float"] = m.keep_float;
  }
  if (recipe.moe.has_value()) {  // Likewise.
    OrderedJson& moe = json["moe"];
    moe["routing"] = ExpertRoutingName(recipe.moe->routing);
    moe["min_tokens_per_expert"] = recipe.moe->min_tokens_per_expert;
    moe["on_starved_expert"] =
        StarvedExpertActionName(recipe.moe->on_starved_expert);
  }
  // Invalid UTF-8 (possible only in a recipe built in code) becomes U+FFFD
  // instead of an exception.
  return EscapeForYaml(json.dump(2, ' ', /*ensure_ascii=*/false,
                                 OrderedJson::error_handler_t::replace));
}

std::string RecipeSha256(const Recipe& recipe) {
  return Sha256Hex(RecipeToJson(recipe));
}

}  // namespace quant

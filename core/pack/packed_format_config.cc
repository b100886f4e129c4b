// Parsing a packed checkpoint's quantization_config block.
#include "core/pack/packed_format_config.h"

#include <cctype>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "core/base/status_macros.h"
#include "core/pack/bit_packing.h"

namespace quant {
namespace {

using nlohmann::json;

absl::Status BadField(absl::string_view field, absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("quantization_config: \"", field, "\" ", why));
}

absl::Status Unsupported(absl::string_view what) {
  return absl::UnimplementedError(
      absl::StrCat("quantization_config: ", what, " is not supported"));
}

// `object`[key] when present and not null; nullptr otherwise.
const json* Member(const json& object, const char* key) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return nullptr;
  return &*it;
}

absl::StatusOr<int> Bits(const json& object, const char* key,
                         absl::string_view field) {
  const json* value = Member(object, key);
  if (value == nullptr) return BadField(field, "is missing");
  if (!value->is_number_integer() || !IsPackableBits(value->get<int>())) {
    return BadField(
        field, absl::StrCat("is ", value->dump(), ", expected 2, 3, 4 or 8"));
  }
  return value->get<int>();
}

absl::StatusOr<bool> OptionalBool(const json& object, const char* key,
                                  absl::string_view field, bool fallback) {
  const json* value = Member(object, key);
  if (value == nullptr) return fallback;
  if (!value->is_boolean()) {
    return BadField(
        field, absl::StrCat("is ", value->dump(), ", expected true or false"));
  }
  return value->get<bool>();
}

// A format name that must be absent or equal to `wanted`.
absl::Status RequireName(const json& object, const char* key,
                         absl::string_view wanted, bool required) {
  const json* value = Member(object, key);
  if (value == nullptr) {
    if (!required) return absl::OkStatus();
    return BadField(key,
                    absl::StrCat("is missing (expected \"", wanted, "\")"));
  }
  if (!value->is_string()) {
    return BadField(key,
                    absl::StrCat("is ", value->dump(), ", expected a string"));
  }
  if (value->get<std::string>() != wanted) {
    return Unsupported(absl::StrCat("\"", key, "\": \"",
                                    value->get<std::string>(), "\" (only \"",
                                    wanted, "\" is read)"));
  }
  return absl::OkStatus();
}

// GPTQ's group_size: -1 (per row, returned as 0) or positive.
absl::StatusOr<int64_t> GptqGroupSize(const json& object,
                                      absl::string_view field) {
  const json* group = Member(object, "group_size");
  if (group == nullptr) return BadField(field, "is missing");
  if (!group->is_number_integer() ||
      (group->get<int64_t>() != -1 && group->get<int64_t>() <= 0)) {
    return BadField(field, absl::StrCat("is ", group->dump(),
                                        ", expected -1 (per row) or a "
                                        "positive integer"));
  }
  return group->get<int64_t>() > 0 ? group->get<int64_t>() : 0;
}

// A module rule written as a Python regular expression that is a literal
// name: optional "^", metacharacters escaped, optional final "$" (exact
// match; without it re.match matches every name starting with it).
std::optional<PackedSchemeRule> LiteralRule(absl::string_view pattern) {
  PackedSchemeRule rule;
  rule.source = std::string(pattern);
  if (absl::StartsWith(pattern, "^")) pattern.remove_prefix(1);
  bool exact = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\') {
      if (i + 1 >= pattern.size()) return std::nullopt;
      const char escaped = pattern[++i];
      // \d, \w, \1 ... are classes or references, not literals.
      if (std::isalnum(static_cast<unsigned char>(escaped))) {
        return std::nullopt;
      }
      rule.name += escaped;
    } else if (c == '$' && i + 1 == pattern.size()) {
      exact = true;
    } else if (std::strchr(".^$*+?()[]{}|", c) != nullptr) {
      return std::nullopt;
    } else {
      rule.name += c;
    }
  }
  if (rule.name.empty()) return std::nullopt;
  rule.prefix = !exact;
  return rule;
}

// A GPTQModel/vLLM "dynamic" rule: "-:pattern" leaves matching modules
// unquantized; "+:pattern" (or a bare pattern) overrides the defaults.
absl::StatusOr<PackedSchemeRule> GptqDynamicRule(const std::string& key,
                                                 const json& value,
                                                 const PackedScheme& defaults) {
  const std::string field = absl::StrCat("dynamic.", key);
  const bool negative = absl::StartsWith(key, "-:");
  absl::string_view pattern = key;
  if (negative || absl::StartsWith(key, "+:")) pattern.remove_prefix(2);
  std::optional<PackedSchemeRule> rule = LiteralRule(pattern);
  if (!rule.has_value()) {
    return Unsupported(absl::StrCat("the \"dynamic\" rule \"", key,
                                    "\" (only literal module names are read)"));
  }
  rule->source = key;
  rule->unquantized = negative;
  rule->scheme = defaults;
  if (!value.is_object()) return BadField(field, "must be an object");
  if (negative) return *rule;
  for (auto it = value.begin(); it != value.end(); ++it) {
    const std::string& name = it.key();
    if (name != "bits" && name != "group_size" && name != "sym" &&
        name != "desc_act") {
      return Unsupported(
          absl::StrCat("the override \"", name, "\" in \"", field, "\""));
    }
  }
  if (Member(value, "bits") != nullptr) {
    QUANT_ASSIGN_OR_RETURN(rule->scheme.bits,
                           Bits(value, "bits", field + ".bits"));
  }
  if (Member(value, "group_size") != nullptr) {
    QUANT_ASSIGN_OR_RETURN(rule->scheme.group_size,
                           GptqGroupSize(value, field + ".group_size"));
  }
  QUANT_ASSIGN_OR_RETURN(
      rule->scheme.symmetric,
      OptionalBool(value, "sym", field + ".sym", defaults.symmetric));
  QUANT_ASSIGN_OR_RETURN(
      rule->scheme.act_order,
      OptionalBool(value, "desc_act", field + ".desc_act", defaults.act_order));
  return *rule;
}

absl::StatusOr<PackedFormatConfig> ParseGptq(const json& block) {
  PackedFormatConfig config;
  config.format = PackedFormat::kGptq;
  // v2 stores zeros without v1's -1 offset: reading it as v1 would shift
  // every weight by one step.
  QUANT_RETURN_IF_ERROR(RequireName(block, "checkpoint_format", "gptq",
                                    /*required=*/false));
  QUANT_RETURN_IF_ERROR(RequireName(block, "format", "gptq",
                                    /*required=*/false));
  QUANT_ASSIGN_OR_RETURN(config.bits, Bits(block, "bits", "bits"));
  QUANT_ASSIGN_OR_RETURN(config.group_size, GptqGroupSize(block, "group_size"));
  QUANT_ASSIGN_OR_RETURN(config.symmetric,
                         OptionalBool(block, "sym", "sym", true));
  QUANT_ASSIGN_OR_RETURN(config.act_order,
                         OptionalBool(block, "desc_act", "desc_act", false));
  QUANT_ASSIGN_OR_RETURN(const bool lm_head,
                         OptionalBool(block, "lm_head", "lm_head", false));
  if (lm_head) return Unsupported("a quantized lm_head (\"lm_head\": true)");
  if (const json* dynamic = Member(block, "dynamic")) {
    if (!dynamic->is_object()) {
      return BadField("dynamic", "must be an object of module rules");
    }
    for (auto it = dynamic->begin(); it != dynamic->end(); ++it) {
      QUANT_ASSIGN_OR_RETURN(
          PackedSchemeRule rule,
          GptqDynamicRule(it.key(), it.value(), config.DefaultScheme()));
      config.rules.push_back(std::move(rule));
    }
  }
  return config;
}

// One compressed-tensors config group's "weights" scheme.
absl::StatusOr<PackedScheme> ParseWeightsScheme(const json& weights,
                                                const std::string& wfield) {
  PackedScheme scheme;
  if (!weights.is_object()) return BadField(wfield, "must be an object");
  QUANT_ASSIGN_OR_RETURN(scheme.bits,
                         Bits(weights, "num_bits", wfield + ".num_bits"));
  const json* type = Member(weights, "type");
  if (type == nullptr || *type != "int") {
    return Unsupported(absl::StrCat(
        "\"", wfield,
        ".type\": ", type == nullptr ? std::string("null") : type->dump(),
        " (only \"int\" is read)"));
  }
  const json* symmetric = Member(weights, "symmetric");
  if (symmetric == nullptr || !symmetric->is_boolean()) {
    return BadField(wfield + ".symmetric", "must be true or false");
  }
  scheme.symmetric = symmetric->get<bool>();
  QUANT_ASSIGN_OR_RETURN(
      const bool dynamic,
      OptionalBool(weights, "dynamic", wfield + ".dynamic", false));
  if (dynamic) return Unsupported(absl::StrCat("\"", wfield, ".dynamic\""));
  const json* strategy = Member(weights, "strategy");
  const std::string strategy_name = strategy != nullptr && strategy->is_string()
                                        ? strategy->get<std::string>()
                                        : "";
  const json* group_size = Member(weights, "group_size");
  if (strategy_name == "channel") {
    scheme.group_size = 0;
  } else if (strategy_name == "group") {
    if (group_size == nullptr || !group_size->is_number_integer() ||
        group_size->get<int64_t>() <= 0) {
      return BadField(wfield + ".group_size",
                      absl::StrCat("is ",
                                   group_size == nullptr ? std::string("null")
                                                         : group_size->dump(),
                                   ", expected a positive integer for the "
                                   "group strategy"));
    }
    scheme.group_size = group_size->get<int64_t>();
  } else {
    return Unsupported(absl::StrCat(
        "\"", wfield, ".strategy\": ",
        strategy == nullptr ? std::string("null") : strategy->dump(),
        " (\"channel\" and \"group\" are read)"));
  }
  if (const json* actorder = Member(weights, "actorder")) {
    // The library reads true as "group" and false as no ordering.
    if (actorder->is_boolean()) {
      scheme.act_order = actorder->get<bool>();
    } else if (*actorder == "group") {
      scheme.act_order = true;
    } else if (*actorder != "weight") {
      return BadField(wfield + ".actorder",
                      absl::StrCat("is ", actorder->dump(),
                                   ", expected null, \"weight\" or \"group\""));
    }
  }
  if (scheme.act_order && scheme.group_size == 0) {
    return BadField(wfield + ".actorder", "\"group\" needs the group strategy");
  }
  return scheme;
}

// An exact module name from a target or ignore list.
absl::StatusOr<PackedSchemeRule> ModuleRule(const json& entry,
                                            const std::string& field) {
  if (!entry.is_string()) {
    return BadField(
        field, absl::StrCat("holds ", entry.dump(), ", expected module names"));
  }
  const std::string name = entry.get<std::string>();
  if (absl::StartsWith(name, "re:")) {
    return Unsupported(absl::StrCat("the pattern \"", name, "\" in \"", field,
                                    "\" (only exact module names are read)"));
  }
  PackedSchemeRule rule;
  rule.name = name;
  rule.source = absl::StrCat(field, " \"", name, "\"");
  return rule;
}

// The library version that wrote the file decides the packing: 0.18.0
// introduced the dense layout (compressed_tensors_format.h). Files without
// a version are older (and this project's own before it wrote one).
absl::StatusOr<PackLayout> CompressedTensorsLayout(const json& block) {
  const json* version = Member(block, "version");
  if (version == nullptr) return PackLayout::kWholeCodes;
  if (!version->is_string()) {
    return BadField("version", absl::StrCat("is ", version->dump(),
                                            ", expected a version string"));
  }
  // "0.18.0", "0.18.1.dev4+g1234": the leading major.minor decide.
  const std::string text = version->get<std::string>();
  const std::vector<absl::string_view> parts = absl::StrSplit(text, '.');
  int major = 0;
  int minor = 0;
  if (parts.size() < 2 || !absl::SimpleAtoi(parts[0], &major) ||
      !absl::SimpleAtoi(parts[1], &minor)) {
    return BadField("version",
                    absl::StrCat("is \"", text.substr(0, 64),
                                 "\", expected MAJOR.MINOR[.PATCH...]"));
  }
  return std::make_pair(major, minor) >= std::make_pair(0, 18)
             ? PackLayout::kBitstream
             : PackLayout::kWholeCodes;
}

absl::StatusOr<PackedFormatConfig> ParseCompressedTensors(const json& block) {
  PackedFormatConfig config;
  config.format = PackedFormat::kCompressedTensors;
  config.has_default = false;
  QUANT_RETURN_IF_ERROR(
      RequireName(block, "format", "pack-quantized", /*required=*/true));
  // "frozen" or "calibration" checkpoints hold unpacked weights.
  QUANT_RETURN_IF_ERROR(RequireName(block, "quantization_status", "compressed",
                                    /*required=*/false));
  QUANT_ASSIGN_OR_RETURN(config.compressed_tensors_layout,
                         CompressedTensorsLayout(block));
  const json* groups = Member(block, "config_groups");
  if (groups == nullptr || !groups->is_object() || groups->empty()) {
    return BadField("config_groups", "must be a non-empty object");
  }
  for (auto it = groups->begin(); it != groups->end(); ++it) {
    const std::string field = absl::StrCat("config_groups.", it.key());
    const json& group = it.value();
    if (!group.is_object()) return BadField(field, "must be an object");
    for (const char* activations :
         {"input_activations", "output_activations"}) {
      if (Member(group, activations) != nullptr) {
        return Unsupported(absl::StrCat("activation quantization (\"", field,
                                        ".", activations, "\")"));
      }
    }
    const json* weights = Member(group, "weights");
    if (weights == nullptr) return BadField(field + ".weights", "is missing");
    QUANT_ASSIGN_OR_RETURN(const PackedScheme scheme,
                           ParseWeightsScheme(*weights, field + ".weights"));
    const json* targets = Member(group, "targets");
    if (targets == nullptr || !targets->is_array() || targets->empty()) {
      return BadField(field + ".targets", "must be a non-empty list");
    }
    if (*targets == json::array({"Linear"})) {
      if (config.has_default) {
        return Unsupported("two config groups targeting \"Linear\"");
      }
      config.has_default = true;
      config.bits = scheme.bits;
      config.group_size = scheme.group_size;
      config.symmetric = scheme.symmetric;
      config.act_order = scheme.act_order;
      continue;
    }
    for (const json& target : *targets) {
      if (target == "Linear") {
        return Unsupported(absl::StrCat("\"", field,
                                        ".targets\" mixing \"Linear\" with "
                                        "module names"));
      }
      QUANT_ASSIGN_OR_RETURN(PackedSchemeRule rule,
                             ModuleRule(target, field + ".targets"));
      rule.scheme = scheme;
      config.rules.push_back(std::move(rule));
    }
  }
  if (const json* ignore = Member(block, "ignore")) {
    if (!ignore->is_array()) return BadField("ignore", "must be a list");
    for (const json& entry : *ignore) {
      QUANT_ASSIGN_OR_RETURN(PackedSchemeRule rule,
                             ModuleRule(entry, "ignore"));
      rule.unquantized = true;
      config.rules.push_back(std::move(rule));
    }
  }
  return config;
}

}  // namespace

const char* PackedFormatName(PackedFormat format) {
  return format == PackedFormat::kGptq ? "gptq" : "compressed-tensors";
}

absl::StatusOr<std::optional<PackedScheme>> SchemeForLayer(
    const PackedFormatConfig& config, absl::string_view layer) {
  const PackedSchemeRule* match = nullptr;
  for (const PackedSchemeRule& rule : config.rules) {
    const bool matches =
        rule.prefix ? absl::StartsWith(layer, rule.name) : layer == rule.name;
    if (!matches) continue;
    if (match != nullptr &&
        (match->unquantized != rule.unquantized ||
         (!rule.unquantized && !(match->scheme == rule.scheme)))) {
      return absl::InvalidArgumentError(
          absl::StrCat("quantization_config: the rules ", match->source,
                       " and ", rule.source, " disagree on layer ", layer));
    }
    match = &rule;
  }
  if (match != nullptr) {
    if (match->unquantized) return std::optional<PackedScheme>();
    return std::optional<PackedScheme>(match->scheme);
  }
  if (!config.has_default) return std::optional<PackedScheme>();
  return std::optional<PackedScheme>(config.DefaultScheme());
}

absl::StatusOr<PackedFormatConfig> ParsePackedFormatConfig(
    const json& quantization_config) {
  if (!quantization_config.is_object()) {
    return absl::InvalidArgumentError(
        "quantization_config: must be a JSON object");
  }
  const json* method = Member(quantization_config, "quant_method");
  if (method == nullptr || !method->is_string()) {
    return BadField("quant_method", "must be a string");
  }
  const std::string name = method->get<std::string>();
  if (name == "gptq") return ParseGptq(quantization_config);
  if (name == "compressed-tensors") {
    return ParseCompressedTensors(quantization_config);
  }
  return Unsupported(
      absl::StrCat("\"quant_method\": \"", name,
                   "\" (packed checkpoints are read in the \"gptq\" and "
                   "\"compressed-tensors\" pack-quantized formats)"));
}

}  // namespace quant

// ParseRecipe / LoadRecipe: YAML (or JSON) text -> Recipe, strictly typed,
// every error pointing at the field's line and column. The YAML itself is
// read by libyaml (yaml_tree.h).
#include <limits.h>
#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/base/file_util.h"
#include "core/base/status_macros.h"
#include "core/recipe/recipe.h"
#include "core/recipe/recipe_validation.h"
#include "core/recipe/yaml_tree.h"

namespace quant {
namespace {

constexpr size_t kMaxRecipeBytes = 1 << 20;

const std::vector<std::string>& TopLevelKeys() {
  static const auto* keys = new std::vector<std::string>{"method",
                                                         "bits",
                                                         "group_size",
                                                         "grid",
                                                         "damp",
                                                         "damp_grid",
                                                         "act_order",
                                                         "static_groups",
                                                         "propagation",
                                                         "calibration",
                                                         "ignore",
                                                         "overrides",
                                                         "gates",
                                                         "format",
                                                         "awq_alpha_grid",
                                                         "awq_clip_search",
                                                         "mixed_precision",
                                                         "moe"};
  return *keys;
}

const std::vector<std::string>& CalibrationKeys() {
  static const auto* keys =
      new std::vector<std::string>{"samples",          "seq_len",
                                   "heldout_fraction", "heldout_count",
                                   "heldout_samples",  "seed",
                                   "packing",          "chat_template",
                                   "system_prompt",    "add_generation_prompt",
                                   "sources"};
  return *keys;
}

const std::vector<std::string>& MixedPrecisionKeys() {
  static const auto* keys = new std::vector<std::string>{
      "average_bits", "bits", "group_sizes", "keep_float"};
  return *keys;
}

const std::vector<std::string>& MoeKeys() {
  static const auto* keys = new std::vector<std::string>{
      "routing", "min_tokens_per_expert", "on_starved_expert"};
  return *keys;
}

const std::vector<std::string>& SourceKeys() {
  static const auto* keys =
      new std::vector<std::string>{"file", "sha256", "weight"};
  return *keys;
}

const std::vector<std::string>& OverrideKeys() {
  static const auto* keys =
      new std::vector<std::string>{"match", "bits", "group_size",      "method",
                                   "grid",  "damp", "keep_unquantized"};
  return *keys;
}

const std::vector<std::string>& GateKeys() {
  static const auto* keys =
      new std::vector<std::string>{"max_ppl_ratio",
                                   "max_mean_kl",
                                   "min_top1_agreement",
                                   "compare_to",
                                   "max_ppl_ratio_vs_previous",
                                   "tasks",
                                   "min_task_accuracy_ratio",
                                   "max_starved_experts",
                                   "runtime"};
  return *keys;
}

template <typename Enum>
struct EnumName {
  const char* name;
  Enum value;
};

constexpr EnumName<QuantMethod> kMethods[] = {{"rtn", QuantMethod::kRtn},
                                              {"gptq", QuantMethod::kGptq},
                                              {"awq", QuantMethod::kAwq}};
constexpr EnumName<QuantGrid> kGrids[] = {
    {"sym", QuantGrid::kSym},
    {"sym-restricted", QuantGrid::kSymRestricted},
    {"asym", QuantGrid::kAsym}};
constexpr EnumName<Propagation> kPropagations[] = {
    {"sequential", Propagation::kSequential},
    {"independent", Propagation::kIndependent}};
constexpr EnumName<OutputFormat> kFormats[] = {
    {"gptq", OutputFormat::kGptq},
    {"compressed-tensors", OutputFormat::kCompressedTensors}};
constexpr EnumName<CalibrationPacking> kPackings[] = {
    {"concatenate", CalibrationPacking::kConcatenate},
    {"per-document", CalibrationPacking::kPerDocument}};
constexpr EnumName<ExpertRouting> kRoutings[] = {
    {"natural", ExpertRouting::kNatural},
    {"all_experts", ExpertRouting::kAllExperts}};
constexpr EnumName<StarvedExpertAction> kStarvedActions[] = {
    {"rtn", StarvedExpertAction::kRtn},
    {"damp", StarvedExpertAction::kDamp},
    {"fail", StarvedExpertAction::kFail}};

// A YAML node's kind in words, for "expected X, got Y" messages.
std::string Describe(const YamlNode& node) {
  switch (node.kind) {
    case YamlNode::Kind::kNull:
      return "null";
    case YamlNode::Kind::kSequence:
      return "a list";
    case YamlNode::Kind::kMapping:
      return "a mapping";
    case YamlNode::Kind::kScalar:
      if (node.quoted) return absl::StrCat("string \"", node.scalar, "\"");
      return absl::StrCat("\"", node.scalar, "\"");
  }
  return "nothing";
}

// Converts one document to a Recipe. Member functions return InvalidArgument
// naming the source, line, column and field path.
class RecipeReader {
 public:
  // `base_dir`: the recipe file's directory (absolute), against which a
  // relative gates.tasks is resolved; empty for a text without a file.
  RecipeReader(absl::string_view source_name, std::string base_dir)
      : source_name_(source_name), base_dir_(std::move(base_dir)) {}

  absl::StatusOr<Recipe> Read(const YamlNode& root) {
    if (root.IsNull()) {
      return absl::InvalidArgumentError(
          absl::StrCat(source_name_, ": empty recipe"));
    }
    Recipe recipe;
    QUANT_ASSIGN_OR_RETURN(const Entries entries,
                           MapEntries(root, "", TopLevelKeys()));
    for (const auto& key_value : entries) {
      const std::string& key = key_value.first;
      const YamlNode& value = key_value.second;
      QUANT_RETURN_IF_ERROR(ReadTopLevel(key, value, recipe));
    }
    if (std::optional<RecipeFieldError> error = FindRecipeError(recipe)) {
      return ErrorAt(MarkOf(error->path), error->path, error->problem);
    }
    return recipe;
  }

 private:
  using Entries = std::vector<std::pair<std::string, YamlNode>>;

  absl::Status ErrorAt(const YamlMark& mark, absl::string_view path,
                       absl::string_view problem) const {
    std::string where(source_name_);
    if (mark.line >= 0) {
      absl::StrAppend(&where, ":", mark.line + 1, ":", mark.column + 1);
    }
    if (path.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": ", problem));
    }
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": ", path, ": ", problem));
  }

  absl::Status Error(const YamlNode& node, absl::string_view path,
                     absl::string_view problem) {
    // A null value has no text of its own; point at its key.
    if (node.IsNull()) return ErrorAt(MarkOf(std::string(path)), path, problem);
    return ErrorAt(node.mark, path, problem);
  }

  // The position of `path` or, failing that, of its closest parent.
  YamlMark MarkOf(std::string path) const {
    while (true) {
      auto it = marks_.find(path);
      if (it != marks_.end()) return it->second;
      const size_t cut = path.find_last_of(".[");
      if (cut == std::string::npos) return YamlMark{};
      path.resize(cut);
    }
  }

  static std::string Child(absl::string_view parent, absl::string_view key) {
    return parent.empty() ? std::string(key) : absl::StrCat(parent, ".", key);
  }

  // The key/value pairs of a mapping, in order; rejects other node types,
  // non-string keys, duplicate keys and keys not in `known`.
  absl::StatusOr<Entries> MapEntries(const YamlNode& node,
                                     absl::string_view path,
                                     const std::vector<std::string>& known) {
    if (!node.IsMap()) {
      return Error(node, path,
                   absl::StrCat("expected a mapping, got ", Describe(node)));
    }
    Entries entries;
    std::set<std::string> seen;
    for (const auto& entry : node.entries) {
      const YamlNode& key = entry.first;
      if (!key.IsScalar()) {
        return Error(key, path,
                     absl::StrCat("keys must be strings, got ", Describe(key)));
      }
      const std::string& name = key.scalar;
      const std::string child = Child(path, name);
      if (std::find(known.begin(), known.end(), name) == known.end()) {
        return Error(key, child,
                     absl::StrCat("unknown field (known: ",
                                  absl::StrJoin(known, ", "), ")"));
      }
      if (!seen.insert(name).second) {
        return Error(key, child, "duplicate key");
      }
      marks_[child] = entry.second.IsNull() ? key.mark : entry.second.mark;
      entries.emplace_back(name, entry.second);
    }
    return entries;
  }

  // A plain (unquoted) scalar, i.e. what may be a number or boolean.
  absl::StatusOr<std::string> PlainScalar(const YamlNode& node,
                                          absl::string_view path,
                                          absl::string_view expected) {
    if (!node.IsScalar() || node.quoted) {
      return Error(
          node, path,
          absl::StrCat("expected ", expected, ", got ", Describe(node)));
    }
    return node.scalar;
  }

  template <typename Int>
  absl::Status ReadInteger(const YamlNode& node, absl::string_view path,
                           Int* value) {
    QUANT_ASSIGN_OR_RETURN(const std::string text,
                           PlainScalar(node, path, "an integer"));
    Int parsed = 0;
    if (!absl::SimpleAtoi(text, &parsed)) {
      double number = 0.0;
      const bool integral = absl::SimpleAtod(text, &number) &&
                            std::isfinite(number) &&
                            number == std::trunc(number);
      if (integral && !std::is_signed<Int>::value && number < 0) {
        return Error(
            node, path,
            absl::StrCat("expected an integer >= 0, got \"", text, "\""));
      }
      if (integral) {
        return Error(node, path,
                     absl::StrCat(text, " is out of range of a ",
                                  sizeof(Int) * 8, "-bit integer"));
      }
      return Error(node, path,
                   absl::StrCat("expected an integer, got \"", text, "\""));
    }
    *value = parsed;
    return absl::OkStatus();
  }

  absl::Status ReadDouble(const YamlNode& node, absl::string_view path,
                          double* value) {
    QUANT_ASSIGN_OR_RETURN(const std::string text,
                           PlainScalar(node, path, "a number"));
    double parsed = 0.0;
    if (!absl::SimpleAtod(text, &parsed) || !std::isfinite(parsed)) {
      return Error(
          node, path,
          absl::StrCat("expected a finite number, got \"", text, "\""));
    }
    *value = parsed;
    return absl::OkStatus();
  }

  // YAML 1.2 core schema booleans only: no yes/no/on/off.
  absl::Status ReadBool(const YamlNode& node, absl::string_view path,
                        bool* value) {
    QUANT_ASSIGN_OR_RETURN(const std::string text,
                           PlainScalar(node, path, "true or false"));
    if (text == "true" || text == "True" || text == "TRUE") {
      *value = true;
    } else if (text == "false" || text == "False" || text == "FALSE") {
      *value = false;
    } else {
      return Error(node, path,
                   absl::StrCat("expected true or false, got \"", text, "\""));
    }
    return absl::OkStatus();
  }

  absl::Status ReadString(const YamlNode& node, absl::string_view path,
                          std::string* value) {
    if (!node.IsScalar()) {
      return Error(node, path,
                   absl::StrCat("expected a string, got ", Describe(node)));
    }
    *value = node.scalar;
    return absl::OkStatus();
  }

  template <typename Enum, size_t N>
  absl::Status ReadEnum(const YamlNode& node, absl::string_view path,
                        const EnumName<Enum> (&names)[N], Enum* value) {
    std::string text;
    QUANT_RETURN_IF_ERROR(ReadString(node, path, &text));
    std::vector<std::string> known;
    for (const EnumName<Enum>& entry : names) {
      if (text == entry.name) {
        *value = entry.value;
        return absl::OkStatus();
      }
      known.emplace_back(entry.name);
    }
    return Error(node, path,
                 absl::StrCat("unknown value \"", text,
                              "\" (known: ", absl::StrJoin(known, ", "), ")"));
  }

  template <typename Damp>  // Damping or DampValue.
  absl::Status ReadDamp(const YamlNode& node, absl::string_view path,
                        Damp* damp) {
    if (node.IsScalar() && node.scalar == "auto") {
      damp->automatic = true;
      return absl::OkStatus();
    }
    if (!node.IsScalar() || node.quoted) {
      return Error(node, path,
                   absl::StrCat("expected a number in [0, 1) or auto, got ",
                                Describe(node)));
    }
    damp->automatic = false;
    return ReadDouble(node, path, &damp->fraction);
  }

  absl::Status ReadDoubleList(const YamlNode& node, absl::string_view path,
                              std::vector<double>* values) {
    if (!node.IsSequence()) {
      return Error(
          node, path,
          absl::StrCat("expected a list of numbers, got ", Describe(node)));
    }
    values->clear();
    for (size_t i = 0; i < node.items.size(); ++i) {
      const std::string item = absl::StrCat(path, "[", i, "]");
      marks_[item] = node.items[i].mark;
      values->push_back(0.0);
      QUANT_RETURN_IF_ERROR(ReadDouble(node.items[i], item, &values->back()));
    }
    return absl::OkStatus();
  }

  absl::Status ReadIntegerList(const YamlNode& node, absl::string_view path,
                               std::vector<int>* values) {
    if (!node.IsSequence()) {
      return Error(
          node, path,
          absl::StrCat("expected a list of integers, got ", Describe(node)));
    }
    values->clear();
    for (size_t i = 0; i < node.items.size(); ++i) {
      const std::string item = absl::StrCat(path, "[", i, "]");
      marks_[item] = node.items[i].mark;
      values->push_back(0);
      QUANT_RETURN_IF_ERROR(ReadInteger(node.items[i], item, &values->back()));
    }
    return absl::OkStatus();
  }

  absl::Status ReadMixedPrecision(const YamlNode& node,
                                  std::optional<MixedPrecision>& out) {
    QUANT_ASSIGN_OR_RETURN(
        const Entries entries,
        MapEntries(node, "mixed_precision", MixedPrecisionKeys()));
    MixedPrecision mixed;
    bool has_average = false;
    for (const auto& key_value : entries) {
      const std::string& key = key_value.first;
      const YamlNode& value = key_value.second;
      const std::string path = Child("mixed_precision", key);
      if (key == "average_bits") {
        has_average = true;
        QUANT_RETURN_IF_ERROR(ReadDouble(value, path, &mixed.average_bits));
      } else if (key == "bits") {
        QUANT_RETURN_IF_ERROR(ReadIntegerList(value, path, &mixed.bits));
      } else if (key == "group_sizes") {
        QUANT_RETURN_IF_ERROR(ReadIntegerList(value, path, &mixed.group_sizes));
      } else {
        QUANT_RETURN_IF_ERROR(ReadBool(value, path, &mixed.keep_float));
      }
    }
    if (!has_average) {
      return Error(node, "mixed_precision", "missing field \"average_bits\"");
    }
    out = std::move(mixed);
    return absl::OkStatus();
  }

  absl::Status ReadMoe(const YamlNode& node,
                       std::optional<MoeCalibration>& out) {
    QUANT_ASSIGN_OR_RETURN(const Entries entries,
                           MapEntries(node, "moe", MoeKeys()));
    MoeCalibration moe;
    for (const auto& [key, value] : entries) {
      const std::string path = Child("moe", key);
      if (key == "routing") {
        QUANT_RETURN_IF_ERROR(ReadEnum(value, path, kRoutings, &moe.routing));
      } else if (key == "min_tokens_per_expert") {
        QUANT_RETURN_IF_ERROR(
            ReadInteger(value, path, &moe.min_tokens_per_expert));
      } else {
        QUANT_RETURN_IF_ERROR(
            ReadEnum(value, path, kStarvedActions, &moe.on_starved_expert));
      }
    }
    out = moe;
    return absl::OkStatus();
  }

  absl::Status ReadStringList(const YamlNode& node, absl::string_view path,
                              std::vector<std::string>* values) {
    if (!node.IsSequence()) {
      return Error(
          node, path,
          absl::StrCat("expected a list of strings, got ", Describe(node)));
    }
    values->clear();
    for (size_t i = 0; i < node.items.size(); ++i) {
      const std::string item = absl::StrCat(path, "[", i, "]");
      marks_[item] = node.items[i].mark;
      values->emplace_back();
      QUANT_RETURN_IF_ERROR(ReadString(node.items[i], item, &values->back()));
    }
    return absl::OkStatus();
  }

  // Reads an optional field: null leaves it unset.
  template <typename T, typename ReadFn>
  absl::Status ReadOptional(const YamlNode& node, std::optional<T>* value,
                            ReadFn read) {
    if (node.IsNull()) {
      value->reset();
      return absl::OkStatus();
    }
    T parsed{};
    QUANT_RETURN_IF_ERROR(read(&parsed));
    *value = parsed;
    return absl::OkStatus();
  }

  absl::Status ReadCalibration(const YamlNode& node,
                               CalibrationSettings& calibration) {
    QUANT_ASSIGN_OR_RETURN(const Entries entries,
                           MapEntries(node, "calibration", CalibrationKeys()));
    for (const auto& key_value : entries) {
      const std::string& key = key_value.first;
      const YamlNode& value = key_value.second;
      const std::string path = Child("calibration", key);
      if (key == "samples") {
        QUANT_RETURN_IF_ERROR(ReadInteger(value, path, &calibration.samples));
      } else if (key == "seq_len") {
        QUANT_RETURN_IF_ERROR(ReadInteger(value, path, &calibration.seq_len));
      } else if (key == "heldout_fraction") {
        QUANT_RETURN_IF_ERROR(
            ReadDouble(value, path, &calibration.heldout_fraction));
      } else if (key == "heldout_count") {
        QUANT_RETURN_IF_ERROR(
            ReadInteger(value, path, &calibration.heldout_count));
      } else if (key == "heldout_samples") {
        QUANT_RETURN_IF_ERROR(
            ReadInteger(value, path, &calibration.heldout_samples));
      } else if (key == "seed") {
        QUANT_RETURN_IF_ERROR(ReadInteger(value, path, &calibration.seed));
      } else if (key == "packing") {
        QUANT_RETURN_IF_ERROR(
            ReadEnum(value, path, kPackings, &calibration.packing));
      } else if (key == "chat_template") {
        QUANT_RETURN_IF_ERROR(
            ReadString(value, path, &calibration.chat_template));
      } else if (key == "system_prompt") {
        QUANT_RETURN_IF_ERROR(
            ReadString(value, path, &calibration.system_prompt.emplace()));
      } else if (key == "add_generation_prompt") {
        QUANT_RETURN_IF_ERROR(
            ReadBool(value, path, &calibration.add_generation_prompt));
      } else if (key == "sources") {
        QUANT_RETURN_IF_ERROR(ReadSources(value, calibration.sources));
      }
    }
    return absl::OkStatus();
  }

  absl::Status ReadSources(const YamlNode& node,
                           std::vector<CalibrationSource>& sources) {
    const std::string list_path = "calibration.sources";
    if (!node.IsSequence()) {
      return Error(
          node, list_path,
          absl::StrCat("expected a list of mappings, got ", Describe(node)));
    }
    sources.clear();
    for (size_t i = 0; i < node.items.size(); ++i) {
      const std::string path = absl::StrCat(list_path, "[", i, "]");
      marks_[path] = node.items[i].mark;
      QUANT_ASSIGN_OR_RETURN(const Entries entries,
                             MapEntries(node.items[i], path, SourceKeys()));
      CalibrationSource& source = sources.emplace_back();
      for (const auto& key_value : entries) {
        const std::string& key = key_value.first;
        const YamlNode& value = key_value.second;
        const std::string field = Child(path, key);
        if (key == "file") {
          QUANT_RETURN_IF_ERROR(ReadString(value, field, &source.file));
          source.file = RelativeToRecipe(source.file);
        } else if (key == "sha256") {
          QUANT_RETURN_IF_ERROR(ReadString(value, field, &source.sha256));
        } else {
          QUANT_RETURN_IF_ERROR(ReadDouble(value, field, &source.weight));
        }
      }
    }
    return absl::OkStatus();
  }

  absl::Status ReadGates(const YamlNode& node, Gates& gates) {
    QUANT_ASSIGN_OR_RETURN(const Entries entries,
                           MapEntries(node, "gates", GateKeys()));
    // Not a structured binding: C++17 lambdas cannot capture those.
    for (const auto& key_value : entries) {
      const std::string& key = key_value.first;
      const YamlNode& value = key_value.second;
      const std::string path = Child("gates", key);
      if (key == "compare_to") {
        QUANT_RETURN_IF_ERROR(ReadString(value, path, &gates.compare_to));
        continue;
      }
      if (key == "runtime") {
        QUANT_RETURN_IF_ERROR(ReadString(value, path, &gates.runtime));
        continue;
      }
      if (key == "tasks") {
        QUANT_RETURN_IF_ERROR(ReadString(value, path, &gates.tasks));
        gates.tasks = RelativeToRecipe(gates.tasks);
        continue;
      }
      std::optional<double>* target =
          key == "max_ppl_ratio"             ? &gates.max_ppl_ratio
          : key == "max_mean_kl"             ? &gates.max_mean_kl
          : key == "min_top1_agreement"      ? &gates.min_top1_agreement
          : key == "min_task_accuracy_ratio" ? &gates.min_task_accuracy_ratio
          : key == "max_starved_experts"     ? &gates.max_starved_experts
                                             : &gates.max_ppl_ratio_vs_previous;
      QUANT_RETURN_IF_ERROR(ReadOptional(value, target, [&](double* out) {
        return ReadDouble(value, path, out);
      }));
    }
    return absl::OkStatus();
  }

  absl::Status ReadOverride(const YamlNode& node, absl::string_view path,
                            LayerOverride& entry) {
    QUANT_ASSIGN_OR_RETURN(const Entries entries,
                           MapEntries(node, path, OverrideKeys()));
    bool has_match = false;
    // Not a structured binding: C++17 lambdas cannot capture those.
    for (const auto& key_value : entries) {
      const std::string& key = key_value.first;
      const YamlNode& value = key_value.second;
      const std::string field = Child(path, key);
      if (key == "match") {
        has_match = true;
        QUANT_RETURN_IF_ERROR(ReadString(value, field, &entry.match));
      } else if (key == "bits") {
        QUANT_RETURN_IF_ERROR(ReadOptional(value, &entry.bits, [&](int* out) {
          return ReadInteger(value, field, out);
        }));
      } else if (key == "group_size") {
        QUANT_RETURN_IF_ERROR(ReadOptional(
            value, &entry.group_size,
            [&](int* out) { return ReadInteger(value, field, out); }));
      } else if (key == "method") {
        QUANT_RETURN_IF_ERROR(
            ReadOptional(value, &entry.method, [&](QuantMethod* out) {
              return ReadEnum(value, field, kMethods, out);
            }));
      } else if (key == "grid") {
        QUANT_RETURN_IF_ERROR(
            ReadOptional(value, &entry.grid, [&](QuantGrid* out) {
              return ReadEnum(value, field, kGrids, out);
            }));
      } else if (key == "damp") {
        QUANT_RETURN_IF_ERROR(ReadOptional(
            value, &entry.damp,
            [&](DampValue* out) { return ReadDamp(value, field, out); }));
      } else if (key == "keep_unquantized") {
        QUANT_RETURN_IF_ERROR(ReadBool(value, field, &entry.keep_unquantized));
      }
    }
    if (!has_match) return Error(node, path, "missing field \"match\"");
    return absl::OkStatus();
  }

  absl::Status ReadOverrides(const YamlNode& node,
                             std::vector<LayerOverride>& overrides) {
    if (!node.IsSequence()) {
      return Error(
          node, "overrides",
          absl::StrCat("expected a list of mappings, got ", Describe(node)));
    }
    overrides.clear();
    for (size_t i = 0; i < node.items.size(); ++i) {
      const std::string path = absl::StrCat("overrides[", i, "]");
      marks_[path] = node.items[i].mark;
      overrides.emplace_back();
      QUANT_RETURN_IF_ERROR(
          ReadOverride(node.items[i], path, overrides.back()));
    }
    return absl::OkStatus();
  }

  absl::Status ReadTopLevel(const std::string& key, const YamlNode& value,
                            Recipe& recipe) {
    if (key == "method") return ReadEnum(value, key, kMethods, &recipe.method);
    if (key == "bits") return ReadInteger(value, key, &recipe.bits);
    if (key == "group_size") return ReadInteger(value, key, &recipe.group_size);
    if (key == "grid") return ReadEnum(value, key, kGrids, &recipe.grid);
    if (key == "damp") return ReadDamp(value, key, &recipe.damp);
    if (key == "damp_grid") {
      return ReadDoubleList(value, key, &recipe.damp.auto_grid);
    }
    if (key == "act_order") return ReadBool(value, key, &recipe.act_order);
    if (key == "static_groups") {
      return ReadBool(value, key, &recipe.static_groups);
    }
    if (key == "propagation") {
      return ReadEnum(value, key, kPropagations, &recipe.propagation);
    }
    if (key == "calibration") return ReadCalibration(value, recipe.calibration);
    if (key == "ignore") return ReadStringList(value, key, &recipe.ignore);
    if (key == "overrides") return ReadOverrides(value, recipe.overrides);
    if (key == "gates") return ReadGates(value, recipe.gates);
    if (key == "format") return ReadEnum(value, key, kFormats, &recipe.format);
    if (key == "awq_alpha_grid") {
      return ReadDoubleList(value, key, &recipe.awq_alpha_grid);
    }
    if (key == "awq_clip_search") {
      return ReadBool(value, key, &recipe.awq_clip_search);
    }
    if (key == "mixed_precision") {
      return ReadMixedPrecision(value, recipe.mixed_precision);
    }
    if (key == "moe") return ReadMoe(value, recipe.moe);
    return absl::InternalError(absl::StrCat("unhandled recipe key ", key));
  }

  // A relative path resolved against the recipe file's directory; kept as
  // written (for validation to refuse) when there is no file, or when it
  // is empty or a URI.
  std::string RelativeToRecipe(const std::string& path) const {
    if (base_dir_.empty() || path.empty() || absl::StartsWith(path, "/") ||
        absl::StrContains(path, "://")) {
      return path;
    }
    return JoinPath(base_dir_, path);
  }

  std::string source_name_;
  std::string base_dir_;
  std::map<std::string, YamlMark> marks_;  // Field path -> its value.
};

absl::StatusOr<Recipe> ParseRecipeIn(absl::string_view text,
                                     absl::string_view source_name,
                                     std::string base_dir) {
  if (text.size() > kMaxRecipeBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(source_name, ": recipe is ", text.size(),
                     " bytes, more than the limit of ", kMaxRecipeBytes));
  }
  // YAML allows no C0 control characters but tab, LF and CR; say which byte.
  for (size_t i = 0; i < text.size(); ++i) {
    const auto byte = static_cast<unsigned char>(text[i]);
    if (byte < 0x20 && byte != '\t' && byte != '\n' && byte != '\r') {
      return absl::InvalidArgumentError(
          absl::StrCat(source_name, ": invalid YAML: control character 0x",
                       absl::Hex(byte, absl::kZeroPad2), " at byte ", i));
    }
  }
  QUANT_ASSIGN_OR_RETURN(const std::vector<YamlNode> documents,
                         ParseYamlDocuments(text, source_name));
  if (documents.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source_name, ": empty recipe"));
  }
  if (documents.size() > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(source_name, ": ", documents.size(),
                     " YAML documents; a recipe is exactly one"));
  }
  return RecipeReader(source_name, std::move(base_dir)).Read(documents[0]);
}

}  // namespace

absl::StatusOr<Recipe> ParseRecipe(absl::string_view text,
                                   absl::string_view source_name) {
  return ParseRecipeIn(text, source_name, "");
}

absl::StatusOr<Recipe> LoadRecipe(const std::string& path) {
  QUANT_ASSIGN_OR_RETURN(const std::string text,
                         ReadFileToString(path, kMaxRecipeBytes));
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "."
                          : slash == 0               ? "/"
                                                     : path.substr(0, slash);
  char buffer[PATH_MAX];
  const std::string base_dir =
      ::realpath(dir.c_str(), buffer) != nullptr ? buffer : "";
  return ParseRecipeIn(text, path, base_dir);
}

}  // namespace quant

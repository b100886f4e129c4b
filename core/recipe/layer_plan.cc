// ResolveLayerSettings: ignore, then overrides (with conflict checks), then
// the embedding / output-head default, then the recipe's values.
#include "core/recipe/layer_plan.h"

#include <memory>
#include <optional>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/base/regex.h"
#include "core/base/status_macros.h"

namespace quant {
namespace {

absl::StatusOr<std::vector<std::unique_ptr<Regex>>> CompileAll(
    const std::vector<std::string>& patterns, absl::string_view field,
    absl::string_view suffix) {
  std::vector<std::unique_ptr<Regex>> compiled;
  for (size_t i = 0; i < patterns.size(); ++i) {
    absl::StatusOr<std::unique_ptr<Regex>> regex = Regex::Compile(patterns[i]);
    if (!regex.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, "[", i, "]", suffix, ": ", regex.status().message()));
    }
    compiled.push_back(*std::move(regex));
  }
  return compiled;
}

bool IsEmbeddingOrHead(absl::string_view name) {
  return name == "lm_head" || absl::EndsWith(name, "embed_tokens");
}

// A mixture-of-experts router (Qwen3-MoE "mlp.gate", Mixtral
// "block_sparse_moe.gate"), not a dense MLP's gate_proj.
bool IsRouter(absl::string_view name) {
  return absl::EndsWith(name, ".mlp.gate") ||
         absl::EndsWith(name, ".block_sparse_moe.gate");
}

std::string DampText(const DampValue& damp) {
  return damp.automatic ? "auto" : absl::StrCat(damp.fraction);
}

// One field as set by the overrides matching a layer: the value and which
// override set it first.
template <typename T>
struct FieldSetting {
  std::optional<T> value;
  int source = -1;
};

// Records `value` from override `index`; an error when an earlier override
// set the field to something else.
template <typename T, typename ToText>
absl::Status Merge(const std::optional<T>& value, int index,
                   absl::string_view field, absl::string_view layer,
                   ToText to_text, FieldSetting<T>& setting) {
  if (!value.has_value()) return absl::OkStatus();
  if (setting.value.has_value() && !(*setting.value == *value)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "overrides[", setting.source, "] and overrides[", index,
        "] both match layer \"", layer, "\" but set ", field, " to ",
        to_text(*setting.value), " and ", to_text(*value)));
  }
  if (!setting.value.has_value()) {
    setting.value = value;
    setting.source = index;
  }
  return absl::OkStatus();
}

std::string IntText(int value) { return absl::StrCat(value); }
std::string MethodText(QuantMethod method) { return QuantMethodName(method); }
std::string GridText(QuantGrid grid) { return QuantGridName(grid); }

}  // namespace

absl::StatusOr<LayerPlan> ResolveLayerSettings(
    const Recipe& recipe, const std::vector<std::string>& layer_names) {
  QUANT_ASSIGN_OR_RETURN(const std::vector<std::unique_ptr<Regex>> ignore,
                         CompileAll(recipe.ignore, "ignore", ""));
  std::vector<std::string> override_patterns;
  for (const LayerOverride& entry : recipe.overrides) {
    override_patterns.push_back(entry.match);
  }
  QUANT_ASSIGN_OR_RETURN(const std::vector<std::unique_ptr<Regex>> overrides,
                         CompileAll(override_patterns, "overrides", ".match"));

  std::vector<int> matched(recipe.overrides.size(), 0);
  std::vector<int> applied(recipe.overrides.size(), 0);
  LayerPlan plan;
  for (const std::string& name : layer_names) {
    LayerSettings layer;
    layer.name = name;
    layer.method = recipe.method;
    layer.bits = recipe.bits;
    layer.group_size = recipe.group_size;
    layer.grid = recipe.grid;
    layer.damp = DampValue{recipe.damp.automatic, recipe.damp.fraction};

    // A pattern that gives up on a name is an error, not "no match": an
    // ignore entry that silently failed would quantize a layer the user
    // asked to keep.
    const auto matches =
        [&name](const Regex& regex, absl::string_view field, size_t i,
                absl::string_view suffix) -> absl::StatusOr<bool> {
      absl::StatusOr<bool> matched = regex.BoundedFullMatch(name);
      if (!matched.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(
            field, "[", i, "]", suffix, ": ", matched.status().message()));
      }
      return *matched;
    };
    int ignored_by = -1;
    for (size_t i = 0; i < ignore.size() && ignored_by < 0; ++i) {
      QUANT_ASSIGN_OR_RETURN(const bool hit,
                             matches(*ignore[i], "ignore", i, ""));
      if (hit) ignored_by = static_cast<int>(i);
    }

    FieldSetting<int> bits, group_size;
    FieldSetting<QuantMethod> method;
    FieldSetting<QuantGrid> grid;
    FieldSetting<DampValue> damp;
    int kept_by = -1;
    for (size_t i = 0; i < overrides.size(); ++i) {
      QUANT_ASSIGN_OR_RETURN(const bool hit,
                             matches(*overrides[i], "overrides", i, ".match"));
      if (!hit) continue;
      ++matched[i];
      if (ignored_by >= 0) continue;
      ++applied[i];
      const LayerOverride& entry = recipe.overrides[i];
      const int index = static_cast<int>(i);
      layer.overrides.push_back(index);
      if (entry.keep_unquantized && kept_by < 0) kept_by = index;
      QUANT_RETURN_IF_ERROR(
          Merge(entry.bits, index, "bits", name, IntText, bits));
      QUANT_RETURN_IF_ERROR(Merge(entry.group_size, index, "group_size", name,
                                  IntText, group_size));
      QUANT_RETURN_IF_ERROR(
          Merge(entry.method, index, "method", name, MethodText, method));
      QUANT_RETURN_IF_ERROR(
          Merge(entry.grid, index, "grid", name, GridText, grid));
      QUANT_RETURN_IF_ERROR(
          Merge(entry.damp, index, "damp", name, DampText, damp));
    }
    const bool explicitly_quantized =
        bits.value.has_value() || group_size.value.has_value() ||
        method.value.has_value() || grid.value.has_value() ||
        damp.value.has_value();
    layer.bits = bits.value.value_or(layer.bits);
    layer.group_size = group_size.value.value_or(layer.group_size);
    layer.method = method.value.value_or(layer.method);
    layer.grid = grid.value.value_or(layer.grid);
    layer.damp = damp.value.value_or(layer.damp);

    if (ignored_by >= 0) {
      layer.keep_unquantized = true;
      layer.reason = absl::StrCat("ignore[", ignored_by, "] \"",
                                  recipe.ignore[ignored_by], "\"");
    } else if (kept_by >= 0) {
      layer.keep_unquantized = true;
      layer.reason =
          absl::StrCat("overrides[", kept_by, "] \"",
                       recipe.overrides[kept_by].match, "\" keep_unquantized");
    } else if (IsEmbeddingOrHead(name) && !explicitly_quantized) {
      layer.keep_unquantized = true;
      layer.reason =
          "embedding / output head: quantized only when an override sets "
          "its bits, group_size, method, grid or damp";
    } else if (IsRouter(name) && !explicitly_quantized) {
      layer.keep_unquantized = true;
      layer.reason =
          "mixture-of-experts router: quantized only when an override sets "
          "its bits, group_size, method, grid or damp";
    }
    plan.layers.push_back(std::move(layer));
  }

  for (size_t i = 0; i < recipe.overrides.size(); ++i) {
    const std::string& pattern = recipe.overrides[i].match;
    if (matched[i] == 0) {
      plan.warnings.push_back(absl::StrCat("overrides[", i, "]: match \"",
                                           pattern, "\" matches no layer"));
    } else if (applied[i] == 0) {
      plan.warnings.push_back(
          absl::StrCat("overrides[", i, "]: match \"", pattern,
                       "\" matches only ", matched[i], " ignored layer",
                       matched[i] == 1 ? "" : "s", ", so it has no effect"));
    }
  }
  return plan;
}

}  // namespace quant

// Range and consistency checks of a Recipe (the rules listed in recipe.h).
#include "core/recipe/recipe_validation.h"

#include <cmath>
#include <memory>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/base/file_uri.h"
#include "core/base/regex.h"
#include "core/base/sha256.h"

namespace quant {
namespace {

constexpr int kMaxCalibrationCount = 1 << 20;
// Layer-name patterns: real ones are a few dozen characters and a recipe has
// a handful. The bounds keep planning (every pattern against every layer
// name) fast and error messages that quote a pattern short.
constexpr size_t kMaxPatternLength = 256;
constexpr size_t kMaxPatterns = 256;

using MaybeError = std::optional<RecipeFieldError>;

MaybeError Error(std::string path, std::string problem) {
  return RecipeFieldError{std::move(path), std::move(problem)};
}

MaybeError CheckBits(const std::string& path, int bits) {
  if (bits == 2 || bits == 3 || bits == 4 || bits == 8) return std::nullopt;
  return Error(path, absl::StrCat(bits, " is not supported (2, 3, 4, 8)"));
}

MaybeError CheckGroupSize(const std::string& path, int group_size) {
  if (group_size == 0 || (group_size > 0 && group_size % 8 == 0)) {
    return std::nullopt;
  }
  return Error(path, absl::StrCat(group_size,
                                  " is not allowed (0 = one group per output "
                                  "row, or a positive multiple of 8)"));
}

// [0, 1): a damping of 1 would double the Hessian's diagonal mean, beyond
// anything GPTQ uses; negative damping makes H less positive definite.
MaybeError CheckDampFraction(const std::string& path, double fraction) {
  if (std::isfinite(fraction) && fraction >= 0.0 && fraction < 1.0) {
    return std::nullopt;
  }
  return Error(path, absl::StrCat(fraction,
                                  " is out of range (a number in [0, 1), or "
                                  "auto)"));
}

MaybeError CheckPattern(const std::string& path, const std::string& pattern) {
  if (pattern.empty()) return Error(path, "empty pattern");
  if (pattern.size() > kMaxPatternLength) {
    return Error(path,
                 absl::StrCat("pattern of ", pattern.size(),
                              " characters; at most ", kMaxPatternLength));
  }
  absl::StatusOr<std::unique_ptr<Regex>> regex = Regex::Compile(pattern);
  if (!regex.ok()) return Error(path, std::string(regex.status().message()));
  return std::nullopt;
}

// A file the recipe names (`field`): an absolute path or file:/// URI of at
// most 4096 bytes without control characters; `expected` says what else
// the field accepts, for the error.
MaybeError CheckFileReference(const char* field, const std::string& value,
                              const std::string& expected) {
  if (value.size() > 4096) {
    return Error(field,
                 absl::StrCat(value.size(), " bytes; a path of at most 4096"));
  }
  for (const char c : value) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      return Error(field,
                   absl::StrCat("holds a control character; ", expected));
    }
  }
  if (absl::StartsWith(value, kFileUriScheme)) {
    absl::StatusOr<std::string> path = FileUriPath(value, field);
    if (!path.ok()) return Error(field, std::string(path.status().message()));
  } else if (!absl::StartsWith(value, "/")) {
    return Error(field, absl::StrCat("\"", value, "\": ", expected));
  }
  return std::nullopt;
}

// calibration.chat_template, system_prompt, add_generation_prompt.
MaybeError CheckChatTemplate(const CalibrationSettings& calibration) {
  const std::string& choice = calibration.chat_template;
  if (choice != "auto" && choice != "none") {
    if (MaybeError error = CheckFileReference(
            "calibration.chat_template", choice,
            "auto, none, or a template file's absolute path or file:/// "
            "URI")) {
      return error;
    }
  }
  if (calibration.system_prompt.has_value() &&
      calibration.system_prompt->size() > (size_t{64} << 10)) {
    return Error("calibration.system_prompt",
                 absl::StrCat(calibration.system_prompt->size(),
                              " bytes; at most 65536"));
  }
  if (choice == "none" && (calibration.system_prompt.has_value() ||
                           calibration.add_generation_prompt)) {
    return Error(calibration.system_prompt.has_value()
                     ? "calibration.system_prompt"
                     : "calibration.add_generation_prompt",
                 "applies to conversations, which chat_template none refuses");
  }
  return std::nullopt;
}

// calibration.sources.
MaybeError CheckSources(const CalibrationSettings& calibration) {
  const std::vector<CalibrationSource>& sources = calibration.sources;
  constexpr size_t kMaxSources = 64;
  if (sources.size() > kMaxSources) {
    return Error(
        "calibration.sources",
        absl::StrCat(sources.size(), " sources; at most ", kMaxSources));
  }
  for (size_t i = 0; i < sources.size(); ++i) {
    const std::string path = absl::StrCat("calibration.sources[", i, "]");
    const CalibrationSource& source = sources[i];
    if (source.file.empty() && source.sha256.empty()) {
      return Error(path, "needs file (a path) or sha256 (an uploaded set)");
    }
    if (!source.file.empty()) {
      const std::string field = path + ".file";
      if (MaybeError error = CheckFileReference(
              field.c_str(), source.file,
              "a calibration file's absolute path or file:/// URI (in a "
              "recipe file, a path relative to it)")) {
        return error;
      }
    }
    if (!source.sha256.empty() && !IsSha256Hex(source.sha256)) {
      return Error(path + ".sha256",
                   absl::StrCat("\"", source.sha256.substr(0, 80),
                                "\" is not a sha256 (64 lowercase hex)"));
    }
    if (!(std::isfinite(source.weight) && source.weight > 0)) {
      return Error(path + ".weight",
                   absl::StrCat(source.weight, " is out of range (> 0)"));
    }
  }
  if (!sources.empty()) {
    const int n = static_cast<int>(sources.size());
    if (calibration.samples < n) {
      return Error(
          "calibration.samples",
          absl::StrCat(calibration.samples, " windows cannot give each of ", n,
                       " sources one"));
    }
    if (calibration.heldout_samples > 0 && calibration.heldout_samples < n) {
      return Error(
          "calibration.heldout_samples",
          absl::StrCat(calibration.heldout_samples,
                       " windows cannot give each of ", n, " sources one"));
    }
  }
  return std::nullopt;
}

MaybeError CheckCalibration(const CalibrationSettings& calibration) {
  if (calibration.samples < 1 || calibration.samples > kMaxCalibrationCount) {
    return Error("calibration.samples",
                 absl::StrCat(calibration.samples, " is out of range [1, ",
                              kMaxCalibrationCount, "]"));
  }
  if (calibration.seq_len < 1 || calibration.seq_len > kMaxCalibrationCount) {
    return Error("calibration.seq_len",
                 absl::StrCat(calibration.seq_len, " is out of range [1, ",
                              kMaxCalibrationCount, "]"));
  }
  if (!std::isfinite(calibration.heldout_fraction) ||
      calibration.heldout_fraction < 0.0 ||
      calibration.heldout_fraction >= 1.0) {
    return Error(
        "calibration.heldout_fraction",
        absl::StrCat(calibration.heldout_fraction, " is out of range [0, 1)"));
  }
  if (calibration.heldout_count < 0) {
    return Error("calibration.heldout_count",
                 absl::StrCat(calibration.heldout_count, " is negative"));
  }
  if (calibration.heldout_samples < 0 ||
      calibration.heldout_samples > kMaxCalibrationCount) {
    return Error(
        "calibration.heldout_samples",
        absl::StrCat(calibration.heldout_samples, " is out of range [0, ",
                     kMaxCalibrationCount, "]"));
  }
  if (calibration.heldout_fraction == 0.0 && calibration.heldout_count == 0) {
    return Error("calibration",
                 "no held-out split (heldout_fraction and heldout_count are "
                 "both 0); the audit and the gates need one");
  }
  if (MaybeError error = CheckChatTemplate(calibration)) return error;
  return CheckSources(calibration);
}

MaybeError CheckGates(const Gates& gates) {
  if (gates.max_ppl_ratio.has_value() &&
      !(std::isfinite(*gates.max_ppl_ratio) && *gates.max_ppl_ratio >= 1.0)) {
    return Error(
        "gates.max_ppl_ratio",
        absl::StrCat(*gates.max_ppl_ratio, " is out of range (a ratio >= 1)"));
  }
  if (gates.max_mean_kl.has_value() &&
      !(std::isfinite(*gates.max_mean_kl) && *gates.max_mean_kl >= 0.0)) {
    return Error("gates.max_mean_kl",
                 absl::StrCat(*gates.max_mean_kl, " is out of range (>= 0)"));
  }
  if (gates.min_top1_agreement.has_value() &&
      !(*gates.min_top1_agreement >= 0.0 && *gates.min_top1_agreement <= 1.0)) {
    return Error(
        "gates.min_top1_agreement",
        absl::StrCat(*gates.min_top1_agreement, " is out of range [0, 1]"));
  }
  if (gates.compare_to.size() > 4096) {
    return Error("gates.compare_to",
                 absl::StrCat(gates.compare_to.size(),
                              " bytes; a job id or a path of at most 4096"));
  }
  for (const char c : gates.compare_to) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      return Error("gates.compare_to",
                   "holds a control character; a job id or a path");
    }
  }
  if (gates.max_ppl_ratio_vs_previous.has_value()) {
    if (!(std::isfinite(*gates.max_ppl_ratio_vs_previous) &&
          *gates.max_ppl_ratio_vs_previous > 0.0)) {
      return Error("gates.max_ppl_ratio_vs_previous",
                   absl::StrCat(*gates.max_ppl_ratio_vs_previous,
                                " is out of range (a ratio > 0)"));
    }
    if (gates.compare_to.empty()) {
      return Error("gates.max_ppl_ratio_vs_previous",
                   "needs gates.compare_to (the previous release to compare "
                   "with)");
    }
  }
  if (!gates.tasks.empty()) {
    if (MaybeError error = CheckFileReference(
            "gates.tasks", gates.tasks,
            "a task file's absolute path or file:/// URI (in a recipe file, "
            "a path relative to it)")) {
      return error;
    }
  }
  if (gates.min_task_accuracy_ratio.has_value()) {
    if (!(*gates.min_task_accuracy_ratio >= 0.0 &&
          *gates.min_task_accuracy_ratio <= 1.0)) {
      return Error("gates.min_task_accuracy_ratio",
                   absl::StrCat(*gates.min_task_accuracy_ratio,
                                " is out of range [0, 1]"));
    }
    if (gates.tasks.empty()) {
      return Error("gates.min_task_accuracy_ratio",
                   "needs gates.tasks (the task file to score)");
    }
  }
  if (gates.max_starved_experts.has_value() &&
      !(*gates.max_starved_experts >= 0.0 &&
        *gates.max_starved_experts <= 1.0)) {
    return Error("gates.max_starved_experts",
                 absl::StrCat(*gates.max_starved_experts,
                              " is out of range [0, 1] (a fraction of the "
                              "experts)"));
  }
  if (!gates.runtime.empty() && gates.runtime != "vllm" &&
      gates.runtime != "transformers") {
    return Error("gates.runtime",
                 absl::StrCat("\"", gates.runtime,
                              "\" is not one of vllm, transformers"));
  }
  return std::nullopt;
}

MaybeError CheckMixedPrecision(const Recipe& recipe) {
  const MixedPrecision& m = *recipe.mixed_precision;
  if (!(std::isfinite(m.average_bits) && m.average_bits > 0.0 &&
        m.average_bits <= 32.0)) {
    return Error("mixed_precision.average_bits",
                 absl::StrCat(m.average_bits, " is out of range (0, 32]"));
  }
  if (m.bits.empty()) {
    return Error("mixed_precision.bits",
                 "empty; list the candidate widths, e.g. [3, 4, 8]");
  }
  for (size_t i = 0; i < m.bits.size(); ++i) {
    const std::string path = absl::StrCat("mixed_precision.bits[", i, "]");
    if (m.bits[i] != 2 && m.bits[i] != 3 && m.bits[i] != 4 && m.bits[i] != 8) {
      return Error(path, absl::StrCat(m.bits[i], " is not one of 2, 3, 4, 8"));
    }
    for (size_t j = 0; j < i; ++j) {
      if (m.bits[j] == m.bits[i]) {
        return Error(path, absl::StrCat(m.bits[i], " is listed twice"));
      }
    }
  }
  for (size_t i = 0; i < m.group_sizes.size(); ++i) {
    const std::string path =
        absl::StrCat("mixed_precision.group_sizes[", i, "]");
    const int g = m.group_sizes[i];
    if (g < 0 || g % 8 != 0) {
      return Error(path, absl::StrCat(g,
                                      " must be 0 (one group per row) or a "
                                      "positive multiple of 8"));
    }
    for (size_t j = 0; j < i; ++j) {
      if (m.group_sizes[j] == g) {
        return Error(path, absl::StrCat(g, " is listed twice"));
      }
    }
  }
  for (size_t i = 0; i < recipe.overrides.size(); ++i) {
    const LayerOverride& o = recipe.overrides[i];
    if (o.bits.has_value() || o.group_size.has_value()) {
      return Error(absl::StrCat("overrides[", i, "].",
                                o.bits.has_value() ? "bits" : "group_size"),
                   "mixed_precision chooses bits and group sizes; an "
                   "override may keep a layer unquantized or set its "
                   "method, grid or damp");
    }
  }
  return std::nullopt;
}

MaybeError CheckOverride(const std::string& path,
                         const LayerOverride& override_entry) {
  if (MaybeError error = CheckPattern(path + ".match", override_entry.match)) {
    return error;
  }
  if (override_entry.bits.has_value()) {
    if (MaybeError error = CheckBits(path + ".bits", *override_entry.bits)) {
      return error;
    }
  }
  if (override_entry.group_size.has_value()) {
    if (MaybeError error =
            CheckGroupSize(path + ".group_size", *override_entry.group_size)) {
      return error;
    }
  }
  if (override_entry.damp.has_value() && !override_entry.damp->automatic) {
    if (MaybeError error =
            CheckDampFraction(path + ".damp", override_entry.damp->fraction)) {
      return error;
    }
  }
  const bool sets_quantization = override_entry.bits.has_value() ||
                                 override_entry.group_size.has_value() ||
                                 override_entry.method.has_value() ||
                                 override_entry.grid.has_value() ||
                                 override_entry.damp.has_value();
  if (override_entry.keep_unquantized && sets_quantization) {
    return Error(path,
                 "keep_unquantized: true cannot be combined with bits, "
                 "group_size, method, grid or damp");
  }
  if (!override_entry.keep_unquantized && !sets_quantization) {
    return Error(path,
                 "sets nothing (give bits, group_size, method, grid, damp or "
                 "keep_unquantized: true)");
  }
  return std::nullopt;
}

// Whether any layer can end up with `method` / a group size > 0.
bool AnyLayerUses(const Recipe& recipe, QuantMethod method) {
  if (recipe.method == method) return true;
  for (const LayerOverride& entry : recipe.overrides) {
    if (entry.method == method) return true;
  }
  return false;
}

bool AnyLayerHasGroups(const Recipe& recipe) {
  if (recipe.group_size > 0) return true;
  for (const LayerOverride& entry : recipe.overrides) {
    if (entry.group_size.value_or(0) > 0) return true;
  }
  return false;
}

MaybeError CheckGrid(const std::string& path, const std::vector<double>& grid,
                     double upper, bool upper_inclusive) {
  for (size_t i = 0; i < grid.size(); ++i) {
    const double value = grid[i];
    const bool ok = std::isfinite(value) && value >= 0.0 &&
                    (upper_inclusive ? value <= upper : value < upper);
    if (!ok) {
      return Error(absl::StrCat(path, "[", i, "]"),
                   absl::StrCat(value, " is out of range [0, ", upper,
                                upper_inclusive ? "]" : ")"));
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<RecipeFieldError> FindRecipeError(const Recipe& recipe) {
  if (MaybeError error = CheckBits("bits", recipe.bits)) return error;
  if (MaybeError error = CheckGroupSize("group_size", recipe.group_size)) {
    return error;
  }
  if (!recipe.damp.automatic) {
    if (MaybeError error = CheckDampFraction("damp", recipe.damp.fraction)) {
      return error;
    }
  }
  if (MaybeError error = CheckGrid("damp_grid", recipe.damp.auto_grid, 1.0,
                                   /*upper_inclusive=*/false)) {
    return error;
  }
  const bool uses_gptq = AnyLayerUses(recipe, QuantMethod::kGptq);
  const bool uses_awq = AnyLayerUses(recipe, QuantMethod::kAwq);
  bool any_auto_damp = recipe.damp.automatic && uses_gptq;
  for (const LayerOverride& entry : recipe.overrides) {
    if (entry.damp.has_value() && entry.damp->automatic) any_auto_damp = true;
  }
  if (any_auto_damp && recipe.damp.auto_grid.empty()) {
    return Error("damp_grid", "empty, but damp is auto");
  }
  if (recipe.damp.automatic && !uses_gptq) {
    return Error("damp",
                 "auto has no effect: no layer uses method gptq (damping is "
                 "a GPTQ setting)");
  }
  if (recipe.act_order && !uses_gptq) {
    return Error("act_order",
                 "true has no effect: no layer uses method gptq (act_order is "
                 "a GPTQ setting)");
  }
  if (recipe.static_groups) {
    if (!uses_gptq) {
      return Error("static_groups",
                   "true has no effect: no layer uses method gptq");
    }
    if (!recipe.act_order) {
      return Error("static_groups",
                   "true has no effect without act_order: true (groups are "
                   "already fixed in column order)");
    }
    if (!AnyLayerHasGroups(recipe)) {
      return Error("static_groups",
                   "true has no effect: group_size is 0 (one group per row) "
                   "everywhere");
    }
  }
  if (MaybeError error = CheckCalibration(recipe.calibration)) return error;
  if (recipe.ignore.size() > kMaxPatterns) {
    return Error("ignore", absl::StrCat(recipe.ignore.size(),
                                        " patterns; at most ", kMaxPatterns));
  }
  if (recipe.overrides.size() > kMaxPatterns) {
    return Error("overrides", absl::StrCat(recipe.overrides.size(),
                                           " entries; at most ", kMaxPatterns));
  }
  for (size_t i = 0; i < recipe.ignore.size(); ++i) {
    if (MaybeError error =
            CheckPattern(absl::StrCat("ignore[", i, "]"), recipe.ignore[i])) {
      return error;
    }
  }
  for (size_t i = 0; i < recipe.overrides.size(); ++i) {
    if (MaybeError error = CheckOverride(absl::StrCat("overrides[", i, "]"),
                                         recipe.overrides[i])) {
      return error;
    }
  }
  if (MaybeError error = CheckGates(recipe.gates)) return error;
  if (MaybeError error = CheckGrid("awq_alpha_grid", recipe.awq_alpha_grid, 1.0,
                                   /*upper_inclusive=*/true)) {
    return error;
  }
  if (uses_awq && recipe.awq_alpha_grid.empty()) {
    return Error("awq_alpha_grid", "empty, but a layer uses method awq");
  }
  if (recipe.awq_clip_search && !uses_awq) {
    return Error("awq_clip_search",
                 "true has no effect: no layer uses method awq");
  }
  if (recipe.mixed_precision.has_value()) {
    if (MaybeError error = CheckMixedPrecision(recipe)) return error;
  }
  if (recipe.moe.has_value()) {
    const MoeCalibration& moe = *recipe.moe;
    if (moe.min_tokens_per_expert < 0 ||
        moe.min_tokens_per_expert > (int64_t{1} << 40)) {
      return Error("moe.min_tokens_per_expert",
                   absl::StrCat(moe.min_tokens_per_expert,
                                " is out of range [0, 2^40]"));
    }
    if (moe.on_starved_expert == StarvedExpertAction::kDamp && !uses_gptq) {
      return Error("moe.on_starved_expert",
                   "damp has no effect: it raises GPTQ's damping and no "
                   "layer uses method gptq");
    }
  }
  return std::nullopt;
}

absl::Status ValidateRecipe(const Recipe& recipe) {
  if (std::optional<RecipeFieldError> error = FindRecipeError(recipe)) {
    return absl::InvalidArgumentError(
        absl::StrCat(error->path, ": ", error->problem));
  }
  return absl::OkStatus();
}

}  // namespace quant

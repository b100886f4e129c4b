// A recipe applied to a model's layer names: the effective method, bits,
// group size, grid and damping of every layer, or why it stays unquantized.
//
// Resolution rules, for each layer name (patterns are PCRE2 full matches, so
// "lm_head" matches only "lm_head", and "model\\.layers\\.0\\..*" all of
// block 0):
// 1. `ignore` wins over everything: a layer matching any ignore pattern stays
//    unquantized (reason "ignore[i] ...") and no override applies to it.
// 2. Every override that matches contributes the fields it sets. Two
//    matching overrides that set the same field to different values are an
//    error naming both overrides, the field and the layer; equal values are
//    fine. keep_unquantized: true from any matching override wins over the
//    other overrides' settings (like ignore).
// 3. Embeddings and the output head (names "lm_head" or ending in
//    "embed_tokens") stay unquantized unless a matching override explicitly
//    sets bits, group_size, method, grid or damp for them (and the default
//    `ignore: ["lm_head"]` is removed for lm_head). Likewise a
//    mixture-of-experts router (names ending ".mlp.gate" or
//    ".block_sparse_moe.gate").
// 4. Everything else takes the recipe's values.
// An override that matches no layer, or only ignored ones, is a warning (a
// typo in a pattern should be visible), not an error: one recipe serves
// several model families. Ignore patterns that match nothing are silent, as
// the default "lm_head" matches nothing in models with tied embeddings.
#ifndef QUANT_CORE_RECIPE_LAYER_PLAN_H_
#define QUANT_CORE_RECIPE_LAYER_PLAN_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/recipe/recipe.h"

namespace quant {

// ResolveLayerSettings fills every field from the recipe; the initialisers
// only keep a default-constructed value well defined.
struct LayerSettings {
  std::string name;  // "model.layers.0.mlp.down_proj"
  QuantMethod method = QuantMethod::kGptq;
  int bits = 4;
  int group_size = 128;
  QuantGrid grid = QuantGrid::kSym;
  DampValue damp;  // Auto picks from the recipe's damp.auto_grid.
  bool keep_unquantized = false;
  std::string reason;          // Why unquantized; empty when quantized.
  std::vector<int> overrides;  // Indices of the overrides that applied.
};

struct LayerPlan {
  std::vector<LayerSettings> layers;  // In the order of the names given.
  std::vector<std::string> warnings;  // "overrides[2]: ... matches no layer"
};

// Applies `recipe` (which must pass ValidateRecipe; bad patterns are
// reported as InvalidArgument naming the field) to `layer_names`.
absl::StatusOr<LayerPlan> ResolveLayerSettings(
    const Recipe& recipe, const std::vector<std::string>& layer_names);

}  // namespace quant

#endif  // QUANT_CORE_RECIPE_LAYER_PLAN_H_

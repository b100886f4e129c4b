// libFuzzer target: recipe texts of arbitrary bytes parse or are refused
// with an InvalidArgument error (no crash, no hang, no unbounded memory);
// a parsed recipe validates, its canonical JSON parses back to an equal
// recipe with identical text, and it resolves against a few layer names
// without crashing.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "core/recipe/layer_plan.h"
#include "core/recipe/recipe.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<quant::Recipe> recipe = quant::ParseRecipe(text, "fuzz");
  if (!recipe.ok()) {
    if (recipe.status().code() != absl::StatusCode::kInvalidArgument) {
      std::abort();
    }
    return 0;
  }
  if (!quant::ValidateRecipe(*recipe).ok()) std::abort();
  const std::string json = quant::RecipeToJson(*recipe);
  absl::StatusOr<quant::Recipe> again = quant::ParseRecipe(json, "canonical");
  if (!again.ok() || !(*again == *recipe)) std::abort();
  if (quant::RecipeToJson(*again) != json) std::abort();
  static const std::vector<std::string>* const kNames =
      new std::vector<std::string>{"model.embed_tokens",
                                   "model.layers.0.self_attn.q_proj",
                                   "model.layers.0.mlp.down_proj",
                                   "model.layers.1.mlp.up_proj", "lm_head"};
  // Conflicting overrides are an error; anything else must resolve.
  absl::StatusOr<quant::LayerPlan> plan =
      quant::ResolveLayerSettings(*recipe, *kNames);
  if (plan.ok() && plan->layers.size() != kNames->size()) std::abort();
  return 0;
}

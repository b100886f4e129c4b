// The checks behind ValidateRecipe, with the failing field's path kept apart
// from the problem, so that the parser can point at the field's line.
#ifndef QUANT_CORE_RECIPE_RECIPE_VALIDATION_H_
#define QUANT_CORE_RECIPE_RECIPE_VALIDATION_H_

#include <optional>
#include <string>

#include "core/recipe/recipe.h"

namespace quant {

struct RecipeFieldError {
  std::string path;     // "overrides[1].match", "calibration.samples".
  std::string problem;  // "5 is not supported (2, 3, 4, 8)".
};

// The first rule (see recipe.h) that `recipe` breaks, in field order.
std::optional<RecipeFieldError> FindRecipeError(const Recipe& recipe);

}  // namespace quant

#endif  // QUANT_CORE_RECIPE_RECIPE_VALIDATION_H_

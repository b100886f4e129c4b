// Conversion between the API's quant.v1.Recipe and core's quant::Recipe.
//
// Proto -> struct: enums left UNSPECIFIED and messages left unset (damp,
// calibration, gates) take quant::Recipe's defaults; an empty damp.auto_grid
// or awq_alpha_grid keeps the default grid. Every other field (bits,
// group_size, ignore, calibration.samples, ...) is taken as sent: proto3 has
// no presence for them, so a 0 is a 0 and ValidateRecipe judges it.
// Struct -> proto writes every field explicitly.
//
// Errors (InvalidArgument) name the field with a "recipe." prefix, e.g.
// "recipe.overrides[1].bits: 5 is not supported (2, 3, 4, 8)".
#ifndef QUANT_COMMON_RECIPE_CONVERT_H_
#define QUANT_COMMON_RECIPE_CONVERT_H_

#include "absl/status/statusor.h"
#include "core/recipe/recipe.h"
#include "quant/v1/recipe.pb.h"

namespace quant::common {

// Converts and validates (ValidateRecipe).
absl::StatusOr<Recipe> RecipeFromProto(const v1::Recipe& proto);

v1::Recipe RecipeToProto(const Recipe& recipe);

}  // namespace quant::common

#endif  // QUANT_COMMON_RECIPE_CONVERT_H_

// `quantctl recipe validate FILE`: checks a recipe locally, optionally prints
// its canonical JSON and the settings it gives each layer of a checkpoint.
#ifndef QUANT_CLIENT_RECIPE_COMMAND_H_
#define QUANT_CLIENT_RECIPE_COMMAND_H_

#include "client/command.h"

namespace quant {

Command RecipeCommand();

}  // namespace quant

#endif  // QUANT_CLIENT_RECIPE_COMMAND_H_

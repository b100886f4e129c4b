// SmallRtnRecipe; see small_recipe.h.
#include "bench/load/small_recipe.h"

namespace quant::load {

Recipe SmallRtnRecipe(int calibration_samples) {
  Recipe recipe;
  recipe.method = QuantMethod::kRtn;
  recipe.bits = 8;
  recipe.group_size = 0;
  recipe.propagation = Propagation::kIndependent;
  recipe.format = OutputFormat::kCompressedTensors;
  recipe.calibration.samples = calibration_samples;
  recipe.calibration.seq_len = 32;
  recipe.calibration.heldout_fraction = 0.25;
  return recipe;
}

}  // namespace quant::load

// The recipe of the small jobs the bench programs send to quantd (load
// test, bad-input table): RTN 8-bit per row on stories260K with a short
// calibration split, a few seconds of one worker.
#ifndef QUANT_BENCH_LOAD_SMALL_RECIPE_H_
#define QUANT_BENCH_LOAD_SMALL_RECIPE_H_

#include "core/recipe/recipe.h"

namespace quant::load {

// Sequences of 32 tokens, `calibration_samples` of them, a quarter held out.
Recipe SmallRtnRecipe(int calibration_samples);

}  // namespace quant::load

#endif  // QUANT_BENCH_LOAD_SMALL_RECIPE_H_

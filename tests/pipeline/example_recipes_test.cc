// Every recipe in recipes/ parses, validates and plans against stories260K,
// so the examples the README points to keep working.
#include <filesystem>

#include "core/model/model_config.h"
#include "core/pipeline/quantization_plan.h"
#include "core/recipe/recipe.h"
#include "gtest/gtest.h"
#include "tests/pipeline/pipeline_fixture.h"
#include "tests/support/test_env.h"

namespace quant {
namespace {

TEST(ExampleRecipesTest, EveryExampleParsesAndPlans) {
  QUANT_REQUIRE_SHARED(testing::Stories260KDir());
  auto config = LoadModelConfig(testing::Stories260KDir());
  ASSERT_TRUE(config.ok()) << config.status();
  const std::filesystem::path dir =
      std::filesystem::path(testing::FixturesDir()) / ".." / ".." / "recipes";
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".yaml") continue;
    ++count;
    auto recipe = LoadRecipe(entry.path().string());
    ASSERT_TRUE(recipe.ok()) << recipe.status();
    auto plan = PlanQuantization(*config, *recipe);
    EXPECT_TRUE(plan.ok()) << entry.path() << ": " << plan.status();
    // Example recipes set the gates a release needs.
    EXPECT_TRUE(recipe->gates.max_ppl_ratio.has_value()) << entry.path();
  }
  EXPECT_GE(count, 4);
}

}  // namespace
}  // namespace quant

// The job work model (work_model.h) counted by hand on a small config, how
// the recipe moves it, and the rate probe (rate_probe.h) on real kernels.
#include "core/estimate/work_model.h"

#include <cmath>

#include "core/base/thread_pool.h"
#include "core/estimate/rate_probe.h"
#include "core/model/model_config.h"
#include "core/pipeline/quantization_plan.h"
#include "gtest/gtest.h"

namespace quant {
namespace {

// hidden 64, intermediate 128, 4 heads of 16, 2 blocks: the linear layers
// are q, k, v, o (64x64), gate, up (128x64), down (64x128).
ModelConfig Tiny() {
  auto config = ParseModelConfig(R"({
    "architectures": ["LlamaForCausalLM"], "model_type": "llama",
    "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 4, "vocab_size": 100,
    "max_position_embeddings": 256})");
  EXPECT_TRUE(config.ok()) << config.status();
  return config.ok() ? *config : ModelConfig();
}

Recipe SmallRecipe() {
  Recipe recipe;
  recipe.group_size = 32;
  recipe.calibration.samples = 4;
  recipe.calibration.seq_len = 16;
  recipe.calibration.heldout_samples = 2;
  return recipe;
}

JobWork Work(const ModelConfig& config, const Recipe& recipe) {
  auto plan = PlanQuantization(config, recipe);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return plan.ok() ? EstimateJobWork(config, recipe, *plan) : JobWork();
}

TEST(WorkModelTest, FlopsCountedByHand) {
  const ModelConfig config = Tiny();
  // Linear: 2·(4·64·64 + 3·128·64) = 81920; attention: 4·4·16·(16+1)/2.
  EXPECT_DOUBLE_EQ(BlockForwardFlopsPerToken(config, 16),
                   81920.0 + 4.0 * 4 * 16 * 8.5);
  EXPECT_DOUBLE_EQ(HessianFlops(10, 4), 10.0 * 4 * 5);
  EXPECT_DOUBLE_EQ(GptqFlops(3, 4), 64.0 + 2.0 * 3 * 16);

  const Recipe recipe = SmallRecipe();
  const JobWork work = Work(config, recipe);
  EXPECT_EQ(work.calibration_tokens, 4 * 16);
  EXPECT_EQ(work.heldout_tokens, 2 * 16);
  ASSERT_EQ(work.blocks.size(), 2u);
  const double tokens = 64 + 32;
  const double per_token = BlockForwardFlopsPerToken(config, 16);
  // Two passes of the block, and three products per layer for the audit.
  EXPECT_DOUBLE_EQ(work.blocks[0].forward_flops,
                   2 * tokens * per_token + 3 * tokens * 81920.0);
  // One Hessian per input group: attn_in, attn_out, mlp_in (K = 64) and
  // mlp_out (K = 128), on the calibration tokens.
  EXPECT_DOUBLE_EQ(work.blocks[0].hessian_flops,
                   3 * HessianFlops(64, 64) + HessianFlops(64, 128));
  EXPECT_DOUBLE_EQ(
      work.blocks[0].gptq_flops,
      4 * GptqFlops(64, 64) + 2 * GptqFlops(128, 64) + GptqFlops(64, 128));
  // The gates: held-out tokens through both blocks and lm_head, twice.
  EXPECT_DOUBLE_EQ(work.finalize.forward_flops,
                   2 * 32 * (2 * per_token + 2.0 * 64 * 100));
  EXPECT_DOUBLE_EQ(work.Total().gptq_flops, 2 * work.blocks[0].gptq_flops);
}

TEST(WorkModelTest, RecipeMovesTheWork) {
  const ModelConfig config = Tiny();
  const JobWork gptq = Work(config, SmallRecipe());

  Recipe rtn = SmallRecipe();
  rtn.method = QuantMethod::kRtn;
  EXPECT_EQ(Work(config, rtn).blocks[0].gptq_flops, 0.0);

  Recipe awq = SmallRecipe();
  awq.method = QuantMethod::kAwq;
  EXPECT_GT(Work(config, awq).blocks[0].forward_flops,
            gptq.blocks[0].forward_flops);

  Recipe auto_damp = SmallRecipe();
  auto_damp.damp.automatic = true;
  EXPECT_DOUBLE_EQ(Work(config, auto_damp).blocks[0].gptq_flops,
                   gptq.blocks[0].gptq_flops *
                       static_cast<double>(auto_damp.damp.auto_grid.size()));

  Recipe kept = SmallRecipe();
  kept.ignore = {"lm_head", ".*mlp.*"};
  const JobWork attention_only = Work(config, kept);
  EXPECT_DOUBLE_EQ(attention_only.blocks[0].gptq_flops, 4 * GptqFlops(64, 64));
  EXPECT_LT(attention_only.blocks[0].hessian_flops,
            gptq.blocks[0].hessian_flops);

  Recipe longer = SmallRecipe();
  longer.calibration.samples = 8;
  EXPECT_GT(Work(config, longer).blocks[0].forward_flops,
            gptq.blocks[0].forward_flops);
}

TEST(WorkModelTest, SecondsAreEachKindOverItsRate) {
  TaskWork work;
  work.forward_flops = 4e9;
  work.hessian_flops = 1e9;
  work.gptq_flops = 3e9;
  WorkRates rates;
  EXPECT_FALSE(rates.known());
  rates.forward_flops_per_second = 2e9;
  rates.hessian_flops_per_second = 1e9;
  rates.gptq_flops_per_second = 3e9;
  ASSERT_TRUE(rates.known());
  EXPECT_DOUBLE_EQ(PredictSeconds(work, rates), 2.0 + 1.0 + 1.0);
}

// The probe runs the real kernels and reports positive, finite rates.
TEST(RateProbeTest, MeasuresEveryRate) {
  ThreadPool pool(2);
  auto rates = MeasureWorkRates(&pool);
  ASSERT_TRUE(rates.ok()) << rates.status();
  EXPECT_TRUE(rates->known());
  for (double rate :
       {rates->forward_flops_per_second, rates->hessian_flops_per_second,
        rates->gptq_flops_per_second}) {
    EXPECT_TRUE(std::isfinite(rate)) << rate;
    // Above 10 Mflop/s even under a sanitizer.
    EXPECT_GT(rate, 1e7);
  }
  auto inline_rates = MeasureWorkRates(nullptr);
  ASSERT_TRUE(inline_rates.ok()) << inline_rates.status();
  EXPECT_TRUE(inline_rates->known());
}

}  // namespace
}  // namespace quant

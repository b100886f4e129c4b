// The block task on a mixture-of-experts block of the qwen3_moe fixture
// (tests/fixtures/forward): attention quantized as for a dense block, then
// every expert on the MLP input; the experts' results, token counts and
// packed tensors; the block's output computed with what is stored; the
// same bytes on any thread count; the layer results through layers.json.
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "core/forward/block_forward.h"
#include "core/forward/block_weights.h"
#include "core/forward/llama_model.h"
#include "core/forward/rope.h"
#include "core/model/checkpoint.h"
#include "core/pipeline/block_task.h"
#include "core/pipeline/task_io.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/test_env.h"

namespace quant {
namespace {

using ::testing::HasSubstr;

constexpr int kSeqLen = 16;

LayerSettings Settings() {
  LayerSettings s;
  s.method = QuantMethod::kGptq;
  s.bits = 4;
  s.group_size = 16;
  s.damp.fraction = 0.01;
  return s;
}

class MoeBlockTaskTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto checkpoint =
        Checkpoint::Open(testing::FixturesDir() + "/forward/qwen3_moe");
    ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
    checkpoint_ = std::move(*checkpoint);
    auto model = LlamaModel::Load(*checkpoint_);
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = std::move(*model);
    recipe_.group_size = 16;
    recipe_.format = OutputFormat::kGptq;
  }

  // `sequences` random windows embedded: the states entering block 0.
  HiddenStates States(int sequences, uint32_t seed) const {
    std::mt19937 rng(seed);
    HiddenStates states;
    states.seq_len = kSeqLen;
    states.rows.resize(sequences * kSeqLen, model_->config().hidden_size);
    for (int s = 0; s < sequences; ++s) {
      std::vector<int32_t> ids(kSeqLen);
      for (int32_t& id : ids) {
        id = static_cast<int32_t>(rng() % model_->config().vocab_size);
      }
      states.rows.middleRows(s * kSeqLen, kSeqLen) = *model_->Embed(ids);
      states.lengths.push_back(kSeqLen);
    }
    return states;
  }

  BlockTaskInput Input(int threads = 1) const {
    BlockTaskInput input;
    input.config = &model_->config();
    input.recipe = &recipe_;
    input.weights = model_->block(0);
    for (LayerType type : {LayerType::kQProj, LayerType::kKProj,
                           LayerType::kVProj, LayerType::kOProj}) {
      input.settings[type] = Settings();
    }
    for (LayerType type :
         {LayerType::kGateProj, LayerType::kUpProj, LayerType::kDownProj}) {
      input.expert_settings[type] = Settings();
    }
    input.calibration = States(16, 1);
    input.heldout = States(4, 2);
    input.chunk_tokens = 64;
    input.threads = threads;
    return input;
  }

  std::unique_ptr<Checkpoint> checkpoint_;
  std::unique_ptr<LlamaModel> model_;
  Recipe recipe_;
};

TEST_F(MoeBlockTaskTest, QuantizesAttentionThenEveryExpert) {
  const BlockTaskInput input = Input();
  auto output = RunBlockTask(input);
  ASSERT_TRUE(output.ok()) << output.status();
  const ModelConfig& config = model_->config();
  const int experts = config.moe->num_experts;
  ASSERT_EQ(output->layers.size(), 4u + 3u * experts);
  EXPECT_EQ(output->layers[3].name, "model.layers.0.self_attn.o_proj");
  EXPECT_EQ(output->layers[4].name, "model.layers.0.mlp.experts.0.gate_proj");
  EXPECT_EQ(output->layers.back().name,
            "model.layers.0.mlp.experts.7.down_proj");
  // Natural routing: each token reaches top-k experts, and each expert
  // layer saw what the router sent it.
  const int64_t tokens = 16 * kSeqLen;
  ASSERT_EQ(output->routed_calibration_tokens.size(),
            static_cast<size_t>(experts));
  EXPECT_EQ(
      std::accumulate(output->routed_calibration_tokens.begin(),
                      output->routed_calibration_tokens.end(), int64_t{0}),
      config.moe->experts_per_token * tokens);
  for (size_t i = 4; i < output->layers.size(); ++i) {
    const LayerResult& r = output->layers[i];
    EXPECT_EQ(r.calibration_tokens, output->routed_calibration_tokens[r.expert])
        << r.name;
    EXPECT_EQ(r.heldout_tokens, output->routed_heldout_tokens[r.expert])
        << r.name;
    // Experts no calibration token reached are rounded to nearest.
    EXPECT_EQ(r.fallback, r.calibration_tokens == 0 ? "rtn" : "") << r.name;
  }
  // The router is stored as the source has it; every expert packed.
  std::vector<std::string> names;
  for (const PackedTensor& t : output->tensors) names.push_back(t.name);
  EXPECT_THAT(names, ::testing::Contains("model.layers.0.mlp.gate.weight"));
  EXPECT_THAT(names, ::testing::Contains(
                         "model.layers.0.mlp.experts.5.down_proj.qweight"));
  EXPECT_THAT(names, ::testing::Not(::testing::Contains(
                         "model.layers.0.mlp.experts.5.down_proj.weight")));
  // The effective experts are the quantized ones, and the block's output
  // is computed with them (sequential propagation).
  ASSERT_TRUE(output->effective.moe.has_value());
  EXPECT_TRUE(output->effective.moe->experts[2].up.weight.isApprox(
      output->layers[4 + 3 * 2 + 1].layer.dequantized));
  const RopeTable rope(config, kSeqLen);
  const RowMatrixF expected =
      RunBlock(config, output->effective, rope, kSeqLen, input.heldout.rows);
  EXPECT_TRUE(output->heldout_out.rows.isApprox(expected, 1e-6f));
}

TEST_F(MoeBlockTaskTest, SameBytesOnAnyThreadCount) {
  auto one = RunBlockTask(Input(1));
  auto two = RunBlockTask(Input(2));
  ASSERT_TRUE(one.ok() && two.ok());
  ASSERT_EQ(one->tensors.size(), two->tensors.size());
  for (size_t i = 0; i < one->tensors.size(); ++i) {
    EXPECT_EQ(one->tensors[i].name, two->tensors[i].name);
    EXPECT_EQ(one->tensors[i].bytes, two->tensors[i].bytes)
        << one->tensors[i].name;
  }
  EXPECT_EQ(one->calibration_out.rows, two->calibration_out.rows);
}

TEST_F(MoeBlockTaskTest, ExpertResultsSurviveTheTaskFiles) {
  BlockTaskInput input = Input();
  input.expert_policy.min_tokens_per_expert = 1000;  // Every expert starved.
  input.expert_policy.on_starved_expert = StarvedExpertAction::kRtn;
  auto output = RunBlockTask(input);
  ASSERT_TRUE(output.ok()) << output.status();
  EXPECT_EQ(output->starved_experts.size(), 8u);
  const std::string dir = testing::MakeTempDir();
  ASSERT_TRUE(WriteBlockOutput(dir, *output).ok());
  auto stored = ReadBlockOutput(dir, 0);
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_EQ(stored->routed_calibration_tokens,
            output->routed_calibration_tokens);
  EXPECT_EQ(stored->routed_heldout_tokens, output->routed_heldout_tokens);
  EXPECT_EQ(stored->starved_experts, output->starved_experts);
  ASSERT_EQ(stored->layers.size(), output->layers.size());
  const LayerResult& back = stored->layers[5];
  const LayerResult& original = output->layers[5];
  EXPECT_EQ(back.expert, 0);
  EXPECT_EQ(back.calibration_tokens, original.calibration_tokens);
  EXPECT_EQ(back.heldout_tokens, original.heldout_tokens);
  EXPECT_EQ(back.fallback, "rtn");
  EXPECT_THAT(back.fallback_reason, HasSubstr("moe.min_tokens_per_expert"));
  EXPECT_EQ(back.settings.method, QuantMethod::kRtn);
}

TEST_F(MoeBlockTaskTest, MismatchedWeightsAreRefused) {
  BlockTaskInput input = Input();
  input.weights.moe.reset();
  auto output = RunBlockTask(input);
  ASSERT_FALSE(output.ok());
  EXPECT_THAT(output.status().message(),
              HasSubstr("is a mixture of experts but its weights have no "
                        "experts"));
}

}  // namespace
}  // namespace quant

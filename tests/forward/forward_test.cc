// The forward pass against the original llama2.c implementation's outputs
// for stories260K (../shared/models/stories260K/reference.json).
#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "core/base/file_util.h"
#include "core/forward/block_forward.h"
#include "core/forward/llama_model.h"
#include "core/model/checkpoint.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/test_env.h"

namespace quant {
namespace {

using nlohmann::json;

class ForwardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_dir_ = testing::SharedPath("models/stories260K/hf-f32");
    QUANT_REQUIRE_SHARED(model_dir_);
    auto text = ReadFileToString(
        testing::SharedPath("models/stories260K/reference.json"));
    ASSERT_TRUE(text.ok()) << text.status();
    reference_ = json::parse(*text);
    auto checkpoint = Checkpoint::Open(model_dir_);
    ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
    auto model = LlamaModel::Load(**checkpoint);
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = std::move(*model);
  }

  std::vector<int32_t> Ids(const char* key) const {
    return reference_.at(key).get<std::vector<int32_t>>();
  }

  std::string model_dir_;
  json reference_;
  std::unique_ptr<LlamaModel> model_;
};

int ArgMax(const RowMatrixF& logits, Eigen::Index row) {
  Eigen::Index best;
  logits.row(row).maxCoeff(&best);
  return static_cast<int>(best);
}

TEST_F(ForwardTest, LastPositionTopFiveMatchesReference) {
  const std::vector<int32_t> ids = Ids("first_para_ids");
  auto logits = model_->Forward({ids});
  ASSERT_TRUE(logits.ok()) << logits.status();
  const Eigen::Index last = logits->rows() - 1;
  std::vector<int> order(logits->cols());
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(
      order.begin(), order.begin() + 5, order.end(),
      [&](int a, int b) { return (*logits)(last, a) > (*logits)(last, b); });
  const json& top5 = reference_.at("first_para_logits_last_pos_top5");
  ASSERT_EQ(top5.size(), 5u);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(order[i], top5[i][0].get<int>()) << "rank " << i;
    EXPECT_NEAR((*logits)(last, order[i]), top5[i][1].get<double>(), 1e-3)
        << "rank " << i;
  }
}

TEST_F(ForwardTest, GreedyDecodingMatchesReference) {
  const std::vector<int32_t> expected = Ids("greedy_from_bos_64");
  std::vector<int32_t> sequence = {expected[0]};  // BOS
  while (sequence.size() < expected.size()) {
    auto logits = model_->Forward({sequence});
    ASSERT_TRUE(logits.ok()) << logits.status();
    sequence.push_back(ArgMax(*logits, logits->rows() - 1));
  }
  EXPECT_EQ(sequence, expected);
}

TEST_F(ForwardTest, BatchedSequencesEqualSingleRuns) {
  const std::vector<int32_t> ids = Ids("first_para_ids");
  const std::vector<int32_t> a(ids.begin(), ids.begin() + 32);
  const std::vector<int32_t> b(ids.begin() + 32, ids.end());
  auto batched = model_->Forward({a, b});
  auto single_b = model_->Forward({b});
  ASSERT_TRUE(batched.ok() && single_b.ok());
  EXPECT_LT((batched->bottomRows(32) - *single_b).cwiseAbs().maxCoeff(), 1e-4);
}

TEST_F(ForwardTest, StagesComposeToRunBlock) {
  const std::vector<int32_t> ids = Ids("prompt_ids_with_bos");
  auto hidden = model_->Embed(ids);
  ASSERT_TRUE(hidden.ok());
  const ModelConfig& config = model_->config();
  const RopeTable rope(config, 16);
  const BlockWeights& block = model_->block(2);
  const int seq_len = static_cast<int>(ids.size());
  const RowMatrixF x = AttentionInput(config, block, *hidden);
  const RowMatrixF context = AttentionContext(config, block, rope, seq_len, x);
  const RowMatrixF residual = AttentionResidual(block, *hidden, context);
  const RowMatrixF mlp_hidden =
      MlpHidden(block, MlpInput(config, block, residual));
  EXPECT_EQ(context.cols(), config.q_size());
  EXPECT_EQ(mlp_hidden.cols(), config.intermediate_size);
  const RowMatrixF staged = MlpResidual(block, residual, mlp_hidden);
  const RowMatrixF whole = RunBlock(config, block, rope, seq_len, *hidden);
  EXPECT_EQ((staged - whole).cwiseAbs().maxCoeff(), 0.0f);
}

TEST_F(ForwardTest, ReplacedWeightsChangeTheOutput) {
  const std::vector<int32_t> ids = Ids("prompt_ids_with_bos");
  auto before = model_->Forward({ids});
  model_->mutable_block(0)->linear[LayerType::kDownProj].weight.setZero();
  auto after = model_->Forward({ids});
  ASSERT_TRUE(before.ok() && after.ok());
  EXPECT_GT((*before - *after).cwiseAbs().maxCoeff(), 1e-3);
}

TEST_F(ForwardTest, OutOfVocabularyIdIsRejected) {
  auto logits = model_->Forward({{1, 512}});
  ASSERT_FALSE(logits.ok());
  EXPECT_NE(logits.status().message().find("512"), std::string::npos);
  EXPECT_FALSE(model_->Forward({{1, 2}, {3}}).ok());  // Ragged batch.
}

TEST(ForwardBf16Test, Bf16CheckpointAgreesOnGreedyPrefix) {
  const std::string dir = testing::SharedPath("models/stories260K/hf-bf16");
  QUANT_REQUIRE_SHARED(dir);
  auto checkpoint = Checkpoint::Open(dir);
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  auto model = LlamaModel::Load(**checkpoint);
  ASSERT_TRUE(model.ok()) << model.status();
  // "Once upon a time" with BOS: the next token under bf16 weights is the
  // same as under f32 (the reference's greedy continuation).
  auto logits = (*model)->Forward({{1, 403, 407, 261, 378}});
  ASSERT_TRUE(logits.ok());
  EXPECT_EQ(ArgMax(*logits, logits->rows() - 1), 432);
}

}  // namespace
}  // namespace quant

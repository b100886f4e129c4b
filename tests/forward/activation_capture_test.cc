// Tests for capturing a linear layer's inputs.
#include "core/forward/activation_capture.h"

#include "core/forward/block_forward.h"
#include "core/model/checkpoint.h"
#include "gtest/gtest.h"
#include "tests/support/test_env.h"

namespace quant {
namespace {

class ActivationCaptureTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string dir = testing::SharedPath("models/stories260K/hf-f32");
    QUANT_REQUIRE_SHARED(dir);
    auto checkpoint = Checkpoint::Open(dir);
    ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
    auto model = LlamaModel::Load(**checkpoint);
    ASSERT_TRUE(model.ok());
    model_ = std::move(*model);
    layers_ = ListAllLinearLayers(model_->config());
  }

  const LinearLayerSpec& Layer(int block, const std::string& type) {
    for (const auto& spec : layers_) {
      if (spec.block == block && spec.type_name() == type) return spec;
    }
    ADD_FAILURE() << "no layer " << type;
    return layers_[0];
  }

  std::unique_ptr<LlamaModel> model_;
  std::vector<LinearLayerSpec> layers_;
};

TEST_F(ActivationCaptureTest, FirstAttentionInputIsNormalisedEmbedding) {
  TokenWindows windows;
  windows.seq_len = 5;
  windows.sequences = {{1, 403, 407, 261, 378}};
  windows.lengths = {5};
  auto captured = CaptureLayerInputs(*model_, Layer(0, "k_proj"), windows);
  ASSERT_TRUE(captured.ok()) << captured.status();
  auto embedded = model_->Embed(windows.sequences[0]);
  ASSERT_TRUE(embedded.ok());
  const RowMatrixF expected =
      AttentionInput(model_->config(), model_->block(0), *embedded);
  EXPECT_EQ((*captured - expected).cwiseAbs().maxCoeff(), 0.0f);
}

TEST_F(ActivationCaptureTest, PaddingIsLeftOutAndDoesNotLeakIntoRealRows) {
  const std::vector<int32_t> ids = {1, 403, 407, 261, 378, 432};
  TokenWindows exact;
  exact.seq_len = 6;
  exact.sequences = {ids};
  exact.lengths = {6};
  TokenWindows padded;
  padded.seq_len = 9;
  padded.sequences = {{1, 403, 407, 261, 378, 432, 2, 2, 2}, ids};
  padded.sequences[1].resize(9, 0);
  padded.lengths = {6, 6};
  const LinearLayerSpec& down = Layer(3, "down_proj");
  auto a = CaptureLayerInputs(*model_, down, exact);
  auto b = CaptureLayerInputs(*model_, down, padded);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->rows(), 6);
  ASSERT_EQ(b->rows(), 12);
  EXPECT_EQ(a->cols(), model_->config().intermediate_size);
  // Causal attention: padding after the real tokens changes nothing.
  EXPECT_LT((b->topRows(6) - *a).cwiseAbs().maxCoeff(), 1e-5);
  EXPECT_LT((b->bottomRows(6) - *a).cwiseAbs().maxCoeff(), 1e-5);
}

TEST_F(ActivationCaptureTest, BlockOutsideModelIsAnError) {
  LinearLayerSpec spec = Layer(0, "q_proj");
  spec.block = 99;
  TokenWindows windows;
  windows.seq_len = 2;
  windows.sequences = {{1, 2}};
  windows.lengths = {2};
  EXPECT_FALSE(CaptureLayerInputs(*model_, spec, windows).ok());
}

}  // namespace
}  // namespace quant

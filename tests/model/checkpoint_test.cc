// Tests of Checkpoint::Open: the real stories260K checkpoints, and synthetic
// ones with missing, misshapen, extra and non-finite tensors.
#include "core/model/checkpoint.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/model/tiny_checkpoint.h"
#include "tests/support/test_env.h"

namespace quant {
namespace {

using ::quant::testing::TinyLlamaConfigJson;
using ::quant::testing::TinyTensor;
using ::testing::HasSubstr;

TinyTensor* FindTensor(std::vector<TinyTensor>& tensors,
                       const std::string& name) {
  for (TinyTensor& tensor : tensors) {
    if (tensor.name == name) return &tensor;
  }
  ADD_FAILURE() << "no tensor " << name;
  return nullptr;
}

TEST(CheckpointTest, OpensStories260KInBothDtypes) {
  for (const char* variant : {"hf-f32", "hf-bf16"}) {
    SCOPED_TRACE(variant);
    const std::string dir = quant::testing::SharedPath(
        std::string("models/stories260K/") + variant);
    QUANT_REQUIRE_SHARED(dir);
    CheckpointOptions options;
    options.check_finite = true;
    absl::StatusOr<std::unique_ptr<Checkpoint>> checkpoint =
        Checkpoint::Open(dir, options);
    ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
    EXPECT_EQ((*checkpoint)->directory(), dir);
    EXPECT_EQ((*checkpoint)->config().num_hidden_layers, 5);
    EXPECT_TRUE((*checkpoint)->unexpected_tensors().empty());
    EXPECT_FALSE((*checkpoint)->tensors().sharded());
    // Tied: 1 embedding + 5 * (2 norms + 7 linears) + final norm.
    EXPECT_EQ((*checkpoint)->expected_tensors().size(), 1u + 5u * 9u + 1u);
    absl::StatusOr<FloatTensor> down =
        (*checkpoint)->ReadFloat("model.layers.4.mlp.down_proj.weight");
    ASSERT_TRUE(down.ok()) << down.status();
    EXPECT_EQ(down->ShapeString(), "[64, 172]");
  }
}

TEST(CheckpointTest, OpensValidSyntheticCheckpoint) {
  const std::string dir = quant::testing::MakeTempDir();
  ASSERT_TRUE(quant::testing::WriteCheckpoint(
                  dir, TinyLlamaConfigJson(),
                  quant::testing::TensorsFor(TinyLlamaConfigJson()))
                  .ok());
  absl::StatusOr<std::unique_ptr<Checkpoint>> checkpoint =
      Checkpoint::Open(dir);
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  EXPECT_TRUE((*checkpoint)->CheckAllFinite().ok());
}

TEST(CheckpointTest, OpensShardedCheckpoint) {
  const std::string dir = quant::testing::MakeTempDir();
  ASSERT_TRUE(quant::testing::WriteShardedCheckpoint(
                  dir, TinyLlamaConfigJson(),
                  quant::testing::TensorsFor(TinyLlamaConfigJson()))
                  .ok());
  absl::StatusOr<std::unique_ptr<Checkpoint>> checkpoint =
      Checkpoint::Open(dir);
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  EXPECT_TRUE((*checkpoint)->tensors().sharded());
  EXPECT_EQ((*checkpoint)->tensors().files().size(), 2u);
}

TEST(CheckpointTest, MissingTensorIsNamed) {
  const std::string dir = quant::testing::MakeTempDir();
  std::vector<TinyTensor> tensors =
      quant::testing::TensorsFor(TinyLlamaConfigJson());
  const std::string missing = "model.layers.1.mlp.up_proj.weight";
  tensors.erase(
      std::remove_if(tensors.begin(), tensors.end(),
                     [&](const TinyTensor& t) { return t.name == missing; }),
      tensors.end());
  ASSERT_TRUE(
      quant::testing::WriteCheckpoint(dir, TinyLlamaConfigJson(), tensors)
          .ok());
  absl::StatusOr<std::unique_ptr<Checkpoint>> checkpoint =
      Checkpoint::Open(dir);
  ASSERT_FALSE(checkpoint.ok());
  EXPECT_EQ(checkpoint.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(checkpoint.status().message(), HasSubstr(dir));
  EXPECT_THAT(
      checkpoint.status().message(),
      HasSubstr("missing tensor \"" + missing + "\" (expected shape [12, 8])"));
}

TEST(CheckpointTest, WrongShapeIsNamedWithBothShapes) {
  const std::string dir = quant::testing::MakeTempDir();
  std::vector<TinyTensor> tensors =
      quant::testing::TensorsFor(TinyLlamaConfigJson());
  // k_proj sized as if there were 2 KV heads instead of 1.
  TinyTensor* k_proj =
      FindTensor(tensors, "model.layers.0.self_attn.k_proj.weight");
  ASSERT_NE(k_proj, nullptr);
  k_proj->shape = {8, 8};
  ASSERT_TRUE(
      quant::testing::WriteCheckpoint(dir, TinyLlamaConfigJson(), tensors)
          .ok());
  absl::StatusOr<std::unique_ptr<Checkpoint>> checkpoint =
      Checkpoint::Open(dir);
  ASSERT_FALSE(checkpoint.ok());
  EXPECT_THAT(checkpoint.status().message(),
              HasSubstr("tensor \"model.layers.0.self_attn.k_proj.weight\" "
                        "has shape [8, 8], expected [4, 8]"));
}

TEST(CheckpointTest, IntegerWeightIsRejected) {
  const std::string dir = quant::testing::MakeTempDir();
  std::vector<TinyTensor> tensors =
      quant::testing::TensorsFor(TinyLlamaConfigJson());
  FindTensor(tensors, "model.norm.weight")->dtype = DType::kI32;
  ASSERT_TRUE(
      quant::testing::WriteCheckpoint(dir, TinyLlamaConfigJson(), tensors)
          .ok());
  absl::StatusOr<std::unique_ptr<Checkpoint>> checkpoint =
      Checkpoint::Open(dir);
  ASSERT_FALSE(checkpoint.ok());
  EXPECT_THAT(checkpoint.status().message(),
              HasSubstr("tensor \"model.norm.weight\" has dtype I32"));
}

TEST(CheckpointTest, ExtraTensorsAreListedNotRejected) {
  const std::string dir = quant::testing::MakeTempDir();
  std::vector<TinyTensor> tensors =
      quant::testing::TensorsFor(TinyLlamaConfigJson());
  tensors.push_back(
      {"model.layers.0.self_attn.rotary_emb.inv_freq", {2}, DType::kF32, {}});
  ASSERT_TRUE(
      quant::testing::WriteCheckpoint(dir, TinyLlamaConfigJson(), tensors)
          .ok());
  absl::StatusOr<std::unique_ptr<Checkpoint>> checkpoint =
      Checkpoint::Open(dir);
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  EXPECT_THAT(
      (*checkpoint)->unexpected_tensors(),
      ::testing::ElementsAre("model.layers.0.self_attn.rotary_emb.inv_freq"));
}

TEST(CheckpointTest, NanWeightIsFoundWithItsIndex) {
  const std::string dir = quant::testing::MakeTempDir();
  std::vector<TinyTensor> tensors =
      quant::testing::TensorsFor(TinyLlamaConfigJson());
  const std::string name = "model.layers.1.self_attn.o_proj.weight";
  TinyTensor* o_proj = FindTensor(tensors, name);
  ASSERT_NE(o_proj, nullptr);
  o_proj->values.assign(8 * 8, 0.5f);
  o_proj->values[2 * 8 + 5] = std::numeric_limits<float>::quiet_NaN();
  o_proj->values[7 * 8 + 1] = std::numeric_limits<float>::infinity();
  ASSERT_TRUE(
      quant::testing::WriteCheckpoint(dir, TinyLlamaConfigJson(), tensors)
          .ok());

  absl::StatusOr<std::unique_ptr<Checkpoint>> checkpoint =
      Checkpoint::Open(dir);
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  EXPECT_TRUE((*checkpoint)->CheckFinite("model.norm.weight").ok());
  const absl::Status status = (*checkpoint)->CheckFinite(name);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(),
              HasSubstr("tensor \"" + name + "\" has NaN at index [2, 5]"));
  EXPECT_THAT(status.message(), HasSubstr("element 21 of 64"));
  EXPECT_EQ((*checkpoint)->CheckFinite("no.such.tensor").code(),
            absl::StatusCode::kNotFound);

  CheckpointOptions options;
  options.check_finite = true;
  absl::StatusOr<std::unique_ptr<Checkpoint>> checked =
      Checkpoint::Open(dir, options);
  ASSERT_FALSE(checked.ok());
  EXPECT_THAT(checked.status().message(), HasSubstr(name));
}

TEST(CheckpointTest, InfinityInBf16IsFound) {
  const std::string dir = quant::testing::MakeTempDir();
  std::vector<TinyTensor> tensors =
      quant::testing::TensorsFor(TinyLlamaConfigJson());
  TinyTensor* embed = FindTensor(tensors, "model.embed_tokens.weight");
  ASSERT_NE(embed, nullptr);
  embed->dtype = DType::kBF16;
  embed->values.assign(16 * 8, -1.0f);
  embed->values[3 * 8] = -std::numeric_limits<float>::infinity();
  ASSERT_TRUE(
      quant::testing::WriteCheckpoint(dir, TinyLlamaConfigJson(), tensors)
          .ok());
  absl::StatusOr<std::unique_ptr<Checkpoint>> checkpoint =
      Checkpoint::Open(dir);
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  const absl::Status status = (*checkpoint)->CheckAllFinite();
  EXPECT_THAT(status.message(),
              HasSubstr("\"model.embed_tokens.weight\" has infinity at index "
                        "[3, 0]"));
}

TEST(CheckpointTest, QuantizedCheckpointIsRefused) {
  const std::string dir = quant::testing::MakeTempDir();
  std::string config = TinyLlamaConfigJson();
  config.insert(config.rfind('}'),
                R"(, "quantization_config": {"quant_method": "gptq"})");
  ASSERT_TRUE(
      quant::testing::WriteCheckpoint(
          dir, config, quant::testing::TensorsFor(TinyLlamaConfigJson()))
          .ok());
  absl::StatusOr<std::unique_ptr<Checkpoint>> checkpoint =
      Checkpoint::Open(dir);
  ASSERT_FALSE(checkpoint.ok());
  EXPECT_EQ(checkpoint.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(checkpoint.status().message(), HasSubstr("already quantized"));
}

TEST(CheckpointTest, MissingDirectoryAndMissingWeights) {
  const std::string dir = quant::testing::MakeTempDir();
  absl::StatusOr<std::unique_ptr<Checkpoint>> checkpoint =
      Checkpoint::Open(dir + "/absent");
  ASSERT_FALSE(checkpoint.ok());
  EXPECT_EQ(checkpoint.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(checkpoint.status().message(), HasSubstr(dir + "/absent"));

  // A config.json but no safetensors at all.
  ASSERT_TRUE(quant::testing::WriteCheckpoint(
                  dir, TinyLlamaConfigJson(),
                  quant::testing::TensorsFor(TinyLlamaConfigJson()))
                  .ok());
  ASSERT_EQ(std::remove((dir + "/model.safetensors").c_str()), 0);
  checkpoint = Checkpoint::Open(dir);
  ASSERT_FALSE(checkpoint.ok());
  EXPECT_THAT(checkpoint.status().message(), HasSubstr("model.safetensors"));
}

}  // namespace
}  // namespace quant

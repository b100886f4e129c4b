// Tests for LoadBlockWeights on a packed checkpoint: a tiny Llama with
// attention biases whose q_proj and k_proj are stored as compressed-tensors
// pack-quantized layers. Packed layers are dequantized (fp16 scales), keep
// their float biases, and the plain layers read as before.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/base/file_util.h"
#include "core/forward/block_weights.h"
#include "core/io/safetensors.h"
#include "core/model/checkpoint.h"
#include "core/model/linear_layers.h"
#include "core/pack/checkpoint_config.h"
#include "core/pack/compressed_tensors_format.h"
#include "core/pack/packed_tensor.h"
#include "core/quant/rtn.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/model/tiny_checkpoint.h"
#include "tests/support/test_env.h"

namespace quant {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kQ[] = "model.layers.1.self_attn.q_proj";
constexpr char kK[] = "model.layers.1.self_attn.k_proj";

class PackedBlockWeightsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    nlohmann::json config =
        nlohmann::json::parse(::quant::testing::TinyLlamaConfigJson());
    config["attention_bias"] = true;
    config_json_ = config.dump();
    const std::string plain_dir = ::quant::testing::MakeTempDir();
    ASSERT_TRUE(
        ::quant::testing::WriteCheckpoint(
            plain_dir, config_json_, ::quant::testing::TensorsFor(config_json_))
            .ok());
    absl::StatusOr<std::unique_ptr<Checkpoint>> plain =
        Checkpoint::Open(plain_dir);
    ASSERT_TRUE(plain.ok()) << plain.status();
    plain_ = *std::move(plain);
    absl::StatusOr<BlockWeights> block = LoadBlockWeights(*plain_, 1);
    ASSERT_TRUE(block.ok()) << block.status();
    plain_block_ = *std::move(block);
  }

  // Writes a checkpoint with q_proj and k_proj of block 1 packed (asymmetric
  // 8-bit per row) and, when `keep_plain_q`, q_proj's .weight as well.
  // Returns its directory; expected_ gets the weights it dequantizes to.
  std::string WritePacked(bool keep_plain_q) {
    std::vector<PackedTensor> packed;
    GridSpec grid;
    grid.kind = GridKind::kAsym;
    grid.bits = 8;
    for (const char* name : {kQ, kK}) {
      const LinearWeights& linear = plain_block_.Linear(*LayerTypeFromName(
          std::string(name).substr(std::string(name).rfind('.') + 1)));
      absl::StatusOr<QuantizedLayer> layer =
          QuantizeRtn(linear.weight, grid, name);
      EXPECT_TRUE(layer.ok()) << layer.status();
      absl::StatusOr<PackedCompressedTensorsLayer> ct =
          PackCompressedTensors(*layer, name);
      EXPECT_TRUE(ct.ok()) << ct.status();
      for (PackedTensor& tensor : CompressedTensorsLayerTensors(*ct)) {
        packed.push_back(std::move(tensor));
      }
      RowMatrixF expected(layer->rows, layer->cols);
      for (int64_t r = 0; r < layer->rows; ++r) {
        for (int64_t c = 0; c < layer->cols; ++c) {
          expected(r, c) =
              RoundTripThrough(layer->scales(0, r), DType::kF16) *
              (static_cast<float>(layer->codes(r, c)) - layer->zeros(0, r));
        }
      }
      expected_[name] = expected;
    }
    std::vector<TensorToWrite> to_write = AsTensorsToWrite(packed);
    for (const TensorCollection::Entry& entry : plain_->tensors().Entries()) {
      const std::string& name = entry.info->name;
      if (name == std::string(kK) + ".weight") continue;
      if (name == std::string(kQ) + ".weight" && !keep_plain_q) continue;
      const absl::Span<const uint8_t> bytes = entry.file->RawBytes(*entry.info);
      to_write.push_back(
          {name, entry.info->dtype, entry.info->shape,
           absl::string_view(reinterpret_cast<const char*>(bytes.data()),
                             bytes.size())});
    }
    const std::string dir = ::quant::testing::MakeTempDir();
    EXPECT_TRUE(WriteSafetensors(dir + "/model.safetensors", to_write).ok());
    CompressedTensorsConfigOptions options;
    options.bits = 8;
    options.symmetric = false;
    for (const LinearLayerSpec& spec : ListAllLinearLayers(plain_->config())) {
      if (spec.name != kQ && spec.name != kK)
        options.ignore.push_back(spec.name);
    }
    absl::StatusOr<std::string> config = WithQuantizationConfig(
        config_json_, *CompressedTensorsQuantizationConfig(options));
    EXPECT_TRUE(config.ok()) << config.status();
    EXPECT_TRUE(WriteFileAtomically(dir + "/config.json", *config).ok());
    return dir;
  }

  std::string config_json_;
  std::unique_ptr<Checkpoint> plain_;
  BlockWeights plain_block_;
  std::map<std::string, RowMatrixF> expected_;
};

TEST_F(PackedBlockWeightsTest, PackedLayersDequantizeAndKeepBiases) {
  const std::string dir = WritePacked(/*keep_plain_q=*/false);
  CheckpointOptions options;
  options.allow_packed = true;
  options.check_finite = true;
  absl::StatusOr<std::unique_ptr<Checkpoint>> checkpoint =
      Checkpoint::Open(dir, options);
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  EXPECT_THAT((*checkpoint)->packed_layers(), ElementsAre(kQ, kK));
  EXPECT_TRUE((*checkpoint)->IsPacked(kQ));
  EXPECT_FALSE((*checkpoint)->IsPacked("model.layers.1.self_attn.v_proj"));
  EXPECT_THAT((*checkpoint)->unexpected_tensors(), ::testing::IsEmpty());
  for (const ExpectedTensor& expected : (*checkpoint)->expected_tensors()) {
    EXPECT_NE(expected.name, std::string(kQ) + ".weight");
  }

  absl::StatusOr<BlockWeights> block = LoadBlockWeights(**checkpoint, 1);
  ASSERT_TRUE(block.ok()) << block.status();
  for (const LayerType type : {LayerType::kQProj, LayerType::kKProj}) {
    const std::string name =
        absl::StrCat("model.layers.1.self_attn.", LayerTypeName(type));
    SCOPED_TRACE(name);
    const LinearWeights& linear = block->Linear(type);
    EXPECT_EQ(linear.weight, expected_[name]);
    // 8-bit RTN: close to the floats, and not equal to them.
    EXPECT_LT((linear.weight - plain_block_.Linear(type).weight)
                  .cwiseAbs()
                  .maxCoeff(),
              0.05f);
    EXPECT_NE(linear.weight, plain_block_.Linear(type).weight);
    ASSERT_GT(linear.bias.size(), 0);
    EXPECT_EQ(linear.bias, plain_block_.Linear(type).bias);
  }
  for (const LayerType type :
       {LayerType::kVProj, LayerType::kOProj, LayerType::kGateProj,
        LayerType::kUpProj, LayerType::kDownProj}) {
    EXPECT_EQ(block->Linear(type).weight, plain_block_.Linear(type).weight)
        << LayerTypeName(type);
  }
  // Block 0 has no packed layer and reads exactly as from the plain file.
  absl::StatusOr<BlockWeights> block0 = LoadBlockWeights(**checkpoint, 0);
  absl::StatusOr<BlockWeights> plain0 = LoadBlockWeights(*plain_, 0);
  ASSERT_TRUE(block0.ok() && plain0.ok());
  EXPECT_EQ(block0->Linear(LayerType::kQProj).weight,
            plain0->Linear(LayerType::kQProj).weight);
}

TEST_F(PackedBlockWeightsTest, LayerStoredTwiceIsRefused) {
  const std::string dir = WritePacked(/*keep_plain_q=*/true);
  CheckpointOptions options;
  options.allow_packed = true;
  absl::StatusOr<std::unique_ptr<Checkpoint>> checkpoint =
      Checkpoint::Open(dir, options);
  ASSERT_FALSE(checkpoint.ok());
  EXPECT_THAT(
      checkpoint.status().message(),
      HasSubstr(std::string("linear layer ") + kQ + " is stored twice"));
}

}  // namespace
}  // namespace quant

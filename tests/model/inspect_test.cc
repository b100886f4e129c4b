// Tests of the inspect report: stories260K in f32 and bf16, packing fit
// rules, and sharded checkpoints.
#include "core/model/inspect.h"

#include <filesystem>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/model/tiny_checkpoint.h"
#include "tests/support/test_env.h"

namespace quant {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using json = nlohmann::json;

std::unique_ptr<Checkpoint> OpenOrDie(const std::string& dir) {
  absl::StatusOr<std::unique_ptr<Checkpoint>> checkpoint =
      Checkpoint::Open(dir);
  EXPECT_TRUE(checkpoint.ok()) << checkpoint.status();
  return checkpoint.ok() ? std::move(checkpoint).value() : nullptr;
}

// The report with everything that depends on the stored dtype removed.
json WithoutDtypeAndSize(json report) {
  report.erase("directory");
  report.erase("size_on_disk_bytes");
  report.erase("tensors_by_dtype");
  report["config"].erase("torch_dtype");
  for (json& file : report["files"]) file.erase("size_bytes");
  for (json& tensor : report["tensors"]) tensor.erase("dtype");
  return report;
}

TEST(GptqPackingTest, FitsWhenBitsTimesWidthFillWords) {
  // 4 bits: 8 codes per int32, so K and N must be multiples of 8.
  EXPECT_TRUE(CheckGptqPacking(4096, 11008, 4).fits());
  const GptqPackingFit down = CheckGptqPacking(64, 172, 4);
  EXPECT_FALSE(down.qweight_fits);  // 172 is not a multiple of 8.
  EXPECT_TRUE(down.qzeros_fits);
  const GptqPackingFit gate = CheckGptqPacking(172, 64, 4);
  EXPECT_TRUE(gate.qweight_fits);
  EXPECT_FALSE(gate.qzeros_fits);
  // 3 bits: 32 codes fill 3 words, so multiples of 32.
  EXPECT_TRUE(CheckGptqPacking(64, 64, 3).fits());
  EXPECT_FALSE(CheckGptqPacking(64, 48, 3).qweight_fits);
  // 8 bits: 4 codes per word; 172 = 4 * 43.
  EXPECT_TRUE(CheckGptqPacking(172, 172, 8).fits());
  // 2 bits: 16 codes per word.
  EXPECT_FALSE(CheckGptqPacking(64, 40, 2).qweight_fits);
}

TEST(InspectTest, Stories260KFigures) {
  const std::string dir =
      quant::testing::SharedPath("models/stories260K/hf-f32");
  QUANT_REQUIRE_SHARED(dir);
  std::unique_ptr<Checkpoint> checkpoint = OpenOrDie(dir);
  ASSERT_NE(checkpoint, nullptr);
  const InspectReport report = BuildInspectReport(*checkpoint);
  EXPECT_EQ(report.architecture, "LlamaForCausalLM");
  EXPECT_EQ(report.num_blocks, 5);
  EXPECT_FALSE(report.sharded);
  // Parameter count from the README's dims (dim 64, hidden 172, 5 layers,
  // 8 heads and 4 KV heads of 8, vocab 512, tied embeddings).
  const int64_t d = 64, f = 172, v = 512, kv = 4 * 8;
  const int64_t per_block = 2 * d + d * d + 2 * kv * d + d * d + 3 * d * f;
  EXPECT_EQ(report.num_parameters, v * d + 5 * per_block + d);
  const uint64_t file_size =
      std::filesystem::file_size(dir + "/model.safetensors");
  EXPECT_EQ(report.size_on_disk_bytes, file_size);
  ASSERT_EQ(report.files.size(), 1u);
  EXPECT_EQ(report.files[0].name, "model.safetensors");
  EXPECT_EQ(report.tensors.size(), 47u);
  EXPECT_EQ(report.tensors_by_dtype.at("F32"), 47);

  ASSERT_EQ(report.linear_layers.size(), 35u);
  for (const InspectLinearLayer& layer : report.linear_layers) {
    SCOPED_TRACE(layer.spec.name);
    ASSERT_EQ(layer.gptq.size(), 4u);
    const GptqPackingFit& four_bit = layer.gptq[2];
    ASSERT_EQ(four_bit.bits, 4);
    if (layer.spec.type == LayerType::kDownProj) {
      EXPECT_FALSE(four_bit.qweight_fits);
      EXPECT_TRUE(four_bit.qzeros_fits);
      EXPECT_TRUE(layer.group_sizes_dividing_k.empty());
    } else if (layer.spec.type == LayerType::kGateProj ||
               layer.spec.type == LayerType::kUpProj) {
      EXPECT_TRUE(four_bit.qweight_fits);
      EXPECT_FALSE(four_bit.qzeros_fits);
      EXPECT_THAT(layer.group_sizes_dividing_k, ElementsAre(32, 64));
    } else {
      EXPECT_TRUE(four_bit.fits());
      EXPECT_THAT(layer.group_sizes_dividing_k, ElementsAre(32, 64));
    }
  }

  const std::string text = RenderInspectText(report);
  EXPECT_THAT(text, HasSubstr("LlamaForCausalLM"));
  EXPECT_THAT(text, HasSubstr("hidden 64, intermediate 172, heads 8, kv heads "
                              "4, head_dim 8, vocab 512, layers 5"));
  EXPECT_THAT(text, HasSubstr("none (per-channel only)"));
  EXPECT_THAT(text, HasSubstr("model.layers.4.mlp.down_proj.weight"));
}

TEST(InspectTest, F32AndBf16DifferOnlyInDtypeAndSize) {
  const std::string f32_dir =
      quant::testing::SharedPath("models/stories260K/hf-f32");
  const std::string bf16_dir =
      quant::testing::SharedPath("models/stories260K/hf-bf16");
  QUANT_REQUIRE_SHARED(f32_dir);
  QUANT_REQUIRE_SHARED(bf16_dir);
  std::unique_ptr<Checkpoint> f32 = OpenOrDie(f32_dir);
  std::unique_ptr<Checkpoint> bf16 = OpenOrDie(bf16_dir);
  ASSERT_NE(f32, nullptr);
  ASSERT_NE(bf16, nullptr);
  const json f32_json = InspectToJson(BuildInspectReport(*f32));
  const json bf16_json = InspectToJson(BuildInspectReport(*bf16));
  EXPECT_EQ(WithoutDtypeAndSize(f32_json), WithoutDtypeAndSize(bf16_json));
  EXPECT_EQ(bf16_json["tensors_by_dtype"], json({{"BF16", 47}}));
  EXPECT_EQ(bf16_json["config"]["torch_dtype"], "bfloat16");
  EXPECT_EQ(bf16_json["size_on_disk_bytes"].get<uint64_t>(),
            std::filesystem::file_size(bf16_dir + "/model.safetensors"));
  EXPECT_LT(bf16_json["size_on_disk_bytes"].get<uint64_t>(),
            f32_json["size_on_disk_bytes"].get<uint64_t>());
}

TEST(InspectTest, JsonHasEveryLayerAndTensor) {
  const std::string dir = quant::testing::MakeTempDir();
  std::vector<quant::testing::TinyTensor> tensors =
      quant::testing::TensorsFor(quant::testing::TinyLlamaConfigJson());
  tensors.push_back({"model.rotary_emb.inv_freq", {2}, DType::kF32, {}});
  ASSERT_TRUE(quant::testing::WriteShardedCheckpoint(
                  dir, quant::testing::TinyLlamaConfigJson(), tensors)
                  .ok());
  std::unique_ptr<Checkpoint> checkpoint = OpenOrDie(dir);
  ASSERT_NE(checkpoint, nullptr);
  const InspectReport report = BuildInspectReport(*checkpoint);
  EXPECT_TRUE(report.sharded);
  ASSERT_EQ(report.files.size(), 2u);
  EXPECT_EQ(report.files[0].name, "model-00001-of-00002.safetensors");
  EXPECT_EQ(report.size_on_disk_bytes,
            std::filesystem::file_size(dir + "/" + report.files[0].name) +
                std::filesystem::file_size(dir + "/" + report.files[1].name));
  // The unexpected buffer is listed but not counted as a parameter.
  EXPECT_THAT(report.unexpected_tensors,
              ElementsAre("model.rotary_emb.inv_freq"));
  const int64_t d = 8, f = 12, v = 16, q = 2 * 4, kv = 1 * 4;
  const int64_t per_block = 2 * d + q * d + 2 * kv * d + d * q + 3 * d * f;
  EXPECT_EQ(report.num_parameters, 2 * v * d + 2 * per_block + d);

  const json out = InspectToJson(report);
  EXPECT_EQ(out["sharded"], true);
  EXPECT_EQ(out["linear_layers"].size(), 14u);
  EXPECT_EQ(out["tensors"].size(), tensors.size());
  const json& k_proj = out["linear_layers"][1];
  EXPECT_EQ(k_proj["name"], "model.layers.0.self_attn.k_proj");
  EXPECT_EQ(k_proj["out_features"], 4);
  EXPECT_EQ(k_proj["in_features"], 8);
  EXPECT_EQ(k_proj["input_group"], "attn_in");
  // N = 4 at 4 bits is 16 bits: less than a word.
  EXPECT_EQ(k_proj["gptq_v1"]["4"]["qzeros_fits"], false);
  EXPECT_EQ(k_proj["gptq_v1"]["8"]["qzeros_fits"], true);
  EXPECT_EQ(k_proj["group_sizes_dividing_in_features"], json::array());
  EXPECT_THAT(RenderInspectText(report), HasSubstr("(unexpected)"));
}

}  // namespace
}  // namespace quant

// The packed checkpoint's size predicted from the plan (output_size.h): the
// seed's worked example for a 7B model, one layer counted by hand from the
// format's layout, and the prediction against what real runs write in each
// format.
#include "core/pipeline/output_size.h"

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "core/base/file_util.h"
#include "core/model/linear_layers.h"
#include "core/model/model_config.h"
#include "core/pipeline/local_pipeline.h"
#include "core/pipeline/quantization_plan.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/pipeline/pipeline_fixture.h"
#include "tests/support/test_env.h"

namespace quant {
namespace {

using nlohmann::json;

// Llama-2-7B's config.json (the shapes only matter).
ModelConfig Llama7B() {
  auto config = ParseModelConfig(R"({
    "architectures": ["LlamaForCausalLM"], "model_type": "llama",
    "hidden_size": 4096, "intermediate_size": 11008,
    "num_hidden_layers": 32, "num_attention_heads": 32,
    "num_key_value_heads": 32, "vocab_size": 32000,
    "max_position_embeddings": 4096, "rms_norm_eps": 1e-05,
    "tie_word_embeddings": false, "torch_dtype": "float16"})");
  EXPECT_TRUE(config.ok()) << config.status();
  return config.ok() ? *config : ModelConfig();
}

TEST(OutputSizeTest, OneGptqLayerCountedFromTheLayout) {
  Recipe recipe;  // GPTQ, 4 bits, group 128, symmetric.
  LayerSettings settings;
  settings.bits = 4;
  settings.group_size = 128;
  // 4096 x 4096: qweight 512 x 4096 int32, qzeros 32 x 512 int32, scales
  // 32 x 4096 fp16, g_idx 4096 int32.
  EXPECT_EQ(PackedLayerBytes(OutputFormat::kGptq, recipe, settings, 4096, 4096,
                             DType::kF16),
            512 * 4096 * 4 + 32 * 512 * 4 + 32 * 4096 * 2 + 4096 * 4);
  // compressed-tensors, asymmetric, act-order by group: weight_packed
  // 4096 x 512, bf16 scales 4096 x 32, zero points 512 x 32, shape, g_idx.
  recipe.act_order = true;
  settings.grid = QuantGrid::kAsym;
  EXPECT_EQ(PackedLayerBytes(OutputFormat::kCompressedTensors, recipe, settings,
                             4096, 4096, DType::kBF16),
            4096 * 512 * 4 + 4096 * 32 * 2 + 512 * 32 * 4 + 16 + 4096 * 4);
  // 3 bits, K = 172 per row: 172 * 3 = 516 bits -> 17 words a row.
  settings.bits = 3;
  settings.group_size = 0;
  settings.grid = QuantGrid::kSym;
  recipe.act_order = false;
  EXPECT_EQ(PackedLayerBytes(OutputFormat::kCompressedTensors, recipe, settings,
                             64, 172, DType::kF32),
            64 * 17 * 4 + 64 * 4 + 16);
}

// The seed: "about 3.9 GB for a 7B model at 4-bit g128" (fp16 embeddings
// and lm_head kept).
TEST(OutputSizeTest, SevenBillionAtFourBitsGroup128IsAboutThreePointNineGB) {
  const ModelConfig config = Llama7B();
  const Recipe recipe;
  auto plan = PlanQuantization(config, recipe);
  ASSERT_TRUE(plan.ok()) << plan.status();
  auto size =
      ComputeOutputSize(SourceTensorsFromConfig(config, DType::kF16), config,
                        recipe, PlannedOutputDecisions(config, recipe, *plan));
  ASSERT_TRUE(size.ok()) << size.status();
  EXPECT_EQ(size->packed_layers, 32 * 7);
  EXPECT_EQ(size->kept_layers, 0);
  EXPECT_NEAR(static_cast<double>(size->source_tensor_bytes), 13.48e9, 0.01e9);
  EXPECT_GT(size->tensor_bytes, 3.8e9);
  EXPECT_LT(size->tensor_bytes, 4.0e9);
}

TEST(OutputSizeTest, ALayerMissingFromTheCheckpointIsNamed) {
  const ModelConfig config = Llama7B();
  std::vector<LayerOutputDecision> layers(1);
  layers[0].name = "model.layers.99.mlp.up_proj";
  layers[0].packed = true;
  auto size = ComputeOutputSize(SourceTensorsFromConfig(config, DType::kF16),
                                config, Recipe(), layers);
  ASSERT_FALSE(size.ok());
  EXPECT_NE(size.status().message().find("model.layers.99.mlp.up_proj"),
            std::string::npos)
      << size.status();
}

// The finalize's check: tensors written in another form than the layers'
// decisions say are refused, naming the difference.
TEST(OutputSizeTest, WrittenTensorsMustMatchTheDecisions) {
  QUANT_REQUIRE_SHARED(testing::Stories260KDir());
  auto checkpoint = Checkpoint::Open(testing::Stories260KDir());
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  const ModelConfig& config = (*checkpoint)->config();
  auto stored = SourceTensorsOf(**checkpoint);
  ASSERT_TRUE(stored.ok()) << stored.status();
  // Every tensor as the source stores it: right when every layer is kept.
  std::vector<PackedTensor> unpacked;
  for (const SourceTensor& t : *stored) {
    int64_t elements = 1;
    for (int64_t d : t.shape) elements *= d;
    unpacked.push_back({t.name, t.dtype, t.shape,
                        std::string(elements * DTypeSize(t.dtype), '\0')});
  }
  std::vector<LayerOutputDecision> decisions;
  for (const LinearLayerSpec& spec : ListAllLinearLayers(config)) {
    decisions.push_back({spec.name, LayerSettings(), false});
  }
  const Recipe recipe;
  auto kept =
      CheckWrittenTensorBytes(*stored, config, recipe, decisions, unpacked);
  ASSERT_TRUE(kept.ok()) << kept.status();
  int64_t source_bytes = 0;
  for (const PackedTensor& t : unpacked) source_bytes += t.bytes.size();
  EXPECT_EQ(*kept, source_bytes);

  // The audit says one layer is packed, but it went out unpacked.
  decisions[3].packed = true;
  decisions[3].settings.group_size = 0;
  auto wrong =
      CheckWrittenTensorBytes(*stored, config, recipe, decisions, unpacked);
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kInternal);
  EXPECT_NE(wrong.status().message().find("written unpacked or twice"),
            std::string::npos)
      << wrong.status();

  // A tensor missing.
  decisions[3].packed = false;
  unpacked.pop_back();
  auto missing =
      CheckWrittenTensorBytes(*stored, config, recipe, decisions, unpacked);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("missing"), std::string::npos)
      << missing.status();
}

// Data bytes of a safetensors file: all of it but the 8-byte length and
// the JSON header.
int64_t SafetensorsDataBytes(const std::string& path) {
  const std::string bytes = testing::ReadOrEmpty(path);
  if (bytes.size() < 8) return -1;
  uint64_t header = 0;
  std::memcpy(&header, bytes.data(), 8);  // Little-endian, as on x86.
  return static_cast<int64_t>(bytes.size() - 8 - header);
}

class PredictedOutputSizeTest : public testing::SharedModelTest {};

// What the plan predicts before anything runs is what real runs write,
// byte for byte of tensor data, in each format and layout (layers a format
// cannot hold kept, asymmetric zero points, act-order's g_idx, per-row
// groups), and the manifest records it.
TEST_F(PredictedOutputSizeTest, PlanPredictsWhatRunsWrite) {
  struct Case {
    const char* name;
    Recipe recipe;
  };
  std::vector<Case> cases;
  cases.push_back({"gptq_g32", testing::SmallRecipe(QuantMethod::kGptq, 32,
                                                    OutputFormat::kGptq,
                                                    Propagation::kSequential)});
  Recipe ct = testing::SmallRecipe(QuantMethod::kGptq, 32,
                                   OutputFormat::kCompressedTensors,
                                   Propagation::kIndependent);
  ct.grid = QuantGrid::kAsym;
  ct.act_order = true;
  cases.push_back({"ct_asym_actorder", ct});
  Recipe rtn = testing::SmallRecipe(QuantMethod::kRtn, 0,
                                    OutputFormat::kCompressedTensors,
                                    Propagation::kIndependent);
  rtn.bits = 8;
  cases.push_back({"ct_rtn_8bit_per_row", rtn});
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    LocalQuantizeOptions options;
    options.checkpoint_dir = testing::Stories260KDir();
    options.calibration_path = testing::TinyStoriesPath();
    options.out_dir = temp_ + "/" + c.name;
    options.recipe = c.recipe;
    auto result = RunLocalQuantization(options);
    ASSERT_TRUE(result.ok()) << result.status();

    auto checkpoint = Checkpoint::Open(testing::Stories260KDir());
    ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
    const ModelConfig& config = (*checkpoint)->config();
    auto plan = PlanQuantization(config, c.recipe);
    ASSERT_TRUE(plan.ok()) << plan.status();
    auto stored = SourceTensorsOf(**checkpoint);
    ASSERT_TRUE(stored.ok()) << stored.status();
    auto predicted =
        ComputeOutputSize(*stored, config, c.recipe,
                          PlannedOutputDecisions(config, c.recipe, *plan));
    ASSERT_TRUE(predicted.ok()) << predicted.status();

    int64_t written = 0;
    for (const auto& entry :
         std::filesystem::directory_iterator(options.out_dir)) {
      if (entry.path().extension() == ".safetensors") {
        written += SafetensorsDataBytes(entry.path().string());
      }
    }
    EXPECT_EQ(written, predicted->tensor_bytes);
    EXPECT_EQ(result->manifest["output"]["tensor_bytes"].get<int64_t>(),
              predicted->tensor_bytes);
    EXPECT_LT(predicted->tensor_bytes, predicted->source_tensor_bytes);
    EXPECT_EQ(predicted->packed_layers + predicted->kept_layers, 5 * 7);
  }
}

}  // namespace
}  // namespace quant

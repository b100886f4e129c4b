// Tests for GPTQ v1 packing: exact dequantization through the independent
// reference reader, the fixed zero words, refusals, configs, and a round
// trip through a safetensors file.
#include "core/pack/gptq_format.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/io/safetensors.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/pack/random_layer.h"
#include "tests/pack/reference_unpacker.h"
#include "tests/support/test_env.h"

namespace quant {
namespace {

using ::quant::testing::MakeRandomLayer;
using ::quant::testing::RandomLayerSpec;
using ::quant::testing::StoredTensors;
using ::testing::HasSubstr;

StoredTensors ToStored(const std::vector<PackedTensor>& tensors) {
  StoredTensors stored;
  for (const PackedTensor& t : tensors) {
    stored[t.name] = {t.dtype, t.shape, t.bytes};
  }
  return stored;
}

std::vector<float> Flatten(const RowMatrixF& m) {
  return std::vector<float>(m.data(), m.data() + m.size());
}

// Packs, reads back with the reference reader, compares exactly.
void ExpectExactRoundTrip(const RandomLayerSpec& spec) {
  SCOPED_TRACE(::testing::Message()
               << "bits " << spec.bits << " kind "
               << static_cast<int>(spec.kind) << " group " << spec.group_size
               << " act_order " << spec.act_order << " K " << spec.cols);
  const QuantizedLayer layer = MakeRandomLayer(spec);
  absl::StatusOr<PackedGptqLayer> packed = PackGptqV1(layer, "layer");
  ASSERT_TRUE(packed.ok()) << packed.status();
  EXPECT_EQ(packed->max_scale_rounding, 0.0f);
  EXPECT_EQ(packed->act_order, spec.act_order && spec.group_size > 0);
  absl::StatusOr<testing::UnpackedLayer> unpacked = testing::UnpackGptqV1(
      ToStored(GptqLayerTensors(*packed)), "layer", spec.bits);
  ASSERT_TRUE(unpacked.ok()) << unpacked.status();
  EXPECT_EQ(unpacked->rows, spec.rows);
  EXPECT_EQ(unpacked->cols, spec.cols);
  EXPECT_EQ(unpacked->weight, Flatten(layer.dequantized));
}

TEST(GptqFormatTest, RandomLayersDequantizeExactly) {
  uint32_t seed = 1;
  for (int bits : {2, 3, 4, 8}) {
    for (GridKind kind :
         {GridKind::kSym, GridKind::kSymRestricted, GridKind::kAsym}) {
      for (int64_t group_size : {0, 32, 64}) {
        for (bool act_order : {false, true}) {
          RandomLayerSpec spec;
          spec.kind = kind;
          spec.bits = bits;
          spec.rows = 64;
          spec.cols = 128;
          spec.group_size = group_size;
          spec.act_order = act_order;
          spec.seed = seed++;
          ExpectExactRoundTrip(spec);
        }
      }
    }
  }
}

TEST(GptqFormatTest, EightBitFitsKOf172PerRow) {
  // 172 * 8 / 32 = 43 whole words.
  RandomLayerSpec spec;
  spec.bits = 8;
  spec.rows = 8;
  spec.cols = 172;
  spec.group_size = 0;
  EXPECT_TRUE(CanPackGptq(8, 172, 8).fits);
  ExpectExactRoundTrip(spec);
}

TEST(GptqFormatTest, SymmetricZerosAreTheFixedPattern) {
  // Zero 2^(b-1) is stored as 2^(b-1)-1 in every b-bit field:
  // 4 bits: 7 -> 0x77777777; 2 bits: 1 -> 0b01 x16 = 0x55555555;
  // 8 bits: 127 -> 0x7F7F7F7F; 3 bits: 3 = 0b011 repeated in a 96-bit stream.
  const std::vector<std::pair<int, std::vector<uint32_t>>> cases = {
      {4, {0x77777777u}},
      {2, {0x55555555u}},
      {8, {0x7F7F7F7Fu}},
      {3, {0xDB6DB6DBu, 0xB6DB6DB6u, 0x6DB6DB6Du}}};
  for (const auto& [bits, pattern] : cases) {
    for (GridKind kind : {GridKind::kSym, GridKind::kSymRestricted}) {
      RandomLayerSpec spec;
      spec.kind = kind;
      spec.bits = bits;
      spec.rows = 64;
      spec.cols = 64;
      absl::StatusOr<PackedGptqLayer> packed =
          PackGptqV1(MakeRandomLayer(spec), "sym");
      ASSERT_TRUE(packed.ok()) << packed.status();
      ASSERT_EQ(packed->qzeros.size() % pattern.size(), 0u);
      for (size_t i = 0; i < packed->qzeros.size(); ++i) {
        EXPECT_EQ(packed->qzeros[i], pattern[i % pattern.size()])
            << "bits " << bits << " word " << i;
      }
    }
  }
}

TEST(GptqFormatTest, OneColumnPacksAsTheWorkedExample) {
  RandomLayerSpec spec;
  spec.rows = 8;
  spec.cols = 8;
  spec.group_size = 0;
  QuantizedLayer layer = MakeRandomLayer(spec);
  for (int c = 0; c < 8; ++c) layer.codes(0, c) = static_cast<uint8_t>(c + 1);
  testing::RecomputeDequantized(layer);
  absl::StatusOr<PackedGptqLayer> packed = PackGptqV1(layer, "example");
  ASSERT_TRUE(packed.ok()) << packed.status();
  // qweight is [1, 8]: word 0 is column (output) 0.
  EXPECT_EQ(packed->qweight[0], 0x87654321u);
}

TEST(GptqFormatTest, AsymmetricZeroOfZeroIsRefusedByName) {
  RandomLayerSpec spec;
  spec.kind = GridKind::kAsym;
  QuantizedLayer layer = MakeRandomLayer(spec);
  layer.zeros(1, 5) = 0.0f;
  testing::RecomputeDequantized(layer);
  absl::StatusOr<PackedGptqLayer> packed =
      PackGptqV1(layer, "model.layers.0.self_attn.q_proj");
  ASSERT_FALSE(packed.ok());
  EXPECT_EQ(packed.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(packed.status().message(),
              HasSubstr("model.layers.0.self_attn.q_proj"));
  EXPECT_THAT(packed.status().message(), HasSubstr("zero point 0"));
  EXPECT_THAT(packed.status().message(), HasSubstr("group 1, row 5"));
}

TEST(GptqFormatTest, ShapesThatDoNotFitAreRefused) {
  const GptqShapeFit k172 = CanPackGptq(64, 172, 4);
  EXPECT_FALSE(k172.fits);
  EXPECT_THAT(k172.reason, HasSubstr("K=172"));
  EXPECT_FALSE(CanPackGptq(64, 48, 3).fits);  // 3-bit needs K % 32 == 0.
  EXPECT_TRUE(CanPackGptq(64, 96, 3).fits);
  EXPECT_FALSE(CanPackGptq(20, 64, 4).fits);  // qzeros: N % 8 != 0.
  EXPECT_FALSE(CanPackGptq(64, 64, 5).fits);

  RandomLayerSpec spec;
  spec.cols = 172;
  spec.group_size = 0;
  absl::StatusOr<PackedGptqLayer> packed =
      PackGptqV1(MakeRandomLayer(spec), "model.layers.3.mlp.down_proj");
  ASSERT_FALSE(packed.ok());
  EXPECT_EQ(packed.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(packed.status().message(),
              HasSubstr("cannot pack model.layers.3.mlp.down_proj"));
  EXPECT_THAT(packed.status().message(), HasSubstr("K=172"));
}

TEST(GptqFormatTest, PartialLastGroupNeedsTheOption) {
  RandomLayerSpec spec;
  spec.cols = 96;
  spec.group_size = 64;
  const QuantizedLayer layer = MakeRandomLayer(spec);
  absl::StatusOr<PackedGptqLayer> refused = PackGptqV1(layer, "partial");
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr("group_size=64"));

  GptqPackOptions options;
  options.allow_partial_group = true;
  absl::StatusOr<PackedGptqLayer> packed =
      PackGptqV1(layer, "partial", options);
  ASSERT_TRUE(packed.ok()) << packed.status();
  EXPECT_EQ(packed->num_groups, 2);
  absl::StatusOr<testing::UnpackedLayer> unpacked =
      testing::UnpackGptqV1(ToStored(GptqLayerTensors(*packed)), "partial", 4);
  ASSERT_TRUE(unpacked.ok()) << unpacked.status();
  EXPECT_EQ(unpacked->weight, Flatten(layer.dequantized));
}

TEST(GptqFormatTest, InconsistentLayersAreInvalid) {
  RandomLayerSpec spec;
  QuantizedLayer layer = MakeRandomLayer(spec);
  layer.codes(2, 3) = 16;  // Would spill into the next 4-bit field.
  absl::StatusOr<PackedGptqLayer> packed = PackGptqV1(layer, "bad");
  ASSERT_FALSE(packed.ok());
  EXPECT_EQ(packed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(packed.status().message(), HasSubstr("[2, 3]"));

  layer = MakeRandomLayer(spec);
  layer.g_idx[7] = 99;
  EXPECT_THAT(PackGptqV1(layer, "bad").status().message(),
              HasSubstr("g_idx[7]"));

  layer = MakeRandomLayer(spec);
  layer.zeros(0, 0) = 7.0f;  // Symmetric grids need 2^(b-1).
  EXPECT_FALSE(PackGptqV1(layer, "bad").ok());
}

TEST(GptqFormatTest, ScalesAreRoundedToHalfAndReported) {
  RandomLayerSpec spec;
  QuantizedLayer layer = MakeRandomLayer(spec);
  const float exact = 0.0123456789f;
  layer.scales(0, 0) = exact;
  const float half = HalfToFloat(FloatToHalf(exact));
  ASSERT_NE(half, exact);
  absl::StatusOr<PackedGptqLayer> packed = PackGptqV1(layer, "round");
  ASSERT_TRUE(packed.ok()) << packed.status();
  EXPECT_EQ(packed->scales[0], half);
  EXPECT_FLOAT_EQ(packed->max_scale_rounding, std::fabs(half - exact) / exact);

  layer.scales(0, 0) = 1e6f;  // Beyond fp16's 65504.
  absl::StatusOr<PackedGptqLayer> overflow = PackGptqV1(layer, "huge");
  ASSERT_FALSE(overflow.ok());
  EXPECT_EQ(overflow.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(overflow.status().message(), HasSubstr("huge"));
}

TEST(GptqFormatTest, ConfigHasTheKeysReadersRequire) {
  GptqConfigOptions options;
  options.bits = 4;
  options.group_size = 0;
  options.desc_act = true;
  options.unquantized_layers = {"model.layers.0.mlp.down_proj"};
  options.quantizer = "quant-service:test";
  absl::StatusOr<nlohmann::json> config = GptqQuantizationConfig(options);
  ASSERT_TRUE(config.ok()) << config.status();
  // vLLM: quant_method, bits, group_size, desc_act, sym (gptq_marlin);
  // transformers/optimum: bits, group_size in {-1, >0}, damp_percent in
  // (0,1), desc_act, sym, true_sequential, checkpoint_format.
  EXPECT_EQ((*config)["quant_method"], "gptq");
  EXPECT_EQ((*config)["checkpoint_format"], "gptq");
  EXPECT_EQ((*config)["bits"], 4);
  EXPECT_EQ((*config)["group_size"], -1);
  EXPECT_EQ((*config)["desc_act"], true);
  EXPECT_EQ((*config)["sym"], true);
  EXPECT_EQ((*config)["static_groups"], false);
  EXPECT_EQ((*config)["true_sequential"], true);
  EXPECT_EQ((*config)["lm_head"], false);
  ASSERT_TRUE((*config)["damp_percent"].is_number());
  EXPECT_GT((*config)["damp_percent"].get<double>(), 0.0);
  EXPECT_LT((*config)["damp_percent"].get<double>(), 1.0);
  ASSERT_TRUE((*config)["dynamic"].is_object());
  EXPECT_TRUE((*config)["dynamic"].contains(
      "-:^model\\.layers\\.0\\.mlp\\.down_proj$"));
  EXPECT_EQ((*config)["meta"]["quantizer"][0], "quant-service:test");

  absl::StatusOr<nlohmann::json> file = GptqQuantizeConfigFile(options);
  ASSERT_TRUE(file.ok());
  for (const char* key :
       {"bits", "group_size", "desc_act", "sym", "damp_percent", "quant_method",
        "checkpoint_format"}) {
    EXPECT_EQ((*file)[key], (*config)[key]) << key;
  }

  options.damp_percent = 0.0;
  EXPECT_THAT(GptqQuantizationConfig(options).status().message(),
              HasSubstr("damp_percent"));
}

TEST(GptqFormatTest, LayersMustMatchTheirConfig) {
  RandomLayerSpec spec;
  spec.act_order = true;
  absl::StatusOr<PackedGptqLayer> packed =
      PackGptqV1(MakeRandomLayer(spec), "ordered");
  ASSERT_TRUE(packed.ok());
  GptqConfigOptions options;
  options.bits = 4;
  options.group_size = 32;
  EXPECT_THAT(CheckGptqLayerMatchesConfig(*packed, options).message(),
              HasSubstr("desc_act"));
  options.desc_act = true;
  EXPECT_TRUE(CheckGptqLayerMatchesConfig(*packed, options).ok());
  options.group_size = 128;
  EXPECT_FALSE(CheckGptqLayerMatchesConfig(*packed, options).ok());
}

TEST(GptqFormatTest, RoundTripsThroughSafetensors) {
  RandomLayerSpec spec;
  spec.kind = GridKind::kAsym;
  spec.act_order = true;
  const QuantizedLayer q = MakeRandomLayer(spec);
  spec.kind = GridKind::kSym;
  spec.bits = 4;
  spec.rows = 32;
  spec.seed = 9;
  const QuantizedLayer o = MakeRandomLayer(spec);
  absl::StatusOr<PackedGptqLayer> pq = PackGptqV1(q, "model.layers.0.q");
  absl::StatusOr<PackedGptqLayer> po = PackGptqV1(o, "model.layers.0.o");
  ASSERT_TRUE(pq.ok() && po.ok());
  std::vector<PackedTensor> tensors = GptqLayerTensors(*pq);
  for (PackedTensor& t : GptqLayerTensors(*po)) tensors.push_back(t);
  const std::vector<float> bias = {0.5f, -0.25f, 1.0f};
  absl::StatusOr<PackedTensor> bias_tensor =
      FloatTensorAs("model.layers.0.o.bias", {3}, bias, DType::kF16);
  ASSERT_TRUE(bias_tensor.ok());
  tensors.push_back(*bias_tensor);

  const std::string path = testing::MakeTempDir() + "/model.safetensors";
  ASSERT_TRUE(WriteSafetensors(path, AsTensorsToWrite(tensors)).ok());
  absl::StatusOr<std::unique_ptr<SafetensorsFile>> file =
      SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  const TensorInfo* qweight = (*file)->Find("model.layers.0.q.qweight");
  ASSERT_NE(qweight, nullptr);
  EXPECT_EQ(qweight->dtype, DType::kI32);
  EXPECT_EQ(qweight->shape, (std::vector<int64_t>{128 * 4 / 32, 64}));
  const TensorInfo* scales = (*file)->Find("model.layers.0.o.scales");
  ASSERT_NE(scales, nullptr);
  EXPECT_EQ(scales->dtype, DType::kF16);

  const StoredTensors stored = testing::ReadAllTensors(**file);
  for (const auto& [name, layer] :
       {std::pair<std::string, const QuantizedLayer*>{"model.layers.0.q", &q},
        {"model.layers.0.o", &o}}) {
    absl::StatusOr<testing::UnpackedLayer> unpacked =
        testing::UnpackGptqV1(stored, name, 4);
    ASSERT_TRUE(unpacked.ok()) << unpacked.status();
    EXPECT_EQ(unpacked->weight, Flatten(layer->dequantized)) << name;
  }
  absl::StatusOr<FloatTensor> read_bias =
      (*file)->ReadFloat("model.layers.0.o.bias");
  ASSERT_TRUE(read_bias.ok()) << read_bias.status();
  EXPECT_EQ(read_bias->data, bias);
}

}  // namespace
}  // namespace quant

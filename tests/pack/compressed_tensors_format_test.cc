// Tests for compressed-tensors pack-quantized packing: exact dequantization
// through the independent reference reader (which applies the library's
// signed convention), widths that are not multiples of the packing factor,
// zero points, the config block, and a safetensors round trip.
#include "core/pack/compressed_tensors_format.h"

#include <set>
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
using ::testing::Contains;
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

void ExpectExactRoundTrip(const RandomLayerSpec& spec,
                          const CompressedTensorsPackOptions& options) {
  SCOPED_TRACE(::testing::Message()
               << "bits " << spec.bits << " kind "
               << static_cast<int>(spec.kind) << " group " << spec.group_size
               << " act_order " << spec.act_order << " N " << spec.rows << " K "
               << spec.cols);
  const QuantizedLayer layer = MakeRandomLayer(spec);
  absl::StatusOr<PackedCompressedTensorsLayer> packed =
      PackCompressedTensors(layer, "layer", options);
  ASSERT_TRUE(packed.ok()) << packed.status();
  EXPECT_EQ(packed->max_scale_rounding, 0.0f);
  const bool symmetric = spec.kind != GridKind::kAsym;
  absl::StatusOr<testing::UnpackedLayer> unpacked =
      testing::UnpackCompressedTensors(
          ToStored(CompressedTensorsLayerTensors(*packed)), "layer", spec.bits,
          symmetric, spec.group_size);
  ASSERT_TRUE(unpacked.ok()) << unpacked.status();
  EXPECT_EQ(unpacked->rows, spec.rows);
  EXPECT_EQ(unpacked->cols, spec.cols);
  EXPECT_EQ(unpacked->weight, Flatten(layer.dequantized));
}

TEST(CompressedTensorsFormatTest, RandomLayersDequantizeExactly) {
  uint32_t seed = 100;
  for (int bits : {2, 3, 4, 8}) {
    for (GridKind kind :
         {GridKind::kSym, GridKind::kSymRestricted, GridKind::kAsym}) {
      for (int64_t group_size : {0, 32}) {
        for (bool act_order : {false, true}) {
          if (act_order && group_size == 0) continue;
          RandomLayerSpec spec;
          spec.kind = kind;
          spec.bits = bits;
          spec.rows = 20;  // Not a multiple of the zero-point packing.
          spec.cols = 96;
          spec.group_size = group_size;
          spec.act_order = act_order;
          spec.allow_zero_zero = true;  // Storable here, unlike GPTQ v1.
          spec.seed = seed++;
          CompressedTensorsPackOptions options;
          options.actorder = act_order ? CompressedTensorsActOrder::kGroup
                                       : CompressedTensorsActOrder::kNone;
          ExpectExactRoundTrip(spec, options);
        }
      }
    }
  }
}

TEST(CompressedTensorsFormatTest, PacksWidthsGptqCannot) {
  // K = 172 (the test model's down_proj input) per row and in groups of 4.
  for (int bits : {2, 4, 8}) {
    for (int64_t group_size : {0, 4}) {
      RandomLayerSpec spec;
      spec.kind = GridKind::kAsym;
      spec.bits = bits;
      spec.rows = 16;
      spec.cols = 172;
      spec.group_size = group_size;
      ExpectExactRoundTrip(spec, {});
    }
  }
  RandomLayerSpec spec;
  spec.rows = 16;
  spec.cols = 172;
  spec.group_size = 0;
  absl::StatusOr<PackedCompressedTensorsLayer> packed =
      PackCompressedTensors(MakeRandomLayer(spec), "down");
  ASSERT_TRUE(packed.ok()) << packed.status();
  EXPECT_EQ(packed->words_per_row, 22);  // ceil(172 / 8)
  EXPECT_EQ(packed->weight_packed.size(), 16u * 22u);
}

TEST(CompressedTensorsFormatTest, RowPacksAsTheWorkedExample) {
  RandomLayerSpec spec;
  spec.rows = 2;
  spec.cols = 9;
  spec.group_size = 0;
  QuantizedLayer layer = MakeRandomLayer(spec);
  for (int c = 0; c < 9; ++c) layer.codes(0, c) = static_cast<uint8_t>(c + 1);
  testing::RecomputeDequantized(layer);
  absl::StatusOr<PackedCompressedTensorsLayer> packed =
      PackCompressedTensors(layer, "example");
  ASSERT_TRUE(packed.ok()) << packed.status();
  ASSERT_EQ(packed->words_per_row, 2);
  EXPECT_EQ(packed->weight_packed[0], 0x87654321u);
  EXPECT_EQ(packed->weight_packed[1], 0x00000009u);
}

TEST(CompressedTensorsFormatTest, ZeroPointsPackAlongOutputs) {
  RandomLayerSpec spec;
  spec.kind = GridKind::kAsym;
  spec.rows = 20;
  spec.cols = 64;
  spec.group_size = 32;
  QuantizedLayer layer = MakeRandomLayer(spec);
  for (int r = 0; r < 20; ++r) {
    layer.zeros(0, r) = static_cast<float>(r % 16);
    layer.zeros(1, r) = 0.0f;
  }
  testing::RecomputeDequantized(layer);
  absl::StatusOr<PackedCompressedTensorsLayer> packed =
      PackCompressedTensors(layer, "zp");
  ASSERT_TRUE(packed.ok()) << packed.status();
  // [ceil(20/8), 2]: rows 0-7 of group 0 are zeros 0..7 -> 0x76543210.
  ASSERT_EQ(packed->weight_zero_point.size(), 3u * 2u);
  EXPECT_EQ(packed->weight_zero_point[0], 0x76543210u);
  EXPECT_EQ(packed->weight_zero_point[1], 0u);
  EXPECT_EQ(packed->weight_zero_point[2], 0xFEDCBA98u);
  EXPECT_EQ(packed->weight_zero_point[4], 0x00003210u);  // rows 16-19
  const std::vector<PackedTensor> tensors =
      CompressedTensorsLayerTensors(*packed);
  bool found = false;
  for (const PackedTensor& t : tensors) {
    if (t.name == "zp.weight_zero_point") {
      found = true;
      EXPECT_EQ(t.dtype, DType::kI32);
      EXPECT_EQ(t.shape, (std::vector<int64_t>{3, 2}));
    }
  }
  EXPECT_TRUE(found);
}

TEST(CompressedTensorsFormatTest, PartialGroupsAndHiddenPermutationsRefused) {
  const CompressedTensorsShapeFit fit =
      CanPackCompressedTensors(16, 172, 4, 32);
  EXPECT_FALSE(fit.fits);
  EXPECT_THAT(fit.reason, HasSubstr("K=172"));
  EXPECT_TRUE(CanPackCompressedTensors(16, 172, 4, 0).fits);

  RandomLayerSpec spec;
  spec.cols = 172;
  spec.group_size = 32;
  absl::StatusOr<PackedCompressedTensorsLayer> packed =
      PackCompressedTensors(MakeRandomLayer(spec), "model.layers.1.mlp.down");
  ASSERT_FALSE(packed.ok());
  EXPECT_EQ(packed.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(packed.status().message(), HasSubstr("model.layers.1.mlp.down"));

  // An act-order g_idx without actorder "group" would be silently lost.
  spec.cols = 128;
  spec.act_order = true;
  absl::StatusOr<PackedCompressedTensorsLayer> hidden =
      PackCompressedTensors(MakeRandomLayer(spec), "perm");
  ASSERT_FALSE(hidden.ok());
  EXPECT_THAT(hidden.status().message(), HasSubstr("actorder"));
}

TEST(CompressedTensorsFormatTest, Bf16ScalesAreStoredAsBf16) {
  RandomLayerSpec spec;
  spec.scale_dtype = DType::kBF16;
  CompressedTensorsPackOptions options;
  options.scale_dtype = DType::kBF16;
  ExpectExactRoundTrip(spec, options);
  absl::StatusOr<PackedCompressedTensorsLayer> packed =
      PackCompressedTensors(MakeRandomLayer(spec), "bf", options);
  ASSERT_TRUE(packed.ok());
  const std::vector<PackedTensor> tensors =
      CompressedTensorsLayerTensors(*packed);
  ASSERT_GE(tensors.size(), 2u);
  EXPECT_EQ(tensors[1].name, "bf.weight_scale");
  EXPECT_EQ(tensors[1].dtype, DType::kBF16);
  EXPECT_EQ(tensors[1].shape, (std::vector<int64_t>{64, 4}));
}

TEST(CompressedTensorsFormatTest, ConfigHasTheKeysReadersRequire) {
  CompressedTensorsConfigOptions options;
  options.bits = 4;
  options.group_size = 128;
  options.symmetric = false;
  options.actorder = CompressedTensorsActOrder::kGroup;
  options.ignore = {"model.layers.0.mlp.down_proj"};
  absl::StatusOr<nlohmann::json> config =
      CompressedTensorsQuantizationConfig(options);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ((*config)["quant_method"], "compressed-tensors");
  EXPECT_EQ((*config)["format"], "pack-quantized");
  EXPECT_EQ((*config)["quantization_status"], "compressed");
  const nlohmann::json& group = (*config)["config_groups"]["group_0"];
  EXPECT_EQ(group["targets"], nlohmann::json::array({"Linear"}));
  const nlohmann::json& weights = group["weights"];
  EXPECT_EQ(weights["num_bits"], 4);
  EXPECT_EQ(weights["type"], "int");
  EXPECT_EQ(weights["symmetric"], false);
  EXPECT_EQ(weights["strategy"], "group");
  EXPECT_EQ(weights["group_size"], 128);
  EXPECT_EQ(weights["actorder"], "group");
  EXPECT_EQ(weights["dynamic"], false);
  // QuantizationArgs forbids unknown keys.
  const std::set<std::string> allowed = {"num_bits",  "type",
                                         "symmetric", "group_size",
                                         "strategy",  "block_structure",
                                         "dynamic",   "actorder",
                                         "observer",  "observer_kwargs"};
  for (const auto& [key, value] : weights.items()) {
    EXPECT_TRUE(allowed.count(key)) << key;
  }
  std::vector<std::string> ignore = (*config)["ignore"];
  EXPECT_THAT(ignore, Contains("lm_head"));
  EXPECT_THAT(ignore, Contains("model.layers.0.mlp.down_proj"));

  options.group_size = 0;
  options.actorder = CompressedTensorsActOrder::kNone;
  config = CompressedTensorsQuantizationConfig(options);
  ASSERT_TRUE(config.ok());
  const nlohmann::json& channel =
      (*config)["config_groups"]["group_0"]["weights"];
  EXPECT_EQ(channel["strategy"], "channel");
  EXPECT_TRUE(channel["group_size"].is_null());
  EXPECT_TRUE(channel["actorder"].is_null());

  options.actorder = CompressedTensorsActOrder::kGroup;
  EXPECT_FALSE(CompressedTensorsQuantizationConfig(options).ok());
}

TEST(CompressedTensorsFormatTest, LayersMustMatchTheirConfig) {
  RandomLayerSpec spec;
  spec.kind = GridKind::kAsym;
  absl::StatusOr<PackedCompressedTensorsLayer> packed =
      PackCompressedTensors(MakeRandomLayer(spec), "asym");
  ASSERT_TRUE(packed.ok());
  CompressedTensorsConfigOptions options;
  options.group_size = 32;
  options.symmetric = true;
  EXPECT_THAT(
      CheckCompressedTensorsLayerMatchesConfig(*packed, options).message(),
      HasSubstr("zero points"));
  options.symmetric = false;
  EXPECT_TRUE(CheckCompressedTensorsLayerMatchesConfig(*packed, options).ok());
}

TEST(CompressedTensorsFormatTest, RoundTripsThroughSafetensors) {
  RandomLayerSpec spec;
  spec.kind = GridKind::kAsym;
  spec.rows = 24;
  spec.cols = 172;
  spec.group_size = 0;
  const QuantizedLayer layer = MakeRandomLayer(spec);
  absl::StatusOr<PackedCompressedTensorsLayer> packed =
      PackCompressedTensors(layer, "model.layers.0.mlp.down_proj");
  ASSERT_TRUE(packed.ok()) << packed.status();
  const std::vector<PackedTensor> tensors =
      CompressedTensorsLayerTensors(*packed);
  const std::string path = testing::MakeTempDir() + "/model.safetensors";
  ASSERT_TRUE(WriteSafetensors(path, AsTensorsToWrite(tensors)).ok());
  absl::StatusOr<std::unique_ptr<SafetensorsFile>> file =
      SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  const TensorInfo* shape =
      (*file)->Find("model.layers.0.mlp.down_proj.weight_shape");
  ASSERT_NE(shape, nullptr);
  EXPECT_EQ(shape->dtype, DType::kI64);
  const TensorInfo* weight =
      (*file)->Find("model.layers.0.mlp.down_proj.weight_packed");
  ASSERT_NE(weight, nullptr);
  EXPECT_EQ(weight->shape, (std::vector<int64_t>{24, 22}));
  absl::StatusOr<testing::UnpackedLayer> unpacked =
      testing::UnpackCompressedTensors(testing::ReadAllTensors(**file),
                                       "model.layers.0.mlp.down_proj", 4,
                                       /*symmetric=*/false, 0);
  ASSERT_TRUE(unpacked.ok()) << unpacked.status();
  EXPECT_EQ(unpacked->weight, Flatten(layer.dequantized));
}

}  // namespace
}  // namespace quant

// Tests for reading packed layers back: random layers packed in both formats
// at every width, written to a checkpoint directory (model.safetensors and a
// config.json with the format's quantization_config), read back and
// dequantized exactly; strict refusals of corrupt tensors and of configs the
// reader does not support.
#include "core/pack/packed_layer_reader.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/base/file_util.h"
#include "core/io/safetensors.h"
#include "core/io/tensor_collection.h"
#include "core/pack/bit_packing.h"
#include "core/pack/checkpoint_config.h"
#include "core/pack/compressed_tensors_format.h"
#include "core/pack/gptq_format.h"
#include "core/pack/packed_format_config.h"
#include "core/pack/packed_tensor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/pack/random_layer.h"
#include "tests/support/test_env.h"

namespace quant {
namespace {

using ::quant::testing::MakeRandomLayer;
using ::quant::testing::RandomLayerSpec;
using ::quant::testing::RecomputeDequantized;
using ::testing::HasSubstr;

constexpr char kLayer[] = "model.layers.0.self_attn.q_proj";
constexpr char kPlainLayer[] = "model.layers.0.mlp.down_proj";

// A checkpoint directory written and opened again.
struct WrittenCheckpoint {
  std::string dir;
  nlohmann::json quantization_config;
  std::unique_ptr<TensorCollection> tensors;
};

// Writes `tensors` (plus a plain [3, 5] kPlainLayer weight) to
// model.safetensors and `block` into config.json, then reads both back the
// way a checkpoint reader does.
WrittenCheckpoint WriteAndOpen(std::vector<PackedTensor> tensors,
                               const nlohmann::json& block) {
  WrittenCheckpoint written;
  written.dir = ::quant::testing::MakeTempDir();
  absl::StatusOr<PackedTensor> plain =
      FloatTensorAs(std::string(kPlainLayer) + ".weight", {3, 5},
                    std::vector<float>(15, 0.5f), DType::kF32);
  EXPECT_TRUE(plain.ok()) << plain.status();
  if (plain.ok()) tensors.push_back(*std::move(plain));
  absl::Status status = WriteSafetensors(written.dir + "/model.safetensors",
                                         AsTensorsToWrite(tensors));
  EXPECT_TRUE(status.ok()) << status;
  absl::StatusOr<std::string> config =
      WithQuantizationConfig(R"({"model_type": "llama"})", block);
  EXPECT_TRUE(config.ok()) << config.status();
  status = WriteFileAtomically(written.dir + "/config.json", *config);
  EXPECT_TRUE(status.ok()) << status;

  absl::StatusOr<std::string> text =
      ReadFileToString(written.dir + "/config.json", size_t{1} << 20);
  EXPECT_TRUE(text.ok()) << text.status();
  written.quantization_config =
      nlohmann::json::parse(*text)["quantization_config"];
  absl::StatusOr<std::unique_ptr<TensorCollection>> opened =
      TensorCollection::Open(written.dir);
  EXPECT_TRUE(opened.ok()) << opened.status();
  if (opened.ok()) written.tensors = *std::move(opened);
  return written;
}

// scales as stored (rounded through `stored`) * (codes - zeros), computed
// like the layer's own dequantization.
std::vector<float> ExpectedWeights(const QuantizedLayer& layer, DType stored) {
  std::vector<float> weights;
  weights.reserve(static_cast<size_t>(layer.rows * layer.cols));
  for (int64_t r = 0; r < layer.rows; ++r) {
    for (int64_t c = 0; c < layer.cols; ++c) {
      const int32_t g = layer.g_idx[static_cast<size_t>(c)];
      weights.push_back(
          RoundTripThrough(layer.scales(g, r), stored) *
          (static_cast<float>(layer.codes(r, c)) - layer.zeros(g, r)));
    }
  }
  return weights;
}

// Reads `written` back and checks storage detection and exact weights.
void ExpectReadsBack(const WrittenCheckpoint& written,
                     const QuantizedLayer& layer, DType stored) {
  ASSERT_NE(written.tensors, nullptr);
  absl::StatusOr<PackedLayerReader> reader = PackedLayerReader::Create(
      written.tensors.get(), written.quantization_config);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ(reader->config().bits, layer.grid.bits);
  EXPECT_EQ(reader->Storage(kLayer).value_or(LinearStorage::kPlain),
            LinearStorage::kPacked);
  EXPECT_EQ(reader->Storage(kPlainLayer).value_or(LinearStorage::kPacked),
            LinearStorage::kPlain);
  EXPECT_EQ(reader->Storage("model.layers.9.mlp.up_proj").status().code(),
            absl::StatusCode::kNotFound);
  absl::StatusOr<std::vector<std::string>> names =
      reader->PackedTensorNames(kLayer);
  ASSERT_TRUE(names.ok()) << names.status();
  for (const std::string& name : *names) {
    EXPECT_NE(written.tensors->Find(name).info, nullptr) << name;
  }
  absl::StatusOr<FloatTensor> weight =
      reader->Dequantize(kLayer, layer.rows, layer.cols);
  ASSERT_TRUE(weight.ok()) << weight.status();
  EXPECT_EQ(weight->shape, (std::vector<int64_t>{layer.rows, layer.cols}));
  EXPECT_EQ(weight->data, ExpectedWeights(layer, stored));
  // The shape the model config implies must be the stored one.
  EXPECT_FALSE(reader->Dequantize(kLayer, layer.rows, layer.cols * 2).ok());
}

// A random layer whose scales are nudged off the fp16/bf16 grids, so that
// storing them rounds and the reader must return the stored values.
QuantizedLayer MakeLayerWithUnroundedScales(const RandomLayerSpec& spec) {
  QuantizedLayer layer = MakeRandomLayer(spec);
  for (int64_t g = 0; g < layer.scales.rows(); ++g) {
    for (int64_t r = 0; r < layer.scales.cols(); ++r) {
      layer.scales(g, r) *= 1.0f + 3e-4f * static_cast<float>((g * 7 + r) % 5);
    }
  }
  RecomputeDequantized(layer);
  return layer;
}

struct Case {
  int bits;
  GridKind kind;
  int64_t group_size;
  bool act_order;
};

std::vector<Case> AllCases() {
  std::vector<Case> cases;
  for (int bits : {2, 3, 4, 8}) {
    for (GridKind kind : {GridKind::kSym, GridKind::kAsym}) {
      cases.push_back({bits, kind, 0, false});
      cases.push_back({bits, kind, 32, false});
      cases.push_back({bits, kind, 32, true});
    }
  }
  return cases;
}

std::string Describe(const Case& c) {
  return ::testing::PrintToString(c.bits) + " bits, " +
         (c.kind == GridKind::kAsym ? "asym" : "sym") + ", group " +
         ::testing::PrintToString(c.group_size) +
         (c.act_order ? ", act-order" : "");
}

TEST(PackedLayerReaderTest, GptqLayersReadBackExactly) {
  uint32_t seed = 10;
  for (const Case& c : AllCases()) {
    SCOPED_TRACE(Describe(c));
    RandomLayerSpec spec;
    spec.kind = c.kind;
    spec.bits = c.bits;
    spec.rows = 64;
    spec.cols = 128;
    spec.group_size = c.group_size;
    spec.act_order = c.act_order;
    spec.seed = ++seed;
    const QuantizedLayer layer = MakeLayerWithUnroundedScales(spec);
    absl::StatusOr<PackedGptqLayer> packed = PackGptqV1(layer, kLayer);
    ASSERT_TRUE(packed.ok()) << packed.status();
    EXPECT_GT(packed->max_scale_rounding, 0.0f);
    GptqConfigOptions options;
    options.bits = c.bits;
    options.group_size = c.group_size;
    options.sym = c.kind != GridKind::kAsym;
    options.desc_act = c.act_order;
    options.unquantized_layers = {kPlainLayer};
    absl::StatusOr<nlohmann::json> block = GptqQuantizationConfig(options);
    ASSERT_TRUE(block.ok()) << block.status();
    ExpectReadsBack(WriteAndOpen(GptqLayerTensors(*packed), *block), layer,
                    DType::kF16);
  }
}

TEST(PackedLayerReaderTest, CompressedTensorsLayersReadBackExactly) {
  uint32_t seed = 100;
  for (const Case& c : AllCases()) {
    for (DType scale_dtype : {DType::kF16, DType::kBF16}) {
      SCOPED_TRACE(Describe(c) + ", scales " +
                   std::string(DTypeName(scale_dtype)));
      RandomLayerSpec spec;
      spec.kind = c.kind;
      spec.bits = c.bits;
      // Widths that do not fill whole words (37 rows, 160 columns at 3 bits).
      spec.rows = 37;
      spec.cols = 160;
      spec.group_size = c.group_size;
      spec.act_order = c.act_order;
      spec.allow_zero_zero = true;
      spec.seed = ++seed;
      const QuantizedLayer layer = MakeLayerWithUnroundedScales(spec);
      CompressedTensorsPackOptions pack_options;
      pack_options.scale_dtype = scale_dtype;
      pack_options.actorder = c.act_order ? CompressedTensorsActOrder::kGroup
                                          : CompressedTensorsActOrder::kNone;
      absl::StatusOr<PackedCompressedTensorsLayer> packed =
          PackCompressedTensors(layer, kLayer, pack_options);
      ASSERT_TRUE(packed.ok()) << packed.status();
      EXPECT_GT(packed->max_scale_rounding, 0.0f);
      CompressedTensorsConfigOptions options;
      options.bits = c.bits;
      options.group_size = c.group_size;
      options.symmetric = c.kind != GridKind::kAsym;
      options.actorder = pack_options.actorder;
      options.ignore = {kPlainLayer};
      absl::StatusOr<nlohmann::json> block =
          CompressedTensorsQuantizationConfig(options);
      ASSERT_TRUE(block.ok()) << block.status();
      ExpectReadsBack(
          WriteAndOpen(CompressedTensorsLayerTensors(*packed), *block), layer,
          scale_dtype);
    }
  }
}

// compressed-tensors 0.18 packs 3-bit codes densely and says so with
// "version"; a file without one (0.17 and earlier, and this project's own
// before it wrote one) holds 10 whole codes a word. Both read back; a
// 0.17-layout file claiming 0.18 is refused by its shape, not misread.
TEST(PackedLayerReaderTest, CompressedTensorsVersionSelectsThePacking) {
  RandomLayerSpec spec;
  spec.kind = GridKind::kSym;
  spec.bits = 3;
  spec.rows = 5;
  spec.cols = 160;  // Dense: 15 words a row; 0.17: 16.
  spec.group_size = 32;
  spec.seed = 7;
  const QuantizedLayer layer = MakeLayerWithUnroundedScales(spec);
  absl::StatusOr<PackedCompressedTensorsLayer> dense =
      PackCompressedTensors(layer, kLayer);
  ASSERT_TRUE(dense.ok()) << dense.status();
  EXPECT_EQ(dense->words_per_row, 15);
  CompressedTensorsConfigOptions options;
  options.bits = 3;
  options.group_size = 32;
  options.ignore = {kPlainLayer};
  absl::StatusOr<nlohmann::json> block =
      CompressedTensorsQuantizationConfig(options);
  ASSERT_TRUE(block.ok()) << block.status();
  EXPECT_EQ((*block)["version"], kCompressedTensorsVersion);
  ExpectReadsBack(WriteAndOpen(CompressedTensorsLayerTensors(*dense), *block),
                  layer, DType::kF16);

  PackedCompressedTensorsLayer legacy = *dense;
  legacy.words_per_row = 16;
  legacy.weight_packed = PackRows(layer.codes.data(), layer.rows, layer.cols, 3,
                                  PackLayout::kWholeCodes);
  nlohmann::json legacy_block = *block;
  legacy_block.erase("version");
  ExpectReadsBack(
      WriteAndOpen(CompressedTensorsLayerTensors(legacy), legacy_block), layer,
      DType::kF16);
  legacy_block["version"] = "0.17.1";
  ExpectReadsBack(
      WriteAndOpen(CompressedTensorsLayerTensors(legacy), legacy_block), layer,
      DType::kF16);

  // The old words under a 0.18 claim: the reader expects 15 words a row.
  const WrittenCheckpoint misread =
      WriteAndOpen(CompressedTensorsLayerTensors(legacy), *block);
  ASSERT_NE(misread.tensors, nullptr);
  absl::StatusOr<PackedLayerReader> reader = PackedLayerReader::Create(
      misread.tensors.get(), misread.quantization_config);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_FALSE(reader->Dequantize(kLayer, layer.rows, layer.cols).ok());

  legacy_block["version"] = "new";
  EXPECT_THAT(ParsePackedFormatConfig(legacy_block).status().message(),
              ::testing::HasSubstr("\"version\" is \"new\", expected"));
}

// A symmetric-restricted grid stores zero 2^(b-1) like sym: both formats
// read it as symmetric.
TEST(PackedLayerReaderTest, SymRestrictedReadsAsSymmetric) {
  RandomLayerSpec spec;
  spec.kind = GridKind::kSymRestricted;
  spec.bits = 4;
  spec.rows = 32;
  spec.cols = 64;
  spec.group_size = 16;
  const QuantizedLayer layer = MakeRandomLayer(spec);
  absl::StatusOr<PackedGptqLayer> gptq = PackGptqV1(layer, kLayer);
  ASSERT_TRUE(gptq.ok()) << gptq.status();
  GptqConfigOptions gptq_options;
  gptq_options.group_size = 16;
  gptq_options.unquantized_layers = {kPlainLayer};
  ExpectReadsBack(WriteAndOpen(GptqLayerTensors(*gptq),
                               *GptqQuantizationConfig(gptq_options)),
                  layer, DType::kF16);
  absl::StatusOr<PackedCompressedTensorsLayer> ct =
      PackCompressedTensors(layer, kLayer);
  ASSERT_TRUE(ct.ok()) << ct.status();
  CompressedTensorsConfigOptions ct_options;
  ct_options.group_size = 16;
  ct_options.ignore = {kPlainLayer};
  ExpectReadsBack(
      WriteAndOpen(CompressedTensorsLayerTensors(*ct),
                   *CompressedTensorsQuantizationConfig(ct_options)),
      layer, DType::kF16);
}

// GPTQ fixture: one asymmetric act-order layer, tensors ready to corrupt.
class CorruptGptqTest : public ::testing::Test {
 protected:
  void SetUp() override {
    RandomLayerSpec spec;
    spec.kind = GridKind::kAsym;
    spec.rows = 32;
    spec.cols = 64;
    spec.group_size = 16;
    spec.act_order = true;
    layer_ = MakeRandomLayer(spec);
    absl::StatusOr<PackedGptqLayer> packed = PackGptqV1(layer_, kLayer);
    ASSERT_TRUE(packed.ok()) << packed.status();
    tensors_ = GptqLayerTensors(*packed);
    options_.group_size = 16;
    options_.sym = false;
    options_.desc_act = true;
    options_.unquantized_layers = {kPlainLayer};
  }

  PackedTensor& Tensor(const std::string& suffix) {
    for (PackedTensor& tensor : tensors_) {
      if (tensor.name == std::string(kLayer) + "." + suffix) return tensor;
    }
    ADD_FAILURE() << "no tensor " << suffix;
    return tensors_[0];
  }

  void Remove(const std::string& suffix) {
    const std::string name = std::string(kLayer) + "." + suffix;
    std::vector<PackedTensor> kept;
    for (PackedTensor& tensor : tensors_) {
      if (tensor.name != name) kept.push_back(std::move(tensor));
    }
    tensors_ = std::move(kept);
  }

  // Dequantizing the (corrupted) layer must fail with `code` and a message
  // naming `tensor` and containing `detail`.
  void ExpectError(absl::StatusCode code, const std::string& tensor,
                   const std::string& detail) {
    const WrittenCheckpoint written =
        WriteAndOpen(tensors_, *GptqQuantizationConfig(options_));
    ASSERT_NE(written.tensors, nullptr);
    absl::StatusOr<PackedLayerReader> reader = PackedLayerReader::Create(
        written.tensors.get(), written.quantization_config);
    ASSERT_TRUE(reader.ok()) << reader.status();
    absl::StatusOr<FloatTensor> weight =
        reader->Dequantize(kLayer, layer_.rows, layer_.cols);
    ASSERT_FALSE(weight.ok());
    EXPECT_EQ(weight.status().code(), code) << weight.status();
    EXPECT_THAT(weight.status().message(),
                HasSubstr("\"" + std::string(kLayer) + "." + tensor + "\""));
    EXPECT_THAT(weight.status().message(), HasSubstr(detail));
  }

  QuantizedLayer layer_;
  std::vector<PackedTensor> tensors_;
  GptqConfigOptions options_;
};

TEST_F(CorruptGptqTest, UncorruptedReads) {
  ExpectReadsBack(WriteAndOpen(tensors_, *GptqQuantizationConfig(options_)),
                  layer_, DType::kF16);
}

TEST_F(CorruptGptqTest, WrongScalesDtype) {
  PackedTensor& scales = Tensor("scales");
  std::vector<float> values(scales.bytes.size() / 2, 0.25f);
  scales.dtype = DType::kF32;
  scales.bytes = FloatsToBytes(values, DType::kF32);
  ExpectError(absl::StatusCode::kInvalidArgument, "scales",
              "dtype F32, expected F16");
}

TEST_F(CorruptGptqTest, WrongQweightShape) {
  PackedTensor& qweight = Tensor("qweight");
  std::swap(qweight.shape[0], qweight.shape[1]);
  ExpectError(absl::StatusCode::kInvalidArgument, "qweight", "shape [32, 8]");
}

TEST_F(CorruptGptqTest, WrongGroupCount) {
  // Two groups fewer than the config's group_size implies.
  PackedTensor& scales = Tensor("scales");
  scales.shape[0] -= 2;
  scales.bytes.resize(scales.bytes.size() - 2 * 32 * 2);
  ExpectError(absl::StatusCode::kInvalidArgument, "scales", "expected [4, 32]");
}

TEST_F(CorruptGptqTest, GroupIndexOutOfRange) {
  std::vector<int32_t> g_idx = layer_.g_idx;
  g_idx[5] = 4;
  Tensor("g_idx") =
      Int32Tensor(std::string(kLayer) + ".g_idx", {layer_.cols}, g_idx);
  ExpectError(absl::StatusCode::kInvalidArgument, "g_idx",
              "value 4 at index 5");
  g_idx[5] = -1;
  Tensor("g_idx") =
      Int32Tensor(std::string(kLayer) + ".g_idx", {layer_.cols}, g_idx);
  ExpectError(absl::StatusCode::kInvalidArgument, "g_idx", "value -1");
}

TEST_F(CorruptGptqTest, ActOrderGroupIndexWithoutDescAct) {
  options_.desc_act = false;
  ExpectError(absl::StatusCode::kInvalidArgument, "g_idx", "desc_act");
}

TEST_F(CorruptGptqTest, MissingQzeros) {
  Remove("qzeros");
  ExpectError(absl::StatusCode::kNotFound, "qzeros", "is missing");
}

TEST_F(CorruptGptqTest, BothPlainAndPacked) {
  absl::StatusOr<PackedTensor> plain = FloatTensorAs(
      std::string(kLayer) + ".weight", {layer_.rows, layer_.cols},
      std::vector<float>(layer_.rows * layer_.cols, 1.0f), DType::kF32);
  ASSERT_TRUE(plain.ok());
  tensors_.push_back(*plain);
  const WrittenCheckpoint written =
      WriteAndOpen(tensors_, *GptqQuantizationConfig(options_));
  absl::StatusOr<PackedLayerReader> reader = PackedLayerReader::Create(
      written.tensors.get(), written.quantization_config);
  ASSERT_TRUE(reader.ok()) << reader.status();
  absl::StatusOr<LinearStorage> storage = reader->Storage(kLayer);
  ASSERT_FALSE(storage.ok());
  EXPECT_THAT(storage.status().message(), HasSubstr("stored twice"));
}

// compressed-tensors fixture: an asymmetric act-order layer.
class CorruptCompressedTensorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    RandomLayerSpec spec;
    spec.kind = GridKind::kAsym;
    spec.rows = 20;
    spec.cols = 48;
    spec.group_size = 16;
    spec.act_order = true;
    spec.allow_zero_zero = true;
    layer_ = MakeRandomLayer(spec);
    CompressedTensorsPackOptions pack_options;
    pack_options.actorder = CompressedTensorsActOrder::kGroup;
    absl::StatusOr<PackedCompressedTensorsLayer> packed =
        PackCompressedTensors(layer_, kLayer, pack_options);
    ASSERT_TRUE(packed.ok()) << packed.status();
    tensors_ = CompressedTensorsLayerTensors(*packed);
    options_.group_size = 16;
    options_.symmetric = false;
    options_.actorder = CompressedTensorsActOrder::kGroup;
    options_.ignore = {kPlainLayer};
  }

  void Replace(PackedTensor tensor) {
    for (PackedTensor& existing : tensors_) {
      if (existing.name == tensor.name) existing = std::move(tensor);
    }
  }

  void Remove(const std::string& suffix) {
    const std::string name = std::string(kLayer) + "." + suffix;
    std::vector<PackedTensor> kept;
    for (PackedTensor& tensor : tensors_) {
      if (tensor.name != name) kept.push_back(std::move(tensor));
    }
    tensors_ = std::move(kept);
  }

  absl::Status Read() {
    const WrittenCheckpoint written =
        WriteAndOpen(tensors_, *CompressedTensorsQuantizationConfig(options_));
    if (written.tensors == nullptr) return absl::InternalError("not written");
    absl::StatusOr<PackedLayerReader> reader = PackedLayerReader::Create(
        written.tensors.get(), written.quantization_config);
    if (!reader.ok()) return reader.status();
    return reader->Dequantize(kLayer, layer_.rows, layer_.cols).status();
  }

  QuantizedLayer layer_;
  std::vector<PackedTensor> tensors_;
  CompressedTensorsConfigOptions options_;
};

TEST_F(CorruptCompressedTensorsTest, UncorruptedReads) {
  EXPECT_TRUE(Read().ok()) << Read();
}

TEST_F(CorruptCompressedTensorsTest, MissingZeroPointUnderAsymmetric) {
  Remove("weight_zero_point");
  const absl::Status status = Read();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(status.message(),
              HasSubstr(std::string(kLayer) + ".weight_zero_point"));
}

TEST_F(CorruptCompressedTensorsTest, ZeroPointUnderSymmetric) {
  options_.symmetric = true;
  const absl::Status status = Read();
  EXPECT_THAT(status.message(), HasSubstr("weight_zero_point\" is present"));
}

TEST_F(CorruptCompressedTensorsTest, WrongWeightShapeValues) {
  Replace(Int64Tensor(std::string(kLayer) + ".weight_shape", {2}, {20, 47}));
  const absl::Status status = Read();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("weight_shape\" holds [20, 47]"));
}

TEST_F(CorruptCompressedTensorsTest, WrongPackedDtype) {
  PackedTensor* packed = nullptr;
  for (PackedTensor& tensor : tensors_) {
    if (tensor.name == std::string(kLayer) + ".weight_packed") packed = &tensor;
  }
  ASSERT_NE(packed, nullptr);
  packed->dtype = DType::kF32;  // Same size, wrong type.
  const absl::Status status = Read();
  EXPECT_THAT(status.message(),
              HasSubstr("weight_packed\" has dtype F32, expected I32"));
}

TEST_F(CorruptCompressedTensorsTest, GroupIndexOutOfRange) {
  std::vector<int32_t> g_idx = layer_.g_idx;
  g_idx[47] = 3;
  Replace(Int32Tensor(std::string(kLayer) + ".weight_g_idx", {48}, g_idx));
  const absl::Status status = Read();
  EXPECT_THAT(status.message(), HasSubstr("weight_g_idx\" has value 3"));
}

TEST_F(CorruptCompressedTensorsTest, MissingGroupIndexUnderActorderGroup) {
  Remove("weight_g_idx");
  const absl::Status status = Read();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(status.message(), HasSubstr("weight_g_idx"));
}

// Per-layer schemes: GPTQ "dynamic" positive rules and compressed-tensors
// extra config groups give one layer other bits, groups and symmetry; the
// other layer uses the defaults.
TEST(PackedLayerReaderTest, PerLayerSchemesReadBackExactly) {
  const std::string other = "model.layers.0.self_attn.k_proj";
  RandomLayerSpec spec;
  spec.rows = 32;
  spec.cols = 64;
  spec.group_size = 32;
  const QuantizedLayer main_layer = MakeLayerWithUnroundedScales(spec);
  spec.kind = GridKind::kAsym;
  spec.bits = 8;
  spec.group_size = 0;
  spec.seed = 7;
  const QuantizedLayer other_layer = MakeLayerWithUnroundedScales(spec);

  std::vector<PackedTensor> gptq_tensors;
  for (const auto& [name, layer] :
       {std::pair<std::string, const QuantizedLayer*>{kLayer, &main_layer},
        {other, &other_layer}}) {
    absl::StatusOr<PackedGptqLayer> packed = PackGptqV1(*layer, name);
    ASSERT_TRUE(packed.ok()) << packed.status();
    for (PackedTensor& tensor : GptqLayerTensors(*packed)) {
      gptq_tensors.push_back(std::move(tensor));
    }
  }
  GptqConfigOptions gptq;
  gptq.group_size = 32;
  gptq.unquantized_layers = {kPlainLayer};
  gptq.layer_schemes = {{other, 8, 0, /*sym=*/false, /*desc_act=*/false}};
  WrittenCheckpoint written =
      WriteAndOpen(gptq_tensors, *GptqQuantizationConfig(gptq));
  ExpectReadsBack(written, main_layer, DType::kF16);
  absl::StatusOr<PackedLayerReader> reader = PackedLayerReader::Create(
      written.tensors.get(), written.quantization_config);
  ASSERT_TRUE(reader.ok()) << reader.status();
  absl::StatusOr<FloatTensor> weight = reader->Dequantize(other, 32, 64);
  ASSERT_TRUE(weight.ok()) << weight.status();
  EXPECT_EQ(weight->data, ExpectedWeights(other_layer, DType::kF16));

  std::vector<PackedTensor> ct_tensors;
  for (const auto& [name, layer] :
       {std::pair<std::string, const QuantizedLayer*>{kLayer, &main_layer},
        {other, &other_layer}}) {
    absl::StatusOr<PackedCompressedTensorsLayer> packed =
        PackCompressedTensors(*layer, name);
    ASSERT_TRUE(packed.ok()) << packed.status();
    for (PackedTensor& tensor : CompressedTensorsLayerTensors(*packed)) {
      ct_tensors.push_back(std::move(tensor));
    }
  }
  CompressedTensorsConfigOptions ct;
  ct.group_size = 32;
  ct.ignore = {kPlainLayer};
  CompressedTensorsLayerScheme scheme;
  scheme.layer = other;
  scheme.bits = 8;
  scheme.group_size = 0;
  scheme.symmetric = false;
  ct.layer_schemes = {scheme};
  written = WriteAndOpen(ct_tensors, *CompressedTensorsQuantizationConfig(ct));
  ExpectReadsBack(written, main_layer, DType::kF16);
  reader = PackedLayerReader::Create(written.tensors.get(),
                                     written.quantization_config);
  ASSERT_TRUE(reader.ok()) << reader.status();
  weight = reader->Dequantize(other, 32, 64);
  ASSERT_TRUE(weight.ok()) << weight.status();
  EXPECT_EQ(weight->data, ExpectedWeights(other_layer, DType::kF16));
}

// Storage must agree with the config: a plain layer the config quantizes,
// and a packed layer it leaves unquantized, are refused by name.
TEST(PackedLayerReaderTest, StorageMustMatchTheConfig) {
  RandomLayerSpec spec;
  spec.rows = 32;
  spec.cols = 64;
  const QuantizedLayer layer = MakeRandomLayer(spec);
  absl::StatusOr<PackedGptqLayer> packed = PackGptqV1(layer, kLayer);
  ASSERT_TRUE(packed.ok()) << packed.status();
  GptqConfigOptions options;  // kPlainLayer not declared unquantized.
  WrittenCheckpoint written =
      WriteAndOpen(GptqLayerTensors(*packed), *GptqQuantizationConfig(options));
  absl::StatusOr<PackedLayerReader> reader = PackedLayerReader::Create(
      written.tensors.get(), written.quantization_config);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_TRUE(reader->Storage(kLayer).ok());
  absl::StatusOr<LinearStorage> plain = reader->Storage(kPlainLayer);
  ASSERT_FALSE(plain.ok());
  EXPECT_THAT(plain.status().message(),
              HasSubstr(std::string(kPlainLayer) +
                        ".weight\" but the quantization_config quantizes"));

  options.unquantized_layers = {kPlainLayer, kLayer};
  written =
      WriteAndOpen(GptqLayerTensors(*packed), *GptqQuantizationConfig(options));
  reader = PackedLayerReader::Create(written.tensors.get(),
                                     written.quantization_config);
  ASSERT_TRUE(reader.ok()) << reader.status();
  absl::StatusOr<LinearStorage> excluded = reader->Storage(kLayer);
  ASSERT_FALSE(excluded.ok());
  EXPECT_THAT(excluded.status().message(), HasSubstr("leaves it unquantized"));
  EXPECT_FALSE(reader->Dequantize(kLayer, 32, 64).ok());
}

TEST(PackedFormatConfigTest, ParsesBothFormats) {
  GptqConfigOptions gptq;
  gptq.bits = 3;
  gptq.group_size = 64;
  gptq.sym = false;
  gptq.desc_act = true;
  gptq.unquantized_layers = {"model.layers.0.mlp.down_proj"};
  absl::StatusOr<PackedFormatConfig> parsed =
      ParsePackedFormatConfig(*GptqQuantizationConfig(gptq));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->format, PackedFormat::kGptq);
  EXPECT_EQ(parsed->bits, 3);
  EXPECT_EQ(parsed->group_size, 64);
  EXPECT_FALSE(parsed->symmetric);
  EXPECT_TRUE(parsed->act_order);

  gptq.group_size = 0;  // Written as -1.
  parsed = ParsePackedFormatConfig(*GptqQuantizationConfig(gptq));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->group_size, 0);

  CompressedTensorsConfigOptions ct;
  ct.bits = 8;
  ct.group_size = 128;
  ct.actorder = CompressedTensorsActOrder::kWeight;
  parsed = ParsePackedFormatConfig(*CompressedTensorsQuantizationConfig(ct));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->format, PackedFormat::kCompressedTensors);
  EXPECT_EQ(parsed->bits, 8);
  EXPECT_EQ(parsed->group_size, 128);
  EXPECT_TRUE(parsed->symmetric);
  EXPECT_FALSE(parsed->act_order);  // "weight": no g_idx stored.
  EXPECT_STREQ(PackedFormatName(parsed->format), "compressed-tensors");
}

TEST(PackedFormatConfigTest, RefusesWhatItCannotRead) {
  const nlohmann::json gptq = *GptqQuantizationConfig({});
  const nlohmann::json ct = *CompressedTensorsQuantizationConfig({});
  struct Refusal {
    nlohmann::json block;
    absl::StatusCode code;
    std::string detail;
  };
  std::vector<Refusal> refusals;
  nlohmann::json v2 = gptq;
  v2["checkpoint_format"] = "gptq_v2";
  refusals.push_back({v2, absl::StatusCode::kUnimplemented, "gptq_v2"});
  nlohmann::json bits = gptq;
  bits["bits"] = 5;
  refusals.push_back({bits, absl::StatusCode::kInvalidArgument, "\"bits\""});
  nlohmann::json group = gptq;
  group["group_size"] = 0;
  refusals.push_back(
      {group, absl::StatusCode::kInvalidArgument, "\"group_size\""});
  nlohmann::json dynamic = gptq;
  dynamic["dynamic"] = {{"+:.*down_proj", {{"bits", 8}}}};
  refusals.push_back(
      {dynamic, absl::StatusCode::kUnimplemented, "only literal module names"});
  nlohmann::json lm_head = gptq;
  lm_head["lm_head"] = true;
  refusals.push_back({lm_head, absl::StatusCode::kUnimplemented, "lm_head"});
  refusals.push_back({nlohmann::json{{"quant_method", "awq"}, {"bits", 4}},
                      absl::StatusCode::kUnimplemented,
                      "\"quant_method\": \"awq\""});
  nlohmann::json naive = ct;
  naive["format"] = "naive-quantized";
  refusals.push_back(
      {naive, absl::StatusCode::kUnimplemented, "naive-quantized"});
  nlohmann::json activations = ct;
  activations["config_groups"]["group_0"]["input_activations"] = {
      {"num_bits", 8}};
  refusals.push_back(
      {activations, absl::StatusCode::kUnimplemented, "input_activations"});
  nlohmann::json num_bits = ct;
  num_bits["config_groups"]["group_0"]["weights"]["num_bits"] = 6;
  refusals.push_back({num_bits, absl::StatusCode::kInvalidArgument,
                      "config_groups.group_0.weights.num_bits"});
  nlohmann::json tensor = ct;
  tensor["config_groups"]["group_0"]["weights"]["strategy"] = "tensor";
  refusals.push_back({tensor, absl::StatusCode::kUnimplemented, "strategy"});
  for (const Refusal& refusal : refusals) {
    SCOPED_TRACE(refusal.block.dump());
    absl::StatusOr<PackedFormatConfig> parsed =
        ParsePackedFormatConfig(refusal.block);
    ASSERT_FALSE(parsed.ok());
    EXPECT_EQ(parsed.status().code(), refusal.code) << parsed.status();
    EXPECT_THAT(parsed.status().message(), HasSubstr(refusal.detail));
  }
}

}  // namespace
}  // namespace quant

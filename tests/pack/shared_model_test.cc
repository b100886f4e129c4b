// Packs every linear layer of the real stories260K checkpoint (widths 32, 64
// and 172) after a per-row round-to-nearest done here, and checks which
// layers each format holds and that the held ones read back exactly.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "core/io/safetensors.h"
#include "core/pack/compressed_tensors_format.h"
#include "core/pack/gptq_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/pack/random_layer.h"
#include "tests/pack/reference_unpacker.h"
#include "tests/support/test_env.h"

namespace quant {
namespace {

using ::testing::HasSubstr;

constexpr char kModel[] = "models/stories260K/hf-f32/model.safetensors";

// Per-row symmetric RTN with an fp16 scale (so packing is exact).
QuantizedLayer QuantizePerRow(const FloatTensor& weight, int bits) {
  QuantizedLayer layer;
  layer.grid.kind = GridKind::kSym;
  layer.grid.bits = bits;
  layer.grid.group_size = 0;
  layer.rows = weight.shape[0];
  layer.cols = weight.shape[1];
  layer.codes.resize(layer.rows, layer.cols);
  layer.scales.resize(1, layer.rows);
  layer.zeros.resize(1, layer.rows);
  const int max_code = (1 << bits) - 1;
  const float zero = static_cast<float>(1 << (bits - 1));
  for (int64_t r = 0; r < layer.rows; ++r) {
    float amax = 0.0f;
    for (int64_t c = 0; c < layer.cols; ++c) {
      amax = std::max(amax, std::fabs(weight.data[r * layer.cols + c]));
    }
    const float scale =
        amax > 0 ? HalfToFloat(FloatToHalf(2 * amax / max_code)) : 1.0f;
    layer.scales(0, r) = scale;
    layer.zeros(0, r) = zero;
    for (int64_t c = 0; c < layer.cols; ++c) {
      const float q =
          std::nearbyint(weight.data[r * layer.cols + c] / scale) + zero;
      layer.codes(r, c) = static_cast<uint8_t>(
          std::clamp(q, 0.0f, static_cast<float>(max_code)));
    }
  }
  layer.g_idx.assign(layer.cols, 0);
  testing::RecomputeDequantized(layer);
  return layer;
}

TEST(SharedModelPackTest, EachFormatHoldsTheLayersItCan) {
  const std::string path = testing::SharedPath(kModel);
  QUANT_REQUIRE_SHARED(path);
  absl::StatusOr<std::unique_ptr<SafetensorsFile>> model =
      SafetensorsFile::Open(path);
  ASSERT_TRUE(model.ok()) << model.status();

  std::vector<PackedTensor> ct_tensors;
  std::vector<std::pair<std::string, QuantizedLayer>> layers;
  int gptq4_packed = 0;
  int gptq4_refused = 0;
  for (const TensorInfo& info : (*model)->tensors()) {
    if (!absl::EndsWith(info.name, "_proj.weight")) continue;
    const std::string name =
        info.name.substr(0, info.name.size() - std::string(".weight").size());
    absl::StatusOr<FloatTensor> weight = (*model)->ReadFloat(info.name);
    ASSERT_TRUE(weight.ok()) << weight.status();
    const int64_t n = weight->shape[0];
    const int64_t k = weight->shape[1];

    // GPTQ 4-bit holds only widths that are multiples of 8 on both sides.
    const QuantizedLayer q4 = QuantizePerRow(*weight, 4);
    absl::StatusOr<PackedGptqLayer> gptq4 = PackGptqV1(q4, name);
    EXPECT_EQ(gptq4.ok(), n % 8 == 0 && k % 8 == 0) << name;
    if (gptq4.ok()) {
      ++gptq4_packed;
      absl::StatusOr<testing::UnpackedLayer> back = testing::UnpackGptqV1(
          [&] {
            testing::StoredTensors stored;
            for (const PackedTensor& t : GptqLayerTensors(*gptq4)) {
              stored[t.name] = {t.dtype, t.shape, t.bytes};
            }
            return stored;
          }(),
          name, 4);
      ASSERT_TRUE(back.ok()) << back.status();
      EXPECT_EQ(back->weight,
                std::vector<float>(q4.dequantized.data(),
                                   q4.dequantized.data() + n * k));
    } else {
      ++gptq4_refused;
      EXPECT_THAT(gptq4.status().message(), HasSubstr(name));
      EXPECT_THAT(gptq4.status().message(), HasSubstr("172"));
    }

    // 172 * 8 / 32 = 43: GPTQ 8-bit holds every layer.
    EXPECT_TRUE(PackGptqV1(QuantizePerRow(*weight, 8), name).ok()) << name;

    // compressed-tensors per row holds every layer.
    absl::StatusOr<PackedCompressedTensorsLayer> ct =
        PackCompressedTensors(q4, name);
    ASSERT_TRUE(ct.ok()) << ct.status();
    for (PackedTensor& t : CompressedTensorsLayerTensors(*ct)) {
      ct_tensors.push_back(std::move(t));
    }
    layers.emplace_back(name, q4);
  }
  // 5 blocks x (q, k, v, o) fit GPTQ 4-bit; gate, up (N=172) and down
  // (K=172) do not.
  EXPECT_EQ(gptq4_packed, 20);
  EXPECT_EQ(gptq4_refused, 15);

  const std::string out = testing::MakeTempDir() + "/model.safetensors";
  ASSERT_TRUE(WriteSafetensors(out, AsTensorsToWrite(ct_tensors)).ok());
  absl::StatusOr<std::unique_ptr<SafetensorsFile>> packed =
      SafetensorsFile::Open(out);
  ASSERT_TRUE(packed.ok()) << packed.status();
  const testing::StoredTensors stored = testing::ReadAllTensors(**packed);
  for (const auto& [name, layer] : layers) {
    absl::StatusOr<testing::UnpackedLayer> back =
        testing::UnpackCompressedTensors(stored, name, 4, /*symmetric=*/true,
                                         0);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->weight, std::vector<float>(layer.dequantized.data(),
                                               layer.dequantized.data() +
                                                   layer.dequantized.size()))
        << name;
  }
}

}  // namespace
}  // namespace quant
